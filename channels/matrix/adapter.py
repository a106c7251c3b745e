"""The Matrix channel: a bot account on any homeserver, through matrix-nio's AsyncClient.

Only the platform's protocol lives here (docs/channels.md): log in, the /sync loop, turning events
into `Incoming`, sending notices. Access, pairing, commands, the durable inbox, retries and approvals
are the kit's. The /sync position (`next_batch`) is saved only after `kit.receive` returned for every
event of that batch, so a crash re-reads the batch and the kit's dedupe drops what was already taken.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import mimetypes
import time
from typing import Any, ClassVar

import aiohttp
from nio import (
    AsyncClient,
    AsyncClientConfig,
    ErrorResponse,
    InviteMemberEvent,
    LoginResponse,
    MatrixRoom,
    MegolmEvent,
    ReactionEvent,
    RoomEncryptionEvent,
    RoomMessagesResponse,
    RoomSendResponse,
    SyncResponse,
    UploadResponse,
    WhoamiResponse,
)
from nio.api import MessageDirection
from nio.crypto import ENCRYPTION_ENABLED
from nio.crypto.attachments import decrypt_attachment
from nio.exceptions import EncryptionError, LocalProtocolError
from pydantic import BaseModel

from clawgate.channels.kit import (
    AdapterKit,
    Capabilities,
    ChannelAuthError,
    ChannelUnavailable,
    DeliveryError,
    Incoming,
    IncomingFile,
    PlatformAdapter,
    Sender,
    Target,
)
from clawgate.channels.kit.markdown import split_markdown, to_plain
from clawgate.channels.kit.probe import ProbeResult
from clawgate.channels.matrix import events as ev
from clawgate.channels.matrix.render import notice_content
from clawgate.channels.matrix.settings import MatrixSettings
from clawgate.channels.matrix.size import event_bytes, fit_events
from clawgate.config.paths import Paths

MAX_CHARS = 24_000  # the default max_message_bytes: body and HTML together stay under Synapse's 64 KiB per event
ENCRYPTED_NOTICE = ("I cannot read messages in end-to-end encrypted rooms, so I will not see anything written "
                    "here. Please talk to me in a room without encryption.")
ENCRYPTED_ROOMS = "encrypted_rooms"  # kv key: the rooms told, for `doctor`
UNDECRYPTABLE = ("I could not decrypt your message (this device did not get its key). Please send it again; "
                 "if this keeps happening, verify or re-invite the bot's device.")


def e2e_available() -> bool:
    """matrix-nio's end-to-end encryption needs vodozemac (extra `clawgate[matrix]` installs it)."""
    return bool(ENCRYPTION_ENABLED)
_AUTH_CODES = ("M_UNKNOWN_TOKEN", "M_MISSING_TOKEN", "M_FORBIDDEN", "M_USER_DEACTIVATED", "M_INVALID_USERNAME")
_CONNECTION_ERRORS = (aiohttp.ClientError, asyncio.TimeoutError, TimeoutError, OSError)


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8"))


def encrypted_rooms(stored: str | None) -> list[str]:
    """The encrypted rooms the bot has seen (and said it cannot read), from the adapter's kv value."""
    return list(json.loads(stored)) if stored else []


class MatrixAdapter(PlatformAdapter):
    """One bot account; rooms with more than two members are read only where the bot is mentioned."""

    name: ClassVar[str] = "matrix"
    settings_model: ClassVar[type[MatrixSettings]] = MatrixSettings
    account_fields: ClassVar[tuple[str, ...]] = ("homeserver", "user_id")
    capabilities: ClassVar[Capabilities] = Capabilities(
        max_chars=MAX_CHARS, edit=True, typing=True, buttons=True, threads=True,
        files=True, max_file_bytes=50 * 1024 * 1024)  # Synapse's default max_upload_size

    @staticmethod
    def split_chat(rest: str) -> tuple[str, str | None] | None:
        """`!room:server[:port]`, then `:$event` for a thread: a room id has ':' inside, an event id starts with '$'."""
        if not rest.startswith("!"):
            return None
        room, sep, thread = rest.partition(":$")
        return (room, "$" + thread) if sep else (rest, None)

    def __init__(self, settings: MatrixSettings, kit: AdapterKit) -> None:
        self.settings = settings
        self.kit = kit
        self.client: AsyncClient | None = None
        self.user_id = settings.user_id or ""
        self.display_name: str | None = None
        self._typing: set[str] = set()  # rooms where the bot shows "typing" now
        self.e2e = False  # end-to-end encryption on (settings.encryption and vodozemac installed)
        # set once the first /sync after a connect is in: before it the client knows no rooms, and a send
        # (a reply resent after a restart) would fail as "no such room" and burn its retries
        self.synced = asyncio.Event()

    # --- connecting -------------------------------------------------------------------------------
    @classmethod
    async def probe(cls, settings: BaseModel) -> ProbeResult:
        """Log in and whoami with matrix-nio (channels/matrix/probe.py)."""
        from .probe import probe

        assert isinstance(settings, MatrixSettings)
        return await probe(settings)

    async def connect(self) -> None:
        """Log in (token or password; the device id is kept so a restart is the same device)."""
        s = self.settings
        self.synced.clear()
        self.e2e = s.encryption and e2e_available()
        config = AsyncClientConfig(max_limit_exceeded=0, max_timeouts=0, encryption_enabled=self.e2e,
                                   store_sync_tokens=False, request_timeout=s.request_timeout_seconds)
        device_id = self.kit.store.kv_get("device_id")
        store = None
        if self.e2e:  # the device's keys (vodozemac account, sessions) live in the state folder, user-only
            account = getattr(self.kit, "account", "default")  # each account's device keys apart; the default's where they were
            store = Paths.from_env().state / ("matrix-e2e" if account == "default" else f"matrix-e2e.{account}")
            store.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.client = AsyncClient(s.homeserver or "", s.user_id or "", device_id=device_id, config=config,
                                  store_path=str(store) if store else "")
        try:
            if s.access_token is not None:
                self.client.access_token = s.access_token.get_secret_value()
                who = await self.client.whoami()
                if not isinstance(who, WhoamiResponse):
                    raise self._login_error(who, "access_token")
                if who.user_id != s.user_id:
                    raise ChannelAuthError(f"channels.matrix: the access token belongs to {who.user_id}, "
                                           f"not user_id {s.user_id}; fix one of them")
                self.client.user_id, self.client.device_id = who.user_id, who.device_id or device_id
                if self.e2e:
                    self.client.restore_login(who.user_id, self.client.device_id or "", self.client.access_token)
            else:
                assert s.password is not None
                login = await self.client.login(s.password.get_secret_value(), device_name=s.device_name)
                if not isinstance(login, LoginResponse):
                    raise self._login_error(login, "password")
            if self.client.device_id and self.client.device_id != device_id:
                self.kit.store.kv_set("device_id", self.client.device_id)
            if self.e2e and self.client.should_upload_keys:
                await self._checked(self.client.keys_upload(), "uploading the device's keys")
            named = await self.client.get_displayname(self.user_id)
            self.display_name = getattr(named, "displayname", None)
            self.kit.bot_name = self.user_id.split(":", 1)[0].lstrip("@")  # `/new@name`, should anyone write it
        except _CONNECTION_ERRORS as exc:
            await self._close_client()
            raise ChannelUnavailable(f"homeserver {s.homeserver} unreachable: {type(exc).__name__}") from exc
        except BaseException:
            await self._close_client()
            raise
        if self.kit.store.kv_get("first_connect_ms") is None:
            self.kit.store.kv_set("first_connect_ms", str(int(time.time() * 1000)))
        self.kit.log.info("connected to Matrix as %s on %s (device %s; encrypted rooms %s)", self.user_id,
                          s.homeserver, self.client.device_id if self.client else "?",
                          "read" if self.e2e else "not read")

    def status(self) -> dict[str, Any]:
        """For `clawgate channels` / status: who the bot is, once logged in."""
        return {"bot": self.user_id} if self.client is not None and self.client.access_token else {}

    def _login_error(self, err: Any, how: str) -> Exception:
        code = getattr(err, "status_code", None)
        if code in _AUTH_CODES:
            fix = ("create a new access token for the bot account" if how == "access_token"
                   else "check channels.matrix.user_id and password")
            return ChannelAuthError(f"channels.matrix: the homeserver refused the {how} ({code}); {fix}")
        return ChannelUnavailable(f"homeserver {self.settings.homeserver} refused the login: {code or err}")

    async def disconnect(self) -> None:
        await self._close_client()

    async def _close_client(self) -> None:
        client, self.client = self.client, None
        if client is not None:
            await client.close()

    # --- receiving --------------------------------------------------------------------------------
    async def run(self) -> None:
        """The /sync loop; the first sync after a start asks for full state (room members, encryption)."""
        assert self.client is not None
        since = self.kit.store.cursor()
        full_state = True
        sync_filter = {"room": {"timeline": {"limit": self.settings.timeline_limit}},
                       "presence": {"not_types": ["*"]}, "account_data": {"not_types": ["*"]}}
        while True:
            try:
                resp = await self.client.sync(timeout=int(self.settings.sync_timeout_seconds * 1000),
                                              since=since, full_state=full_state, sync_filter=sync_filter)
            except _CONNECTION_ERRORS as exc:
                raise ChannelUnavailable(f"/sync failed: {type(exc).__name__}") from exc
            if not isinstance(resp, SyncResponse):
                if getattr(resp, "status_code", None) in ("M_UNKNOWN_TOKEN", "M_MISSING_TOKEN"):
                    raise ChannelAuthError("channels.matrix: the homeserver no longer accepts the bot's login "
                                           "(M_UNKNOWN_TOKEN); log in again or set a new access_token")
                raise ChannelUnavailable(f"/sync failed: {resp}")
            self.synced.set()  # the client has the rooms now (set before handling: a handler may send)
            await self._handle_sync(resp, since)
            self.kit.store.save_cursor(resp.next_batch)
            if self.e2e:
                await self._keys()
            since, full_state = resp.next_batch, False

    async def _keys(self) -> None:
        """What matrix-nio's sync_forever does after each sync: publish, fetch and claim keys, send to-device."""
        assert self.client is not None
        if self.client.should_upload_keys:
            await self._checked(self.client.keys_upload(), "uploading the device's keys")
        if self.client.should_query_keys:
            await self._checked(self.client.keys_query(), "fetching the room members' keys")
        if self.client.should_claim_keys:
            await self._checked(self.client.keys_claim(self.client.get_users_for_key_claiming()), "claiming keys")
        await self.client.send_to_device_messages()

    async def _checked(self, call: Any, what: str) -> None:
        try:
            resp = await call
        except _CONNECTION_ERRORS as exc:
            raise ChannelUnavailable(f"{what} failed: {type(exc).__name__}") from exc
        if isinstance(resp, ErrorResponse):
            self.kit.log.warning("matrix: %s failed: %s", what, resp)

    async def _handle_sync(self, resp: SyncResponse, since: str | None) -> None:
        """Invites, then each joined room's events in order; every message handed to the kit."""
        for room_id, info in resp.rooms.invite.items():
            await self._on_invite(room_id, info.invite_state)
        floor = 0 if since else int(self.kit.store.kv_get("first_connect_ms") or 0)
        for room_id, info in resp.rooms.join.items():
            room = self.client.rooms.get(room_id) if self.client else None
            if room is None:
                continue
            timeline = list(info.timeline.events)
            if info.timeline.limited and since and info.timeline.prev_batch:
                timeline = await self._backfill(room_id, info.timeline.prev_batch, since) + timeline
            if not self.e2e and (room.encrypted or any(isinstance(e, RoomEncryptionEvent) for e in info.state)):
                await self._encrypted(room_id)
            for event in timeline:
                if getattr(event, "server_timestamp", 0) < floor:
                    continue  # history from before the bot's first start: never answered
                await self._on_event(room, event)

    async def _backfill(self, room_id: str, prev_batch: str, since: str) -> list[Any]:
        """The events a limited timeline left out (more arrived than timeline_limit while the bot was away)."""
        assert self.client is not None
        older: list[Any] = []
        start: str | None = prev_batch
        while start:
            page = await self.client.room_messages(room_id, start=start, end=since,
                                                   direction=MessageDirection.back, limit=100)
            if not isinstance(page, RoomMessagesResponse):
                raise ChannelUnavailable(f"fetching missed messages failed: {page}")
            if not page.chunk:
                break
            older.extend(page.chunk)
            start = page.end if page.end != start else None
        older.reverse()
        return older

    async def _on_invite(self, room_id: str, state: list[Any]) -> None:
        """Join invites from people the bot may talk to; refuse (leave) the rest."""
        assert self.client is not None
        invite = next((e for e in state if isinstance(e, InviteMemberEvent) and e.state_key == self.user_id
                       and e.membership == "invite"), None)
        if invite is None:
            return
        direct = bool((invite.content or {}).get("is_direct"))
        if self._may_invite(invite.sender, direct):
            joined = await self.client.join(room_id)
            self.kit.log.info("matrix: joined %s (invited by %s): %s", room_id, invite.sender,
                              "ok" if not isinstance(joined, ErrorResponse) else joined)
        else:
            await self.client.room_leave(room_id)
            self.kit.log.info("matrix: refused an invite to %s from %s (not an allowed user)", room_id, invite.sender)

    def _may_invite(self, user_id: str, direct: bool) -> bool:
        """Owners, allow_from and paired users always; anyone for a DM when dm_policy lets strangers
        write (open, or pairing: the code is given in the DM); anyone for a room only when group_policy is open."""
        who = Sender(user_id=user_id, username=user_id)
        policy = self.kit.policy
        if policy.is_owner(who) or policy.claim(who) is not None or policy.listed(who) \
                or self.kit.pairing.is_paired(self.kit.name, user_id):
            return True
        if direct:
            return self.settings.dm_policy in ("open", "pairing")
        return self.settings.group_policy == "open"

    async def _encrypted(self, room_id: str) -> None:
        """Say once per room that encrypted messages cannot be read, and remember the room for doctor."""
        rooms = encrypted_rooms(self.kit.store.kv_get(ENCRYPTED_ROOMS))
        if room_id in rooms:
            return
        self.kit.store.kv_set(ENCRYPTED_ROOMS, json.dumps(sorted({*rooms, room_id})))
        self.kit.log.warning("matrix: room %s is end-to-end encrypted; its messages cannot be read", room_id)
        await self.send_text(Target(chat_id=room_id), ENCRYPTED_NOTICE)

    async def _on_event(self, room: MatrixRoom, event: Any) -> None:
        if getattr(event, "sender", None) == self.user_id:
            return
        if isinstance(event, MegolmEvent):  # still encrypted: no E2E here, or this device lacks the key
            if not self.e2e:
                await self._encrypted(room.room_id)
            elif self.kit.store.first_time(f"undecryptable:{event.event_id}"):
                self.kit.log.warning("matrix: cannot decrypt %s in %s (no key for session %s)", event.event_id,
                                     room.room_id, event.session_id)
                if self.client is not None:
                    await self._checked(self.client.request_room_key(event), "asking for a room key")
                await self.send_text(Target(chat_id=room.room_id), UNDECRYPTABLE)
            return
        if isinstance(event, ReactionEvent):
            await self._on_reaction(room, event)
            return
        source = getattr(event, "source", {}) or {}
        if source.get("type") != "m.room.message" or "redacted_because" in source.get("unsigned", {}):
            return
        content = source.get("content") or {}
        if ev.is_edit(content):
            return
        incoming = self._incoming(room, event.event_id, event.sender, content)
        if incoming is not None:
            await self.kit.receive(incoming)

    def _incoming(self, room: MatrixRoom, event_id: str, sender: str, content: dict[str, Any]) -> Incoming | None:
        msgtype = content.get("msgtype")
        body = content.get("body") if isinstance(content.get("body"), str) else ""
        files: tuple[IncomingFile, ...] = ()
        if msgtype in ev.FILE_TYPES:
            file = self._file(content, msgtype)
            files, body = ((file,), "") if file is not None else ((), "")  # no file there: unreadable, said so
        elif msgtype not in ("m.text", "m.emote", "m.notice"):
            return None
        private = room.member_count <= 2
        addressed = private or ev.mentions(content, self.user_id, self.display_name)
        text = ev.strip_reply_fallback(body)
        if not private:
            text = ev.strip_mention(text, self.user_id, self.display_name)
        user = room.users.get(sender)
        return Incoming(
            message_id=event_id, chat_id=room.room_id,
            sender=Sender(user_id=sender, username=sender, display=user.display_name if user else None),
            private=private, text=text, addressed=addressed, thread_id=ev.thread_root(content), files=files,
            sender_is_bot=msgtype == "m.notice", unreadable=msgtype in ev.FILE_TYPES and not files,
            metadata={"message_id": event_id, "room_id": room.room_id, **({"reply_to": r} if (r := ev.reply_to(content)) else {})})

    def _file(self, content: dict[str, Any], msgtype: str) -> IncomingFile | None:
        """An attachment in the media repository (in an encrypted room: encrypted there, `content.file`);
        fetched only when the kit accepts its declared size."""
        secret = content.get("file") if isinstance(content.get("file"), dict) else None
        url = (secret or content).get("url")
        parts = ev.mxc_parts(url) if isinstance(url, str) else None
        if parts is None:
            return None
        info = content.get("info") if isinstance(content.get("info"), dict) else {}
        size = info.get("size") if isinstance(info.get("size"), int) else None
        name = content.get("filename") or content.get("body") or parts[1]

        async def fetch() -> bytes:
            data = await self._download(*parts)
            if secret is None or len(data) > self.settings.max_file_bytes:
                return data  # (over the limit: the kit refuses it as it is; AES-CTR keeps the size)
            try:
                return decrypt_attachment(data, secret["key"]["k"], secret["hashes"]["sha256"], secret["iv"])
            except (KeyError, TypeError, EncryptionError) as exc:
                raise DeliveryError(f"the encrypted attachment could not be decrypted: {exc}", permanent=True) from exc

        voice = msgtype == "m.audio" and ("org.matrix.msc3245.voice" in content or "m.voice" in content)
        kind = "image" if msgtype == "m.image" else "voice" if voice else "file"
        return IncomingFile(name=str(name), size=size, mime=info.get("mimetype"), fetch=fetch, kind=kind)

    async def _download(self, server: str, media_id: str) -> bytes:
        """Authenticated media download, read no further than the size limit allows."""
        assert self.client is not None and self.client.client_session is not None
        limit = self.settings.max_file_bytes
        url = f"{self.settings.homeserver}/_matrix/client/v1/media/download/{server}/{media_id}"
        headers = {"Authorization": f"Bearer {self.client.access_token}"}
        async with self.client.client_session.get(url, headers=headers) as resp:
            if resp.status != 200:
                raise DeliveryError(f"media download refused: HTTP {resp.status}", permanent=True)
            data = bytearray()
            async for chunk in resp.content.iter_chunked(64 * 1024):
                data += chunk
                if len(data) > limit:
                    break  # one byte past the limit is enough for the kit to refuse it
        return bytes(data[:limit + 1])

    async def _on_reaction(self, room: MatrixRoom, event: ReactionEvent) -> None:
        """👍 / 👎 on an approval prompt answers it; the kit decides whether this sender may."""
        approval_id = self.kit.store.kv_get(f"approval:{event.reacts_to}")
        approved = ev.reaction_answer(event.key)
        if approval_id is None or approved is None:
            return
        user = room.users.get(event.sender)
        sender = Sender(user_id=event.sender, username=event.sender, display=user.display_name if user else None)
        line = await self.kit.approval_answer(approval_id, sender, approved, chat_id=room.room_id)
        if line:  # no reply_to: two people may be told the same line about the same prompt
            await self.send_text(Target(chat_id=room.room_id), line)

    # --- sending ----------------------------------------------------------------------------------
    def render(self, markdown: str) -> list[str]:
        """Chunks stay Markdown here: at most max_message_bytes of text, and each one's event (body, HTML,
        encryption: channels/matrix/size.py) under the homeserver's limit; send_text makes each a notice."""
        pieces = split_markdown(markdown, self.settings.max_message_bytes, measure=_utf8_len)
        return fit_events(pieces, lambda piece: event_bytes(notice_content(piece, to_plain(piece)), encrypted=self.e2e))

    def _relation(self, target: Target) -> dict[str, Any]:
        if target.thread_id:
            return {"m.relates_to": {"rel_type": ev.THREAD, "event_id": target.thread_id, "is_falling_back": True,
                                     "m.in_reply_to": {"event_id": target.reply_to or target.thread_id}}}
        return {}

    async def send_text(self, target: Target, text: str) -> str:
        content = {**notice_content(text, to_plain(text)), **self._relation(target)}
        event_id = await self._send(target.chat_id, "m.room.message", content, txn_id=self._txn_id(target, text))
        if target.chat_id in self._typing and self.client is not None:  # the answer is there: stop "typing"
            self._typing.discard(target.chat_id)
            await self.client.room_typing(target.chat_id, False)
        return event_id

    @staticmethod
    def _txn_id(target: Target, text: str) -> str | None:
        """A part of a reply gets a transaction id derived from its send_key (or, without one, the first part
        from the message it answers): sent again after a crash (sent, but not yet recorded as sent), the
        homeserver recognises it and stores no second event (transaction ids are kept per device for a
        day). Other messages get a fresh one."""
        if digest := target.key_digest(target.chat_id):
            return "cg" + digest[:40]
        if target.reply_to is None:
            return None
        key = "\0".join((target.chat_id, target.thread_id or "", target.reply_to, text))
        return "cg" + hashlib.sha256(key.encode()).hexdigest()[:40]

    async def _first_sync(self) -> None:
        """Wait (bounded) until the client knows its rooms; a DeliveryError to retry later otherwise."""
        if self.synced.is_set():
            return
        wait = self.settings.request_timeout_seconds + self.settings.sync_timeout_seconds
        try:
            await asyncio.wait_for(self.synced.wait(), timeout=wait)
        except asyncio.TimeoutError:
            raise DeliveryError("matrix has not finished its first sync (the rooms are not known yet)",
                                retry_after=5.0) from None

    async def _send(self, room_id: str, event_type: str, content: dict[str, Any], txn_id: str | None = None) -> str:
        if self.client is None:
            raise DeliveryError("matrix is not connected")
        await self._first_sync()
        try:
            resp = await self.client.room_send(room_id, event_type, content, tx_id=txn_id,
                                               ignore_unverified_devices=True)
        except _CONNECTION_ERRORS as exc:
            raise DeliveryError(f"homeserver unreachable: {type(exc).__name__}") from exc
        except LocalProtocolError as exc:  # an encrypted send before the room's state arrived: later
            raise DeliveryError(f"room {room_id} not ready for an encrypted send: {exc}") from exc
        if isinstance(resp, RoomSendResponse):
            return resp.event_id
        code = getattr(resp, "status_code", None)
        if code == "M_LIMIT_EXCEEDED":
            retry = getattr(resp, "retry_after_ms", None)
            raise DeliveryError(f"rate limited: {resp}", retry_after=(retry or 1000) / 1000)
        transport = getattr(resp, "transport_response", None)
        status = getattr(transport, "status", 0) or 0
        if code == "M_TOO_LARGE" or status == 413:
            raise DeliveryError(f"the homeserver refused the event as too large: {resp}", permanent=True, too_large=True)
        raise DeliveryError(f"send refused: {resp}", permanent=400 <= status < 500 or code in _AUTH_CODES)

    async def send_file(self, target: Target, name: str, data: bytes, caption: str) -> str:
        """Upload to the media repository (encrypted in an encrypted room), then an m.file event naming it."""
        if self.client is None:
            raise DeliveryError("matrix is not connected")
        await self._first_sync()
        room = self.client.rooms.get(target.chat_id)
        encrypt = self.e2e and room is not None and room.encrypted
        mime = mimetypes.guess_type(name)[0] or "application/octet-stream"
        try:
            resp, keys = await self.client.upload(io.BytesIO(data), content_type=mime, filename=name,
                                                  filesize=len(data), encrypt=encrypt)
        except _CONNECTION_ERRORS as exc:
            raise DeliveryError(f"homeserver unreachable: {type(exc).__name__}") from exc
        if not isinstance(resp, UploadResponse):
            status = getattr(getattr(resp, "transport_response", None), "status", 0) or 0
            raise DeliveryError(f"upload refused: {resp}", permanent=400 <= status < 500)
        where = {"file": {**keys, "url": resp.content_uri}} if keys else {"url": resp.content_uri}
        content = {"msgtype": "m.file", "body": caption or name, "filename": name, **where,
                   "info": {"size": len(data), "mimetype": mime}, **self._relation(target)}
        # keyed as a text part is: the event sent again after a crash is recognised, not a second file
        txn_id = self._txn_id(target, "") if target.send_key else None
        return await self._send(target.chat_id, "m.room.message", content, txn_id=txn_id)

    async def typing(self, target: Target) -> None:
        """Refreshed by the kit every typing_interval_seconds while the agent works; it lapses a little after."""
        if self.client is not None:
            self._typing.add(target.chat_id)
            await self.client.room_typing(target.chat_id, True,
                                          timeout=int(self.settings.typing_interval_seconds * 1000) + 3000)

    async def edit_text(self, target: Target, message_id: str, text: str) -> None:
        new = notice_content(text, to_plain(text))
        content = {**new, "body": f"* {new['body']}", "m.new_content": new,
                   "m.relates_to": {"rel_type": ev.REPLACE, "event_id": message_id}}
        await self._send(target.chat_id, "m.room.message", content)

    async def delete(self, target: Target, message_id: str) -> None:
        if self.client is not None:
            await self.client.room_redact(target.chat_id, message_id)

    async def send_approval(self, target: Target, approval_id: str, text: str) -> str | None:
        """The prompt, with 👍 and 👎 already under it: pressing one answers (owners only, the kit checks)."""
        hint = f"{text}\n\nReact 👍 to approve or 👎 to deny (or reply `/approve {approval_id}` / `/deny {approval_id}`)."
        event_id = await self.send_text(target, hint)
        self.kit.store.kv_set(f"approval:{event_id}", approval_id)
        for key in ("👍", "👎"):
            await self._send(target.chat_id, "m.reaction",
                             {"m.relates_to": {"rel_type": "m.annotation", "event_id": event_id, "key": key}})
        return event_id
