"""SignalAdapter: Signal through signal-cli's JSON-RPC daemon, for the channel kit (docs/signal.md).

One connection per account: JSON-RPC calls to POST /api/v1/rpc and `receive` events from the
Server-Sent Events stream GET /api/v1/events, never a signal-cli process per message. Replies are
plain text with style ranges, quoting the message they answer; approvals are the prompt plus a 👍 /
👎 reaction from an owner (or `/approve ID`); files go out as data URIs, come in through
`getAttachment`. signal-cli acknowledges envelopes to Signal's servers itself and streams each event
once, so there is no acknowledgement to hold back: what arrives is handed to the kit at once.
"""

from __future__ import annotations

import base64
import mimetypes
import re
from typing import Any, Callable, ClassVar

from pydantic import BaseModel

from clawgate.channels.kit import (
    AdapterKit,
    Capabilities,
    ChannelAuthError,
    ChannelUnavailable,
    DeliveryError,
    PlatformAdapter,
    Target,
    Unconfirmed,
)
from clawgate.channels.kit.commands import KIT_COMMANDS
from clawgate.channels.kit.probe import ProbeResult, logged_in
from clawgate.channels.signal.events import GROUP_PREFIX, Self, incoming, reaction, split_key
from clawgate.channels.signal.link import LINK_WAIT_SECONDS, link_qr
from clawgate.channels.signal.render import MAX_CHARS, StyledText, render, to_signal
from clawgate.channels.signal.rpc import (
    IO_ERROR,
    METHOD_NOT_FOUND,
    NETWORK,
    RATE_LIMITED,
    RpcError,
    SentMaybe,
    SignalRpc,
)
from clawgate.channels.signal.settings import START_HINT, SignalSettings

MAX_FILE_BYTES = 100 * 1024 * 1024  # Signal's attachment limit
APPROVE_KEYS, DENY_KEYS = ("👍", "✅"), ("👎", "❌")


# a phone number or an account's UUID (lower case, as access entries are kept): a private chat's recipient
_RECIPIENT = re.compile(r"^(\+[1-9][0-9]{5,18}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$")


class SignalAdapter(PlatformAdapter):
    name: ClassVar[str] = "signal"
    settings_model: ClassVar[type[SignalSettings]] = SignalSettings
    account_fields: ClassVar[tuple[str, ...]] = ("account", "base_url")
    capabilities: ClassVar[Capabilities] = Capabilities(
        max_chars=MAX_CHARS, edit=False, typing=True, buttons=True, files=True, max_file_bytes=MAX_FILE_BYTES)

    def owner_chat(self, owner: str) -> str | None:
        """signal-cli sends to a phone number (`+15551234567`) or an account's UUID: either is the private
        chat with that person; anything else (a group, a username) is not."""
        return owner if _RECIPIENT.match(owner) else None

    def __init__(self, settings: SignalSettings, kit: AdapterKit) -> None:  # type: ignore[override]
        super().__init__(settings, kit)
        self.settings: SignalSettings = settings
        self.rpc = SignalRpc(settings.url(), settings.account.strip(), timeout=settings.request_timeout_seconds)
        self.me = Self(settings.account.strip(), None)
        self.version: str | None = None
        self.single = False  # signal-cli was started for one account (`-a NUMBER`)
        self.needs_link = False  # signal-cli holds no such account: a gateway client may link it (channels.link)

    # -- lifecycle --------------------------------------------------------------------------
    @classmethod
    async def probe(cls, settings: BaseModel) -> ProbeResult:
        """`version` and `listAccounts` answered by signal-cli, and the account among them."""
        assert isinstance(settings, SignalSettings)
        rpc = SignalRpc(settings.url(), settings.account.strip(), timeout=settings.request_timeout_seconds)
        try:
            version, accounts = await _check(rpc, settings)
        except ChannelAuthError as exc:
            return ProbeResult("fail", str(exc).removeprefix("Signal: "))  # the line names its fix
        except ChannelUnavailable:
            return ProbeResult("warn", f"cannot reach signal-cli at {settings.url()}",
                               f"{START_HINT}, or set channels.signal.base_url to where it listens")
        finally:
            await rpc.close()
        if accounts is None:
            return logged_in(f"signal-cli {version} answers (started for one account with -a: that it is "
                             f"{settings.account} shows with the first message)")
        return logged_in(f"signal-cli {version} serves {settings.account} ({len(accounts)} account(s) there)")

    @classmethod
    async def login(cls, settings: BaseModel, show: Callable[[str], None],
                    qr: Callable[[str], None] | None = None) -> str:
        """Link signal-cli as a secondary device of a phone (`clawgate channels login signal`): startLink's
        `sgnl://linkdevice` URI shown as a QR code (or handed as text to `qr`: a gateway client draws it),
        then finishLink waits for the phone to scan it. Returns the line saying which number is linked and
        the setting to put it in."""
        assert isinstance(settings, SignalSettings)
        rpc = SignalRpc(settings.url(), "", timeout=settings.request_timeout_seconds)
        try:
            uri = str((await rpc.call("startLink", account=False) or {}).get("deviceLinkUri") or "")
            qr(uri) if qr is not None else show(link_qr(uri))
            show("Scan it in Signal on the phone: Settings → Linked devices → Link new device (waiting up to 5 minutes).")
            linked = await rpc.call("finishLink", account=False, timeout=LINK_WAIT_SECONDS, deviceLinkUri=uri,
                                    deviceName=settings.link_device_name)
        except RpcError as e:
            raise ChannelAuthError(f"signal-cli did not link the device: {e.message}") from None
        except SentMaybe:
            raise ChannelAuthError("the phone did not scan the code within 5 minutes: run the command again") from None
        except NETWORK as e:
            raise ChannelUnavailable(f"signal-cli not reachable at {settings.url()} ({e or type(e).__name__}); "
                                     f"{START_HINT}") from None
        finally:
            await rpc.close()
        number = str((linked or {}).get("number") or "")
        if qr is not None and number == settings.account.strip():
            return f"Signal linked as {number}"
        return (f"linked: signal-cli now holds {number}; set [channels.signal] account = \"{number}\" "
                "and restart clawgate")

    async def connect(self) -> None:
        try:
            self.version, accounts = await _check(self.rpc, self.settings)
        except NoAccount:
            self.needs_link = True
            raise
        self.needs_link = False
        self.single = accounts is None
        if self.single:  # `daemon -a NUMBER`: every call is that account's, and it takes no `account` parameter
            self.rpc.account = ""
        self.me = Self(self.me.number, await self._own_uuid())
        self.kit.log.info("connected to signal-cli %s at %s as %s", self.version, self.settings.url(), self.me.number)

    async def _own_uuid(self) -> str | None:
        """The account's ACI, to know mentions of the bot by uuid: kept once learnt (getUserStatus asks
        Signal's servers)."""
        key = f"own_uuid:{self.me.number}"  # another account configured later is looked up afresh
        known = self.kit.store.kv_get(key)
        if known:
            return known
        try:
            status = await self.rpc.call("getUserStatus", recipient=[self.me.number])
        except (RpcError, SentMaybe, *NETWORK) as e:
            self.kit.log.warning("signal-cli getUserStatus failed (mentions by number only): %s", e)
            return None
        uuid = next((str(s.get("uuid")).lower() for s in status or [] if isinstance(s, dict) and s.get("uuid")), None)
        if uuid:
            self.kit.store.kv_set(key, uuid)
        return uuid

    async def run(self) -> None:
        try:
            async for event in self.rpc.events(silent_after=self.settings.lost_after_seconds):
                await self._on_event(event)
        except RpcError as e:
            if e.code == 400:
                self.needs_link = True
                raise NoAccount(_no_account(self.settings)) from None
            raise ChannelUnavailable(f"signal-cli event stream refused: {e}") from None
        except (*NETWORK, TimeoutError) as e:
            raise ChannelUnavailable(f"signal-cli event stream lost ({e or type(e).__name__}); {START_HINT}") from None
        raise ChannelUnavailable(f"signal-cli closed the event stream; {START_HINT}")

    async def disconnect(self) -> None:
        await self.rpc.close()

    def status(self) -> dict[str, Any]:
        facts: dict[str, Any] = {"bot": self.me.number, "signal_cli": self.settings.url(), "needsLink": self.needs_link}
        if self.version:
            facts["version"] = self.version
        return facts

    # -- receiving --------------------------------------------------------------------------
    async def _on_event(self, event: dict[str, Any]) -> None:
        if event.get("account") not in (None, self.me.number):
            if self.single:
                raise ChannelAuthError(f"signal-cli at {self.settings.url()} was started for {event.get('account')}, "
                                       f"not {self.me.number}: set [channels.signal] account to it, or start "
                                       "signal-cli without -a")
            return  # a multi-account daemon's event for another account
        answer = reaction(event)
        if answer is not None:
            await self._on_reaction(*answer)
            return
        message = incoming(event, self.me, self._fetch, self._commands())
        if message is None:
            return
        await self.kit.receive(message)
        # the newest envelope taken in (status, and what tests read as acknowledged); never moved back by a
        # redelivered older one
        stamp, cursor = int(message.metadata.get("signal_timestamp") or 0), self.kit.store.cursor()
        if cursor is None or not cursor.isdigit() or stamp > int(cursor):
            self.kit.store.save_cursor(str(stamp))

    def _commands(self) -> frozenset[str]:
        """The chat commands a group member may send without mentioning the bot."""
        return frozenset(name.lstrip("/").lower() for name, _ in (*self.kit.command_names(), *KIT_COMMANDS))

    async def _on_reaction(self, sender: Any, emoji: str, target: int, removed: bool, group: str | None) -> None:
        """👍 / 👎 on an approval prompt answers it; the kit decides whether this sender may."""
        approval_id = self.kit.store.kv_get(f"approval:{target}")
        approved = True if emoji.startswith(APPROVE_KEYS) else False if emoji.startswith(DENY_KEYS) else None
        if approval_id is None or approved is None or removed:
            return
        chat = f"{GROUP_PREFIX}{group}" if group else sender.user_id
        line = await self.kit.approval_answer(approval_id, sender, approved, chat_id=chat)
        if line:  # in the background: a failed send must not end the event stream
            self.kit.spawn(self._tell_reactor(chat, line))

    async def _tell_reactor(self, chat: str, line: str) -> None:
        """The kit's answer to a reaction on a prompt, as written (escaped: it may quote a request's words);
        a send that fails is logged, as the kit's own control lines are."""
        try:
            for chunk in self.render(self.kit.markdown.escape(line)):
                await self.send_text(Target(chat), chunk)
        except (DeliveryError, Unconfirmed) as e:
            self.kit.log.warning("Signal: the answer to a reaction was not sent: %s", e)

    async def _fetch(self, attachment: dict[str, Any], chat: str) -> bytes:
        """The bytes of a received attachment, from signal-cli's store (it downloaded them already)."""
        where = {"groupId": chat.removeprefix(GROUP_PREFIX)} if chat.startswith(GROUP_PREFIX) else {"recipient": chat}
        result = await self.rpc.call("getAttachment", id=str(attachment["id"]), **where)
        return base64.b64decode(str((result or {}).get("data") or ""))

    # -- sending ----------------------------------------------------------------------------
    def render(self, markdown: str) -> list[str]:
        return list(render(markdown))

    def _to(self, target: Target) -> dict[str, Any]:
        if target.chat_id.startswith(GROUP_PREFIX):
            return {"groupId": target.chat_id.removeprefix(GROUP_PREFIX)}
        return {"recipient": [target.chat_id]}

    async def _send(self, what: str, target: Target, **params: Any) -> str:
        quoted = split_key(target.reply_to) if target.reply_to else None
        if quoted:
            params.update(quoteTimestamp=quoted[1], quoteAuthor=quoted[0])
        try:
            result = await self.rpc.call("send", **self._to(target), **params)
        except RpcError as e:
            raise _delivery_error(e, self.settings) from None
        except SentMaybe as e:
            raise Unconfirmed(str(e)) from None
        except NETWORK as e:
            raise DeliveryError(f"signal-cli unreachable for {what} ({e or type(e).__name__}); {START_HINT}") from None
        return str((result or {}).get("timestamp") or "")

    async def send_text(self, target: Target, text: str) -> str:
        styles = list(getattr(text, "styles", ()))
        return await self._send("a message", target, message=str(text), **({"textStyle": styles} if styles else {}))

    async def send_file(self, target: Target, name: str, data: bytes, caption: str) -> str:
        """The file as a data URI (signal-cli's `data:<mime>;filename=<name>;base64,<data>`): nothing is
        written to a folder signal-cli would have to share with us."""
        mime = mimetypes.guess_type(name)[0] or "application/octet-stream"
        safe = "".join(c for c in name if c not in ";,\r\n") or "file"
        uri = f"data:{mime};filename={safe};base64,{base64.b64encode(data).decode()}"
        return await self._send("a file", target, message=caption, attachments=[uri])

    async def typing(self, target: Target) -> None:
        try:
            await self.rpc.call("sendTyping", **self._to(target))
        except (RpcError, SentMaybe, *NETWORK) as e:
            self.kit.log.debug("signal-cli sendTyping failed: %s", e)

    async def send_approval(self, target: Target, approval_id: str, text: str) -> str | None:
        """The prompt with how to answer it: a 👍 / 👎 reaction from an owner, or `/approve ID`."""
        hint = to_signal(f"React 👍 to approve or 👎 to deny (or reply `/approve {approval_id}` / "
                         f"`/deny {approval_id}`).")
        shift = len(str(text).encode("utf-16-le")) // 2 + 2
        styles = (*getattr(text, "styles", ()), *(_moved(s, shift) for s in hint.styles))
        stamp = await self.send_text(target, StyledText(f"{text}\n\n{hint}", styles))
        self.kit.store.kv_set(f"approval:{stamp}", approval_id)
        return stamp


def _moved(style: str, by: int) -> str:
    start, length, kind = style.split(":")
    return f"{int(start) + by}:{length}:{kind}"


class NoAccount(ChannelAuthError):
    """signal-cli holds no account of the configured number: linking one (channels login) is the fix."""


def _no_account(settings: SignalSettings) -> str:
    return (f"signal-cli at {settings.url()} has no account {settings.account}: link one with "
            "`clawgate channels login signal` or register the number with signal-cli, then set "
            "[channels.signal] account to it")


async def _check(rpc: SignalRpc, settings: SignalSettings) -> tuple[str, list[str] | None]:
    """signal-cli's version and accounts, the configured account among them; accounts None: a daemon started
    for one account (`-a NUMBER`), which has no listAccounts."""
    if not settings.account.strip():
        raise ChannelAuthError("Signal: [channels.signal] account is not set: set it to the bot's number "
                               "(+4915…) as signal-cli knows it (CLAWGATE_CHANNELS__SIGNAL__ACCOUNT)")
    if settings.account.strip() in {str(o).strip() for o in settings.owner}:
        raise ChannelAuthError("Signal: [channels.signal] account is an owner's own number: the bot would read and "
                               "answer everyone who writes to you; give it a number of its own (a second SIM, "
                               "a landline) and keep yours in owner")
    version: Any = None
    try:
        version = await rpc.call("version", account=False)
        accounts = await rpc.call("listAccounts", account=False)
    except (*NETWORK, SentMaybe) as e:
        raise ChannelUnavailable(f"signal-cli not reachable at {settings.url()} ({e or type(e).__name__}); "
                                 f"{START_HINT}") from None
    except RpcError as e:
        if e.code == METHOD_NOT_FOUND:  # `daemon -a NUMBER`: listAccounts is a multi-account method
            return str((version or {}).get("version") or "unknown"), None
        raise ChannelUnavailable(f"signal-cli at {settings.url()} answered: {e}; {START_HINT}") from None
    numbers = [str(a.get("number")) for a in accounts or [] if isinstance(a, dict)]
    if settings.account.strip() not in numbers:
        raise NoAccount(f"Signal: {_no_account(settings)}")
    return str((version or {}).get("version") or "unknown"), numbers


def _delivery_error(e: RpcError, settings: SignalSettings) -> DeliveryError:
    if e.code == RATE_LIMITED:
        return DeliveryError(f"signal-cli: {e}", retry_after=e.retry_after() or 60.0)
    if e.unknown_account():
        return DeliveryError(_no_account(settings), permanent=True, channel_down=True)
    if e.code == IO_ERROR or e.code >= 500:
        return DeliveryError(f"signal-cli: {e}")
    return DeliveryError(f"signal-cli refused the message: {e}", permanent=True)


__all__ = ["SignalAdapter"]
