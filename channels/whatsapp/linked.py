"""LinkedAdapter: WhatsApp as a linked device of a person's account (`mode = "linked"`, docs/whatsapp.md).

neonize (Python bindings of whatsmeow) holds the multi-device session; its database is
state/whatsapp/<account>/session.db (0600, in a 0700 folder), linked once by `clawgate channels login
whatsapp` (login.py). The daemon never shows a QR code: an unlinked or logged-out device is one line
naming that command, and the channel stays failed until a restart (in a fleet the process holding the
account's lease retries instead, so a device linked meanwhile is connected by exactly one process).

Events come on neonize's Go callback thread, one at a time; the handler hands each to the daemon's loop
and blocks until `kit.receive` returned, so nothing is taken in out of order and whatsmeow's queue waits
while the kit stores. whatsmeow has already acknowledged the message to WhatsApp by then (neonize runs
whatsmeow without SynchronousAck, and its own Go handler only queues the event): a message in flight
when the process dies is not delivered again (docs/whatsapp.md, "What a crash can lose").

Sending: only to a chat that wrote first (remembered in the kit's store), text in WhatsApp's own
formatting (format.py, as the Cloud API mode), quoting the message answered while it is remembered,
"typing…" as composing presence, read receipts when `read_receipts = true`. Approvals are typed
(`/approve ID`) or an owner's 👍 / 👎 reaction on the prompt.
"""

from __future__ import annotations

import asyncio
import collections
import mimetypes
import re
import threading
from typing import Any, Callable, ClassVar, NoReturn

from pydantic import BaseModel

from clawgate.channels.kit import (
    Capabilities,
    ChannelAuthError,
    ChannelUnavailable,
    DeliveryError,
    PlatformAdapter,
    Target,
    Unconfirmed,
)
from clawgate.channels.kit.adapter import AdapterKit
from clawgate.channels.kit.probe import ProbeResult, logged_in
from clawgate.channels.whatsapp.format import MAX_CHARS, MAX_FILE_BYTES, render_chunks
from clawgate.channels.whatsapp.linked_client import (
    LinkedClient,
    NeonizeMissing,
    open_client,
    prepare_session_dir,
    session_path,
    stored_device,
)
from clawgate.channels.whatsapp.linked_events import Me, Reaction, classify
from clawgate.channels.whatsapp.settings import WhatsAppSettings
from clawgate.config.paths import Paths

CONNECT_SECONDS = 60.0  # WhatsApp answers a linked device's log-in within seconds; past this: retried
QUOTES_KEPT = 500  # messages remembered to be quoted by their reply (in memory: after a restart, no quote)
_RATE = re.compile(r"rate-overlimit|\b429\b|rate limit", re.I)
_UNSURE = re.compile(r"timed out|deadline exceeded|context canceled", re.I)
_DOWN = re.compile(r"not connected|websocket|not logged in|connection (?:closed|reset|refused)", re.I)
_PROMPT = re.compile(r"/approve ([A-Za-z0-9_-]+)")


def login_line(account: str) -> str:
    flag = "" if account == "default" else f" --account {account}"
    return f"run `clawgate channels login whatsapp{flag}`"


def _account_of(channel: str) -> str:
    return channel.split(".", 1)[1] if "." in channel else "default"


class LinkedAdapter(PlatformAdapter):
    name: ClassVar[str] = "whatsapp"
    settings_model: ClassVar[type[WhatsAppSettings]] = WhatsAppSettings
    account_fields: ClassVar[tuple[str, ...]] = ("mode", "phone_number_id")
    capabilities: ClassVar[Capabilities] = Capabilities(
        max_chars=MAX_CHARS, typing=True, files=True, max_file_bytes=MAX_FILE_BYTES)

    def __init__(self, settings: WhatsAppSettings, kit: AdapterKit) -> None:
        super().__init__(settings, kit)
        self.settings: WhatsAppSettings = settings
        self.account = str(getattr(kit, "account", None) or _account_of(kit.name))
        self.path = session_path(Paths.from_env().state, self.account)
        self.client: LinkedClient | None = None
        self.me: Me | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ended: asyncio.Event | None = None
        self._connected: asyncio.Event | None = None
        self._ending = ""  # why the session ended, as the line to show
        self._logged_out = False
        self._closing = threading.Event()
        self._sessions = 0
        self._sent: collections.OrderedDict[str, None] = collections.OrderedDict()
        self._quotes: collections.OrderedDict[str, Any] = collections.OrderedDict()  # id -> MessageEv
        self._last_in: dict[str, Any] = {}  # chat -> the latest MessageEv there (read receipts)
        self._read: set[str] = set()
        self.needs_link = False  # no linked session (never linked, or logged out): a gateway client may link it

    def singleton_name(self) -> str:
        """Per account: every linked account has mode "linked" and no phone number id, so the account names it."""
        return f"{super().singleton_name()}.{self.account}" if self.account != "default" else super().singleton_name()

    # -- lifecycle --------------------------------------------------------------------------
    @classmethod
    async def probe(cls, settings: BaseModel, account: str = "default") -> ProbeResult:
        """Linked and not logged out, read from the session database (no connection: a second connection of
        the same device would take the daemon's place)."""
        path = session_path(Paths.from_env().state, account)
        device = await asyncio.to_thread(stored_device, path)
        if device is None:
            return ProbeResult("fail", f"WhatsApp linked device not linked (no session in {path}; or logged out)",
                               login_line(account))
        return logged_in(f"linked device {device}")

    async def connect(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._closing = threading.Event()  # a new one per session: an old session's handler keeps its own
        self._logged_out, self._ending = False, ""
        prepare_session_dir(self.path)
        device = await asyncio.to_thread(stored_device, self.path)
        self.needs_link = device is None
        if device is None:
            self._unlinked(f"WhatsApp: this linked device is not linked yet, or was logged out: "
                           f"{login_line(self.account)}")
        self._sessions += 1  # neonize names each client in its Go registry, and a collected client's finalizer
        try:  # stops the name it had: a new name per session, so an old client can never stop a new one
            client = open_client(self.path, f"clawgate-{self.kit.name}-{self._sessions}", self.kit.log)
        except NeonizeMissing as exc:
            raise ChannelAuthError(f"WhatsApp: {exc}") from None
        self.client = client
        self._subscribe(client)
        self._ended, self._connected = asyncio.Event(), asyncio.Event()
        self._thread = threading.Thread(target=self._session, args=(client,), name=f"whatsapp-{self.account}",
                                        daemon=True)
        self._thread.start()
        waiter = asyncio.ensure_future(self._connected.wait())
        ender = asyncio.ensure_future(self._ended.wait())
        try:
            await asyncio.wait({waiter, ender}, timeout=CONNECT_SECONDS, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
            ender.cancel()
        if not self._connected.is_set():
            why = self._ending or f"WhatsApp did not answer within {CONNECT_SECONDS:.0f} s"
            logged_out = self._logged_out
            await self.disconnect()  # no half-open session left behind to reconnect on its own
            self._ending, self._logged_out = why, logged_out
            self._raise_ended(why)
        prepare_session_dir(self.path)  # whatsmeow wrote the database: its files user-only
        self.kit.log.info("connected to WhatsApp as linked device %s", device)

    def _session(self, client: LinkedClient) -> None:
        """neonize's connect() on its own thread: it returns only when the session ends."""
        try:
            client.connect()
        except Exception as exc:  # neonize raises NeonizeError with whatsmeow's reason
            self._ending = self._ending or f"{type(exc).__name__}: {exc}"
        finally:
            self._threadsafe(lambda: self._ended.set() if self._ended is not None else None)

    def _raise_ended(self, why: str) -> None:
        if self._logged_out:
            self.needs_link = True
            self._unlinked(f"WhatsApp logged this linked device out ({self._ending or 'from the phone'}): "
                           f"{login_line(self.account)}")
        raise ChannelUnavailable(f"WhatsApp: {self._ending or why}")

    def _unlinked(self, line: str) -> NoReturn:
        """No linked session. Alone: the channel fails with the line (linking restarts it). In a fleet the
        process holding the account's lease keeps it and retries with backoff, reading the shared session
        folder anew each time: linked from any process (or `channels login`), exactly one connects, and
        failover keeps working, where a failed channel would leave no process to take the session over."""
        if self.kit.in_fleet:
            raise ChannelUnavailable(f"{line}; retrying here until it is linked")
        raise ChannelAuthError(line)

    async def run(self) -> None:
        assert self._ended is not None
        await self._ended.wait()
        self._raise_ended("the connection ended")

    async def disconnect(self) -> None:
        """Stop the session, letting the handler finish the message in hand (the loop still runs it)."""
        client, self.client = self.client, None
        if client is not None:
            for stop in (client.disconnect, client.stop):
                try:
                    await asyncio.to_thread(stop)
                except Exception as exc:  # already gone: nothing to release
                    self.kit.log.debug("WhatsApp %s: %s", stop.__name__, exc)
        thread, self._thread = self._thread, None
        if thread is not None:
            await asyncio.to_thread(thread.join, 10)
        self._closing.set()  # a handler still waiting (the join timed out) lets go

    def status(self) -> dict[str, Any]:
        facts: dict[str, Any] = {"mode": "linked", "session": str(self.path), "needsLink": self.needs_link}
        if self.me is not None:
            facts["bot"] = self.me.number
        return facts

    # -- events (neonize's Go callback thread) ------------------------------------------------
    def _subscribe(self, client: LinkedClient) -> None:
        from neonize.events import (
            ConnectedEv,
            ConnectFailureEv,
            DisconnectedEv,
            LoggedOutEv,
            MessageEv,
            StreamReplacedEv,
            TemporaryBanEv,
        )

        client.event(ConnectedEv)(self._on_connected)
        client.event(DisconnectedEv)(lambda _c, _e: self._problem("disconnected from WhatsApp; reconnecting"))
        client.event(LoggedOutEv)(self._on_logged_out)
        client.event(StreamReplacedEv)(lambda _c, _e: self._end(
            "another client connected as this linked device (two daemons on one session?)"))
        client.event(TemporaryBanEv)(lambda _c, e: self._end(f"WhatsApp banned this number for now ({e.Code})"))
        client.event(ConnectFailureEv)(lambda _c, e: self._problem(f"WhatsApp refused the connection ({e.Reason})"))
        client.event(MessageEv)(self._on_message)
        client.event.qr(self._on_qr)

    def _threadsafe(self, call: Callable[[], Any]) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(call)

    def _on_connected(self, client: LinkedClient, _event: Any) -> None:
        self.me = self._me(client)

        def connected() -> None:
            self.kit.bot_name = self.me.number if self.me is not None else None
            if self._connected is not None:
                self._connected.set()
            self.kit.report_problem(None)
        self._threadsafe(connected)

    @staticmethod
    def _me(client: LinkedClient) -> Me:
        """The account's number and LID (neonize sets `client.me` before the first event)."""
        me = getattr(client, "me", None) or client.get_me()
        return Me(number=str(me.JID.User), lid=str(me.LID.User))

    def _problem(self, problem: str | None) -> None:
        self._threadsafe(lambda: self.kit.report_problem(problem))

    def _end(self, why: str) -> None:
        self._ending = why
        client = self.client
        if client is not None:
            threading.Thread(target=client.stop, daemon=True).start()  # never from inside neonize's callback

    def _on_logged_out(self, _client: LinkedClient, event: Any) -> None:
        self._logged_out = True
        self._end(f"reason {event.Reason}" if event.Reason else "from the phone")

    def _on_qr(self, _client: LinkedClient, _code: bytes) -> None:
        """The session was refused and whatsmeow asks to link anew: never shown by the daemon."""
        self._logged_out = True
        self._end("no linked session")

    def _on_message(self, _client: LinkedClient, event: Any) -> None:
        """Blocks neonize's callback thread until the kit stored the message (or the daemon is closing)."""
        loop = self._loop
        if loop is None or loop.is_closed() or self._closing.is_set():
            return
        future = asyncio.run_coroutine_threadsafe(self._take(event), loop)
        while not self._closing.is_set():
            try:
                future.result(timeout=1.0)
                return
            except TimeoutError:
                continue
            except Exception as exc:  # one bad message must not stop the channel
                self.kit.log.warning("WhatsApp message %s not taken in: %s", event.Info.ID, exc)
                return
        future.cancel()

    async def _take(self, event: Any) -> None:
        if self.me is None and self.client is not None:
            self.me = await asyncio.to_thread(self._me, self.client)
        assert self.me is not None
        found = classify(event, self.me, lambda mid: mid in self._sent, self._download)
        if found is None:
            return
        if isinstance(found, Reaction):
            await self._on_reaction(found)
            return
        self.kit.store.kv_set(f"wrote:{found.chat_id}", "1")
        self._remember(self._quotes, found.message_id, event)
        self._last_in[found.chat_id] = event
        await self.kit.receive(found)

    async def _on_reaction(self, reaction: Reaction) -> None:
        approval = self.kit.store.kv_get(f"prompt:{reaction.target_id}")
        if approval is None or reaction.approved is None:
            return
        line = await self.kit.approval_answer(approval, reaction.sender, reaction.approved, chat_id=reaction.chat_id)
        if line:
            await self._send_text(Target(reaction.chat_id), line, record=False)

    async def _download(self, message: Any) -> bytes:
        client = self._require()
        data = await asyncio.to_thread(client.download_any, message)
        return bytes(data or b"")

    @staticmethod
    def _remember(store: collections.OrderedDict[str, Any], key: str, value: Any) -> None:
        store[key] = value
        while len(store) > QUOTES_KEPT:
            store.popitem(last=False)

    # -- sending ----------------------------------------------------------------------------
    def render(self, markdown: str) -> list[str]:
        return render_chunks(markdown)

    def _require(self) -> LinkedClient:
        if self.client is None:
            raise DeliveryError("WhatsApp: not connected", permanent=False)
        return self.client

    def _may_send(self, chat_id: str) -> None:
        """Never message anyone who did not write first (a linked number writing first is how bans start)."""
        if self.kit.store.kv_get(f"wrote:{chat_id}") is None:
            raise DeliveryError(f"WhatsApp: not sent: {chat_id} never wrote to this number, and a linked device "
                                "only answers (the person writes first)", permanent=True)

    def _error(self, exc: Exception, what: str) -> Exception:
        text = str(exc)
        if _RATE.search(text):
            return DeliveryError(f"WhatsApp rate-limited {what}: {text}", retry_after=self.settings.rate_limit_retry_seconds)
        if _UNSURE.search(text):
            return Unconfirmed(f"WhatsApp did not confirm {what}: {text}")
        if _DOWN.search(text):
            return DeliveryError(f"WhatsApp could not send {what}: {text}", permanent=False)
        return DeliveryError(f"WhatsApp refused {what}: {text}", permanent=True)

    async def _send(self, target: Target, message: Any, what: str) -> str:
        client = self._require()
        from clawgate.channels.whatsapp.linked_proto import jid_of

        try:
            response = await asyncio.to_thread(client.send_message, jid_of(target.chat_id), message)
        except Exception as exc:
            raise self._error(exc, what) from None
        message_id = str(response.ID)
        self._remember(self._sent, message_id, None)
        return message_id

    async def send_text(self, target: Target, text: str) -> str:
        return await self._send_text(target, text)

    async def _send_text(self, target: Target, text: str, *, record: bool = True) -> str:
        from clawgate.channels.whatsapp.linked_proto import text_message

        self._may_send(target.chat_id)
        quoted = self._quotes.get(target.reply_to) if target.reply_to else None
        message_id = await self._send(target, text_message(text, quoted), "a message")
        found = _PROMPT.search(text) if record and text.lstrip().startswith(("🔐", "*🔐")) else None
        if found:  # an approval prompt: an owner's reaction on it answers it
            self.kit.store.kv_set(f"prompt:{message_id}", found.group(1))
        return message_id

    async def send_file(self, target: Target, name: str, data: bytes, caption: str) -> str:
        from clawgate.channels.whatsapp.linked_proto import document_message

        self._may_send(target.chat_id)
        client = self._require()
        mime = mimetypes.guess_type(name)[0] or "application/octet-stream"
        try:
            upload = await asyncio.to_thread(client.upload, data, _document_type())
        except Exception as exc:
            raise self._error(exc, "a file upload") from None
        return await self._send(target, document_message(upload, name, mime, caption, len(data)), "a document")

    async def typing(self, target: Target) -> None:
        """"typing…" in the chat; with read_receipts, the person's latest message marked read once."""
        client = self.client
        if client is None:
            return
        from clawgate.channels.whatsapp.linked_proto import composing, jid_of, read_receipt

        try:
            await asyncio.to_thread(client.send_chat_presence, jid_of(target.chat_id), *composing())
            last = self._last_in.get(target.chat_id)
            if self.settings.read_receipts and last is not None and last.Info.ID not in self._read:
                self._read.add(last.Info.ID)
                await asyncio.to_thread(lambda: client.mark_read(last.Info.ID, chat=last.Info.MessageSource.Chat,
                                                                 sender=last.Info.MessageSource.Sender,
                                                                 receipt=read_receipt()))
        except Exception as exc:  # a presence that does not show is not worth a retry
            self.kit.log.debug("WhatsApp typing indicator failed: %s", exc)


def _document_type() -> Any:
    from neonize.utils.enum import MediaType

    return MediaType.MediaDocument


__all__ = ["LinkedAdapter", "login_line"]
