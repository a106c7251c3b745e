"""MattermostAdapter: a Mattermost bot account for the channel kit (docs/mattermost.md).

One WebSocket per account receives `posted` events; replies, status lines, typing and files go through
REST v4. Replies in a channel go in a thread (`root_id`): the thread a post was in, or one on the post
that mentioned the bot. Approvals are interactive message buttons when `actions_listen` is set (the
Mattermost server posts presses to the daemon's listener, channels/mattermost/buttons.py), else
`/approve ID`. Mattermost pushes events with no acknowledgement to hold back: each is handed to the kit
as it arrives and the newest one taken in is the cursor; on every (re)connect the posts made since the
cursor are read back (`_catch_up`), and the kit drops a post id it has seen.
"""

from __future__ import annotations

import dataclasses
import mimetypes
import time
from typing import Any, ClassVar

import aiohttp
from pydantic import BaseModel

from clawgate.channels.kit import (
    Capabilities,
    ChannelAuthError,
    ChannelKit,
    ChannelUnavailable,
    DeliveryError,
    PlatformAdapter,
    Sender,
    Target,
    Unconfirmed,
)
from clawgate.channels.kit.commands import KIT_COMMANDS
from clawgate.channels.kit.markdown import split_markdown
from clawgate.channels.kit.probe import ProbeResult, http_status, logged_in, refused, unreachable
from clawgate.channels.mattermost.api import NETWORK, ApiError, MattermostApi, SentMaybe, StreamLost
from clawgate.channels.mattermost.buttons import ActionListener, new_secret
from clawgate.channels.mattermost.events import Me, incoming
from clawgate.channels.mattermost.settings import MattermostSettings

MAX_CHARS = 16383  # a post's message limit (model.PostMessageMaxRunesV2)
MAX_FILE_BYTES = 100 * 1024 * 1024  # the server's default FileSettings.MaxFileSize
# An answer quoting `@channel`, `@all` or `@here` must not notify a whole channel: every post asks the
# server to treat channel-wide and group mentions as text (the props Mattermost's own clients set when the
# sender may not use them).
QUIET = {"mentionHighlightDisabled": True, "disable_group_highlight": True}
TOKEN_FIX = "a bot account's access token (Integrations → Bot Accounts) in [channels.mattermost] token"


class MattermostAdapter(PlatformAdapter):
    name: ClassVar[str] = "mattermost"
    settings_model: ClassVar[type[MattermostSettings]] = MattermostSettings
    account_fields: ClassVar[tuple[str, ...]] = ("base_url", "token")
    capabilities: ClassVar[Capabilities] = Capabilities(
        max_chars=MAX_CHARS, edit=True, typing=True, threads=True, files=True, max_file_bytes=MAX_FILE_BYTES)

    def __init__(self, settings: MattermostSettings, kit: ChannelKit) -> None:  # type: ignore[override]
        super().__init__(settings, kit)
        self.settings: MattermostSettings = settings
        token = settings.token.get_secret_value() if settings.token else ""
        self.api = MattermostApi(settings.url(), token, timeout=settings.request_timeout_seconds)
        self.me = Me("", "")
        self.listener: ActionListener | None = None
        self._names: dict[str, str] = {}  # user id -> username, for posts read on catch-up
        if settings.actions_listen:  # presses can reach us: the prompt carries buttons
            self.capabilities = dataclasses.replace(type(self).capabilities, buttons=True)  # type: ignore[misc]

    # -- lifecycle --------------------------------------------------------------------------
    @classmethod
    async def probe(cls, settings: BaseModel) -> ProbeResult:
        """`GET /api/v4/users/me` with the token: who the bot is."""
        assert isinstance(settings, MattermostSettings)
        if not settings.url() or not settings.token:
            return refused("Mattermost", "missing settings", "channels.mattermost.base_url and token", TOKEN_FIX)
        api = MattermostApi(settings.url(), settings.token.get_secret_value(), timeout=settings.request_timeout_seconds)
        try:
            me = await api.call("GET", "/users/me")
        except ApiError as e:
            return http_status("Mattermost", settings.url(), e.status, credential="channels.mattermost.token",
                               base_setting="channels.mattermost.base_url", how=TOKEN_FIX) or refused(
                "Mattermost", "token", "channels.mattermost.token", TOKEN_FIX)
        except (*NETWORK, TimeoutError) as e:
            return unreachable("Mattermost", settings.url(), str(e) or type(e).__name__, "channels.mattermost.base_url")
        finally:
            await api.close()
        kind = "bot" if me.get("is_bot") else "user (not a bot account)"
        return logged_in(f"logged in to {settings.url()} as @{me.get('username')} ({kind} {me.get('id')})")

    async def connect(self) -> None:
        if not self.settings.url():
            raise ChannelAuthError("Mattermost: [channels.mattermost] base_url is not set: set it to the server's "
                                   "address (https://chat.example.com)")
        if not self.settings.token:
            raise ChannelAuthError(f"Mattermost: no token: put {TOKEN_FIX} (CLAWGATE_CHANNELS__MATTERMOST__TOKEN)")
        try:
            me = await self.api.call("GET", "/users/me")
        except ApiError as e:
            if e.status in (401, 403):
                raise ChannelAuthError(f"Mattermost refused the token ({e.message}): put {TOKEN_FIX}") from None
            if e.status == 404:
                raise ChannelAuthError(f"{self.settings.url()} is not a Mattermost server (HTTP 404): check "
                                       "[channels.mattermost] base_url") from None
            raise ChannelUnavailable(f"Mattermost answered {e}") from None
        except (*NETWORK, TimeoutError) as e:
            raise ChannelUnavailable(f"Mattermost not reachable at {self.settings.url()} "
                                     f"({e or type(e).__name__})") from None
        self.me = Me(str(me.get("id") or ""), str(me.get("username") or ""))
        await self._learn_post_size()
        if self.me.user_id in {o.strip() for o in self.settings.owner}:
            raise ChannelAuthError("Mattermost: the token is an owner's own account: the bot would answer everyone "
                                   "who writes to you; create a bot account and keep your user id in owner")
        if self.settings.actions_listen and self.listener is None:
            listener = ActionListener(self.settings.actions_listen, self._secret_of, self._pressed)
            try:
                await listener.start()
            except OSError as e:
                raise ChannelAuthError(f"Mattermost: cannot listen for button presses on "
                                       f"{self.settings.actions_listen} ({e.strerror}): change "
                                       "[channels.mattermost] actions_listen") from None
            self.listener = listener
        self.kit.log.info("connected to Mattermost %s as @%s", self.settings.url(), self.me.username)

    async def _learn_post_size(self) -> None:
        """The server's post limit (`MaxPostSize` in the client config: 16,383, or 4,000 where the database
        column is still the old one); answers are split under it."""
        try:
            config = await self.api.call("GET", "/config/client", params={"format": "old"})
            size = int((config or {}).get("MaxPostSize") or MAX_CHARS)
        except (ApiError, SentMaybe, ValueError, TypeError, AttributeError, *NETWORK, TimeoutError) as e:
            self.kit.log.debug("Mattermost client config not read (splitting at %d): %s", MAX_CHARS, e)
            return
        if 0 < size != self.capabilities.max_chars:
            self.capabilities = dataclasses.replace(self.capabilities, max_chars=size)  # type: ignore[misc]

    async def run(self) -> None:
        try:
            async for event in self.api.events(heartbeat=self.settings.heartbeat_seconds):
                if event.get("event") == "posted":
                    await self._on_posted(event)
                elif event.get("event") == "hello":  # subscribed: what was posted while away can be read now
                    await self._catch_up()
        except StreamLost as e:
            if e.auth:
                raise ChannelAuthError(f"Mattermost refused the token on the WebSocket: put {TOKEN_FIX}") from None
            raise ChannelUnavailable(f"Mattermost event stream lost: {e}") from None
        except aiohttp.WSServerHandshakeError as e:
            if e.status in (401, 403):
                raise ChannelAuthError(f"Mattermost refused the token on the WebSocket: put {TOKEN_FIX}") from None
            raise ChannelUnavailable(f"Mattermost WebSocket refused: HTTP {e.status}") from None
        except (*NETWORK, TimeoutError) as e:
            raise ChannelUnavailable(f"Mattermost event stream lost ({e or type(e).__name__})") from None
        raise ChannelUnavailable("Mattermost closed the event stream")

    async def disconnect(self) -> None:
        if self.listener is not None:
            await self.listener.stop()
            self.listener = None
        await self.api.close()

    def status(self) -> dict[str, Any]:
        facts: dict[str, Any] = {"server": self.settings.url()}
        if self.me.username:
            facts["bot"] = f"@{self.me.username}"
        return facts

    # -- receiving --------------------------------------------------------------------------
    async def _on_posted(self, event: dict[str, Any]) -> None:
        message = incoming(event, self.me, self._fetch, self._commands())
        if message is None:
            return
        await self.kit.receive(message)
        stamp, cursor = int(message.metadata.get("mattermost_create_at") or 0), self.kit.store.cursor()
        if cursor is None or not cursor.isdigit() or stamp > int(cursor):  # the newest post taken in (status)
            self.kit.store.save_cursor(str(stamp))

    async def _catch_up(self) -> None:
        """Hand the kit the posts made since the newest one it took in (the daemon was down, the socket
        lost): Mattermost's WebSocket replays nothing. Only channels whose `last_post_at` moved are read;
        nothing before the first start, nothing older than `catch_up_hours`; the kit drops what it saw."""
        cursor = self.kit.store.cursor()
        if cursor is None or not cursor.isdigit() or not self.settings.catch_up_hours:
            return
        since = max(int(cursor), int((time.time() - self.settings.catch_up_hours * 3600) * 1000))
        try:
            channels = await self.api.call("GET", f"/users/{self.me.user_id}/channels")
            for channel in channels or []:
                if int(channel.get("last_post_at") or 0) < since:
                    continue
                found = await self.api.call("GET", f"/channels/{channel['id']}/posts", params={"since": str(since)})
                posts = sorted(((found or {}).get("posts") or {}).values(), key=lambda p: int(p.get("create_at") or 0))
                for post in posts:
                    if int(post.get("create_at") or 0) >= since and not post.get("delete_at"):
                        await self._on_posted({"event": "posted", "data": {
                            "channel_type": channel.get("type"), "post": post,
                            "sender_name": await self._username(str(post.get("user_id") or ""))}})
        except (ApiError, SentMaybe, *NETWORK, TimeoutError) as e:
            self.kit.log.warning("Mattermost: posts made while away not read (%s)", e)

    async def _username(self, user_id: str) -> str:
        """A catch-up post's author's @name, to name them to the model as a live event would."""
        if user_id and user_id not in self._names:
            user = await self.api.call("GET", f"/users/{user_id}")
            self._names[user_id] = str((user or {}).get("username") or "")
        return f"@{self._names.get(user_id, '')}" if self._names.get(user_id) else ""

    def _commands(self) -> frozenset[str]:
        """The chat commands a channel member may send without mentioning the bot."""
        return frozenset(name.lstrip("/").lower() for name, _ in (*self.kit.command_names(), *KIT_COMMANDS))

    async def _fetch(self, file_id: str) -> bytes:
        data = await self.api.call("GET", f"/files/{file_id}")
        return data if isinstance(data, bytes) else bytes(str(data), "utf-8")

    def _secret_of(self, approval_id: str) -> str | None:
        return self.kit.store.kv_get(f"approval_secret:{approval_id}")

    async def _pressed(self, approval_id: str, user_id: str, approved: bool, channel_id: str) -> str:
        return await self.kit.approval_answer(approval_id, Sender(user_id=user_id), approved,
                                              chat_id=channel_id or None)

    # -- sending ----------------------------------------------------------------------------
    def render(self, markdown: str) -> list[str]:
        """Mattermost renders Markdown itself: only split under the post limit."""
        return [chunk for chunk in split_markdown(markdown, self.capabilities.max_chars) if chunk.strip()]

    async def _post(self, what: str, target: Target, body: dict[str, Any]) -> str:
        root = target.thread_id or ""
        if digest := target.key_digest():  # the server returns the post it already made for a pending_post_id seen in 30 s
            body = {**body, "pending_post_id": "cg" + digest[:32]}
        props = {**QUIET, **body.pop("props", {})}
        try:
            post = await self.api.call("POST", "/posts", body={"channel_id": target.chat_id, "root_id": root,
                                                               "props": props, **body})
        except ApiError as e:
            raise _delivery_error(e, what) from None
        except SentMaybe as e:
            raise Unconfirmed(str(e)) from None
        except NETWORK as e:
            raise DeliveryError(f"Mattermost unreachable for {what} ({e or type(e).__name__})") from None
        return str((post or {}).get("id") or "")

    async def send_text(self, target: Target, text: str) -> str:
        return await self._post("a message", target, {"message": str(text)})

    async def edit_text(self, target: Target, message_id: str, text: str) -> None:
        """The new text; `props` replaced so a prompt's buttons go away with the edit."""
        try:
            await self.api.call("PUT", f"/posts/{message_id}/patch", body={"message": str(text), "props": dict(QUIET)})
        except ApiError as e:
            raise _delivery_error(e, "an edit") from None
        except SentMaybe as e:
            raise Unconfirmed(str(e)) from None
        except NETWORK as e:
            raise DeliveryError(f"Mattermost unreachable for an edit ({e or type(e).__name__})") from None

    async def delete(self, target: Target, message_id: str) -> None:
        try:
            await self.api.call("DELETE", f"/posts/{message_id}")
        except ApiError as e:
            if e.status != 404:  # gone already
                raise _delivery_error(e, "a delete") from None
        except (SentMaybe, *NETWORK) as e:
            raise DeliveryError(f"Mattermost: delete not confirmed ({e or type(e).__name__})") from None

    async def typing(self, target: Target) -> None:
        try:
            await self.api.call("POST", f"/users/{self.me.user_id or 'me'}/typing",
                                body={"channel_id": target.chat_id, "parent_id": target.thread_id or ""})
        except (ApiError, SentMaybe, *NETWORK) as e:
            self.kit.log.debug("Mattermost typing failed: %s", e)

    async def send_file(self, target: Target, name: str, data: bytes, caption: str) -> str:
        """Upload to the channel (`POST /api/v4/files`), then a post carrying the file id."""
        form = aiohttp.FormData()
        form.add_field("channel_id", target.chat_id)
        form.add_field("files", data, filename=name,
                       content_type=mimetypes.guess_type(name)[0] or "application/octet-stream")
        try:
            uploaded = await self.api.call("POST", "/files", form=form)
        except ApiError as e:
            raise _delivery_error(e, "a file") from None
        except (SentMaybe, *NETWORK) as e:  # an upload alone shows nobody anything: safe to retry
            raise DeliveryError(f"Mattermost: file upload not confirmed ({e or type(e).__name__})") from None
        ids = [str(info["id"]) for info in (uploaded or {}).get("file_infos") or [] if info.get("id")]
        return await self._post("a file", target, {"message": caption, "file_ids": ids})

    async def send_approval(self, target: Target, approval_id: str, text: str) -> str | None:
        """The prompt with Approve / Deny buttons whose action URL is the daemon's listener; the context
        carries the approval id and this prompt's secret (the server keeps it; clients never see it)."""
        secret = self._secret_of(approval_id) or new_secret()
        self.kit.store.kv_set(f"approval_secret:{approval_id}", secret)
        url = self.settings.actions_url or f"http://{self.settings.actions_listen}"
        url = url.rstrip("/") + (ActionListener.path if not url.rstrip("/").endswith(ActionListener.path) else "")

        def button(label: str, approve: bool, style: str) -> dict[str, Any]:
            return {"id": f"clawgate{'approve' if approve else 'deny'}", "name": label, "type": "button",
                    "style": style, "integration": {"url": url, "context": {
                        "approval_id": approval_id, "approve": approve, "secret": secret}}}

        attachment = {"fallback": f"/approve {approval_id} or /deny {approval_id}",
                      "actions": [button("Approve", True, "success"), button("Deny", False, "danger")]}
        return await self._post("an approval prompt", target, {"message": str(text),
                                                               "props": {"attachments": [attachment]}})


def _delivery_error(e: ApiError, what: str) -> DeliveryError:
    if e.status == 429:
        return DeliveryError(f"Mattermost rate limit on {what}", retry_after=e.retry_after or 1.0)
    if e.status == 401:
        return DeliveryError(f"Mattermost refused the token: put {TOKEN_FIX}", permanent=True, channel_down=True)
    if e.status == 413:
        return DeliveryError(f"Mattermost refused {what} as larger than the server's MaxFileSize", permanent=True)
    if e.error_id == "model.post.is_valid.msg.app_error":  # over MaxPostSize: the kit sends it in halves
        return DeliveryError(f"Mattermost refused {what} as too long", permanent=True, too_large=True)
    if e.status >= 500:
        return DeliveryError(f"Mattermost failed {what}: {e}")
    return DeliveryError(f"Mattermost refused {what}: {e}", permanent=True)


__all__ = ["MattermostAdapter"]
