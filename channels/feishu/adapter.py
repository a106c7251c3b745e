"""FeishuAdapter: a Feishu / Lark custom app's bot for the channel kit (docs/feishu.md).

Events come over the long connection (channels/feishu/longconn.py): `im.message.receive_v1` for messages
in private (p2p) and group chats, `card.action.trigger` for an approval card's buttons. Answers go out
through im/v1/messages: a reply to the message answered (in its thread when it is in one, or on it with
`reply_in_thread`), as rich text rendering Markdown; status lines are edited (`PUT`) and deleted;
approvals are interactive cards whose buttons carry the prompt's id and a per-prompt secret (an owner's
press counts; `/approve ID` works too); files are uploaded (im/v1/files) and sent as a file message.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hmac
import importlib.util
import json
import secrets
from typing import Any, ClassVar

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
    send_key_digest,
)
from clawgate.channels.kit.commands import KIT_COMMANDS
from clawgate.channels.kit.probe import ProbeResult, logged_in, refused, unreachable
from clawgate.channels.feishu.api import NETWORK, RATE_LIMITED, TOKEN_REFUSED, TOO_LONG, ApiError, FeishuApi, SentMaybe
from clawgate.channels.feishu.events import incoming
from clawgate.channels.feishu.render import PostChunk, approval_card, outcome_card, post_content, render
from clawgate.channels.feishu.settings import FeishuSettings

if importlib.util.find_spec("lark_oapi") is None:  # the channel is an extra: say how to get it (the registry shows it)
    raise ImportError("the Feishu channel needs lark-oapi; install it with: pip install 'clawgate[feishu]'")

# A rich-text message or card holds 30 KB of JSON, and the SDK writes each non-ASCII character as a 6-byte \u escape:
# 4,000 characters stay under it with room for the frame, and read well on a phone.
MAX_CHARS = 4000
MAX_FILE_BYTES = 30 * 1024 * 1024  # im/v1/files accepts up to 30 MB
RECEIVE_TIMEOUT = 120.0  # a handler waiting longer answers Feishu with a failure: it delivers the event again
SEND_KEY_CHARS = 50  # im/v1/messages' `uuid`: at most 50 characters
CREDENTIALS_FIX = ("the custom app's App ID and App Secret (Developer Console → Credentials & Basic Info) in "
                   "[channels.feishu] app_id and app_secret")


class FeishuAdapter(PlatformAdapter):
    name: ClassVar[str] = "feishu"
    settings_model: ClassVar[type[FeishuSettings]] = FeishuSettings
    account_fields: ClassVar[tuple[str, ...]] = ("domain", "app_id")
    capabilities: ClassVar[Capabilities] = Capabilities(
        max_chars=MAX_CHARS, edit=True, buttons=True, threads=True, files=True, max_file_bytes=MAX_FILE_BYTES)

    def __init__(self, settings: FeishuSettings, kit: ChannelKit) -> None:  # type: ignore[override]
        super().__init__(settings, kit)
        self.settings: FeishuSettings = settings
        self.api: FeishuApi | None = None
        self.bot_open_id = ""
        self.bot_name = ""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._names: dict[str, str] = {}  # open_id -> the person's name, for shared conversations

    # -- lifecycle --------------------------------------------------------------------------
    def _secret(self) -> str:
        return self.settings.app_secret.get_secret_value() if self.settings.app_secret else ""

    @classmethod
    async def probe(cls, settings: BaseModel) -> ProbeResult:
        """A tenant_access_token and `GET /open-apis/bot/v3/info`: which bot the app is."""
        assert isinstance(settings, FeishuSettings)
        if not settings.app_id or not settings.app_secret:
            return refused("Feishu", "missing settings", "channels.feishu.app_id and app_secret", CREDENTIALS_FIX)
        api = FeishuApi(settings.app_id, settings.app_secret.get_secret_value(), settings.url(),
                        settings.request_timeout_seconds)
        try:
            bot = (await api.request("GET", "/open-apis/bot/v3/info")).get("bot") or {}
        except ApiError as e:
            return refused("Feishu", f"credentials ({e})", "channels.feishu.app_secret", CREDENTIALS_FIX)
        except (*NETWORK, SentMaybe) as e:
            return unreachable("Feishu", settings.url(), str(e) or type(e).__name__, "channels.feishu.domain")
        return logged_in(f"logged in to {settings.url()} as the bot {bot.get('app_name')!r} ({bot.get('open_id')})")

    async def connect(self) -> None:
        if not self.settings.app_id or not self.settings.app_secret:
            raise ChannelAuthError(f"Feishu: no credentials: put {CREDENTIALS_FIX} "
                                   "(CLAWGATE_CHANNELS__FEISHU__APP_SECRET)")
        self._loop = asyncio.get_running_loop()
        if self.api is None:
            self.api = FeishuApi(self.settings.app_id, self._secret(), self.settings.url(),
                                 self.settings.request_timeout_seconds)
        try:
            bot = (await self.api.request("GET", "/open-apis/bot/v3/info")).get("bot") or {}
        except ApiError as e:
            if e.code in TOKEN_REFUSED or e.status in (401, 403):
                raise ChannelAuthError(f"Feishu refused the app's credentials ({e.msg or e.code}): put "
                                       f"{CREDENTIALS_FIX}") from None
            if e.status == 404:
                raise ChannelAuthError(f"{self.settings.url()} is not a Feishu Open Platform (HTTP 404): check "
                                       "[channels.feishu] domain") from None
            raise ChannelUnavailable(f"Feishu answered {e}") from None
        except (*NETWORK, SentMaybe) as e:
            raise ChannelUnavailable(f"Feishu not reachable at {self.settings.url()} ({type(e).__name__})") from None
        self.bot_open_id, self.bot_name = str(bot.get("open_id") or ""), str(bot.get("app_name") or "")
        if not self.bot_open_id:
            raise ChannelAuthError("Feishu: the app has no bot: enable the Bot feature (Developer Console → "
                                   "Features → Bot) and publish a version")
        self.kit.bot_name = self.bot_name or None
        self.kit.log.info("connected to Feishu %s as the bot %s", self.settings.url(), self.bot_name or self.bot_open_id)

    async def run(self) -> None:
        import lark_oapi as lark

        from clawgate.channels.feishu.longconn import ConnectionLost, ConnectionRefused, LongConnection

        handler = (lark.EventDispatcherHandler.builder("", "")
                   .register_p2_customized_event("im.message.receive_v1", self._on_message)
                   .register_p2_card_action_trigger(self._on_card)
                   .build())
        connection = LongConnection(self.settings.app_id, self._secret(), self.settings.url(), handler)
        try:
            await connection.run()
        except ConnectionRefused as e:
            raise ChannelAuthError(f"Feishu refused the long connection ({e}): put {CREDENTIALS_FIX}, and choose "
                                   "'long connection' under Events & Callbacks") from None
        except ConnectionLost as e:
            raise ChannelUnavailable(f"Feishu long connection lost ({e})") from None

    async def disconnect(self) -> None:
        """Nothing to release: the long connection ends with run(), and API calls hold no connection."""

    def status(self) -> dict[str, Any]:
        facts: dict[str, Any] = {"server": self.settings.url()}
        if self.bot_name:
            facts["bot"] = self.bot_name
        return facts

    # -- receiving (called on the long connection's thread) ----------------------------------
    def _commands(self) -> frozenset[str]:
        return frozenset(name.lstrip("/").lower() for name, _ in (*self.kit.command_names(), *KIT_COMMANDS))

    def _on_message(self, data: Any) -> None:
        """The SDK's handler, on its thread: returns once the kit has the message durably (raising: Feishu
        delivers it again). Everything else runs on the daemon's loop."""
        assert self._loop is not None
        asyncio.run_coroutine_threadsafe(self._take(data.event or {}), self._loop).result(RECEIVE_TIMEOUT)

    async def _take(self, event: dict[str, Any]) -> None:
        """In a group, the sender is named to the model by their Feishu name (events carry only the open_id)."""
        message = incoming(event, self.bot_open_id, self._commands(), reply_in_thread=self.settings.reply_in_thread,
                           fetch=self._download)
        if message is None:
            return
        if not message.private and message.addressed:
            name = await self._name(message.sender.user_id)
            if name:
                message = dataclasses.replace(message, sender=Sender(user_id=message.sender.user_id, username=name,
                                                                     display=name))
        await self.kit.receive(message)

    async def _download(self, message_id: str, key: str, kind: str) -> bytes:
        """A file or image a person sent (im/v1/messages/:id/resources/:key, scope `im:resource`)."""
        from lark_oapi.api.im.v1 import GetMessageResourceRequest

        api = self._client()
        response = await api.call(api.client.im.v1.message_resource.get, GetMessageResourceRequest.builder()
                                  .message_id(message_id).file_key(key).type(kind).build(), whole=True)
        return response.file.read() if response.file is not None else b""

    async def _name(self, open_id: str) -> str:
        """The user's name (contact API, scope `contact:user.base:readonly`); empty when the app may not read
        it. Asked once per person; it only names, never admits (owner and allow_from take open_ids)."""
        if open_id not in self._names and self.api is not None:
            from lark_oapi.api.contact.v3 import GetUserRequest

            try:
                data = await self.api.call(self.api.client.contact.v3.user.get, GetUserRequest.builder()
                                           .user_id(open_id).user_id_type("open_id").build())
                self._names[open_id] = str(getattr(getattr(data, "user", None), "name", "") or "")
            except (ApiError, SentMaybe, *NETWORK) as e:
                self.kit.log.debug("Feishu: the name of %s not read (%s)", open_id, e)
                self._names[open_id] = ""
        return self._names.get(open_id, "")

    def _on_card(self, data: Any) -> Any:
        """The SDK's card callback, on its thread: the answer is a toast shown to the presser."""
        from lark_oapi.event.callback.model.p2_card_action_trigger import P2CardActionTriggerResponse

        assert self._loop is not None
        line = asyncio.run_coroutine_threadsafe(self._pressed(data.event), self._loop).result(RECEIVE_TIMEOUT)
        return P2CardActionTriggerResponse({"toast": {"type": "info" if line else "error",
                                                      "content": line or "Unknown prompt."}})

    async def _pressed(self, event: Any) -> str:
        """A card button counts when its value carries the prompt's own secret (Feishu names the presser; the
        kit admits owners only); "" for a press of no prompt of ours."""
        value = (event.action.value if event is not None and event.action is not None else None) or {}
        approval_id, given = str(value.get("clawgate_approval") or ""), str(value.get("secret") or "")
        expected = self.kit.store.kv_get(f"approval_secret:{approval_id}") if approval_id else None
        if not expected or not hmac.compare_digest(expected.encode(), given.encode()):
            return ""
        open_id = str(getattr(event.operator, "open_id", "") or "")
        if not open_id:
            return ""
        chat = str(getattr(event.context, "open_chat_id", "") or "") or None
        line = await self.kit.approval_answer(approval_id, Sender(user_id=open_id), bool(value.get("approve")),
                                              chat_id=chat)
        return line or "Done."

    # -- sending ----------------------------------------------------------------------------
    def render(self, markdown: str) -> list[str]:
        return render(markdown, self.capabilities.max_chars)

    def _client(self) -> FeishuApi:
        if self.api is None:
            raise DeliveryError("Feishu: not connected")
        return self.api

    async def _send(self, what: str, target: Target, msg_type: str, content: str, uuid: str | None = None) -> str:
        """A reply to the message answered (in its thread, or the thread given), else a new message. With a
        `uuid`, Feishu sends at most one message for it within an hour: a second request returns the first."""
        from lark_oapi.api.im.v1 import (CreateMessageRequest, CreateMessageRequestBody, ReplyMessageRequest,
                                         ReplyMessageRequestBody)

        api = self._client()
        parent = target.thread_id or target.reply_to
        try:
            if parent:
                reply = (ReplyMessageRequestBody.builder().msg_type(msg_type).content(content)
                         .reply_in_thread(bool(target.thread_id)))
                body = (reply.uuid(uuid) if uuid else reply).build()
                data = await api.call(api.client.im.v1.message.reply,
                                      ReplyMessageRequest.builder().message_id(parent).request_body(body).build())
            else:
                create = (CreateMessageRequestBody.builder().receive_id(target.chat_id).msg_type(msg_type)
                          .content(content))
                data = await api.call(api.client.im.v1.message.create, CreateMessageRequest.builder()
                                      .receive_id_type("chat_id")
                                      .request_body((create.uuid(uuid) if uuid else create).build()).build())
        except ApiError as e:
            raise _delivery_error(e, what) from None
        except SentMaybe as e:
            raise Unconfirmed(str(e)) from None
        except NETWORK as e:
            raise DeliveryError(f"Feishu unreachable for {what} ({type(e).__name__})") from None
        return str(getattr(data, "message_id", "") or "")

    async def send_text(self, target: Target, text: str) -> str:
        content = text.content if isinstance(text, PostChunk) else post_content(str(text))
        return await self._send("a message", target, "post", content, send_uuid(target.send_key))

    async def edit_text(self, target: Target, message_id: str, text: str) -> None:
        """A rich-text message is edited (PUT); a prompt's card is patched, its buttons gone."""
        from lark_oapi.api.im.v1 import (PatchMessageRequest, PatchMessageRequestBody, UpdateMessageRequest,
                                         UpdateMessageRequestBody)

        api = self._client()
        try:
            if self.kit.store.kv_get(f"card:{message_id}"):
                body = PatchMessageRequestBody.builder().content(outcome_card(str(text))).build()
                await api.call(api.client.im.v1.message.patch,
                               PatchMessageRequest.builder().message_id(message_id).request_body(body).build())
            else:
                content = text.content if isinstance(text, PostChunk) else post_content(str(text))
                body = UpdateMessageRequestBody.builder().msg_type("post").content(content).build()
                await api.call(api.client.im.v1.message.update,
                               UpdateMessageRequest.builder().message_id(message_id).request_body(body).build())
        except ApiError as e:
            raise _delivery_error(e, "an edit") from None
        except SentMaybe as e:
            raise Unconfirmed(str(e)) from None
        except NETWORK as e:
            raise DeliveryError(f"Feishu unreachable for an edit ({type(e).__name__})") from None

    async def delete(self, target: Target, message_id: str) -> None:
        from lark_oapi.api.im.v1 import DeleteMessageRequest

        api = self._client()
        try:
            await api.call(api.client.im.v1.message.delete, DeleteMessageRequest.builder().message_id(message_id).build())
        except ApiError as e:
            raise _delivery_error(e, "a delete") from None
        except (SentMaybe, *NETWORK) as e:
            raise DeliveryError(f"Feishu: delete not confirmed ({type(e).__name__})") from None

    async def send_approval(self, target: Target, approval_id: str, text: str) -> str | None:
        secret = self.kit.store.kv_get(f"approval_secret:{approval_id}") or secrets.token_urlsafe(24)
        self.kit.store.kv_set(f"approval_secret:{approval_id}", secret)
        message_id = await self._send("an approval prompt", target, "interactive",
                                      approval_card(text, approval_id, secret))
        if message_id:
            self.kit.store.kv_set(f"card:{message_id}", "1")
        return message_id

    async def send_file(self, target: Target, name: str, data: bytes, caption: str) -> str:
        """Upload (im/v1/files, type `stream`), then a file message; the caption as a message before it."""
        import io

        from lark_oapi.api.im.v1 import CreateFileRequest, CreateFileRequestBody

        api = self._client()
        body = CreateFileRequestBody.builder().file_type("stream").file_name(name).file(io.BytesIO(data)).build()
        try:
            uploaded = await api.call(api.client.im.v1.file.create, CreateFileRequest.builder().request_body(body).build())
        except ApiError as e:
            raise _delivery_error(e, "a file") from None
        except (SentMaybe, *NETWORK) as e:  # an upload alone shows nobody anything: safe to retry
            raise DeliveryError(f"Feishu: file upload not confirmed ({type(e).__name__})") from None
        key = target.send_key  # the caption and the file are two messages: each has a uuid of its own
        if caption.strip():
            try:
                await self._send("a file's caption", target, "post", post_content(self.kit.markdown.escape(caption)),
                                 send_uuid(key and key + ":caption"))
            except Unconfirmed as e:  # it may have arrived: not sent again, and the file still goes
                self.kit.log.warning("a file's caption unconfirmed (%s); sending the file", e)
        return await self._send("a file", target, "file", json.dumps({"file_key": str(uploaded.file_key)}),
                                send_uuid(key))


def send_uuid(send_key: str | None) -> str | None:
    """A reply part's send_key as Feishu's `uuid` (within SEND_KEY_CHARS): sent again after a crash, the part
    is recognised by Feishu, which returns the message it made for the first request."""
    if not send_key:
        return None
    return ("cg" + send_key_digest(send_key))[:SEND_KEY_CHARS]


def _delivery_error(e: ApiError, what: str) -> DeliveryError:
    if e.code in RATE_LIMITED or e.status == 429:
        return DeliveryError(f"Feishu rate limit on {what}", retry_after=e.retry_after or 1.0)
    if e.code in TOKEN_REFUSED:
        return DeliveryError(f"Feishu refused the app's token ({e.msg}): put {CREDENTIALS_FIX}", permanent=True,
                             channel_down=True)
    if e.code in TOO_LONG:
        return DeliveryError(f"Feishu refused {what} as too long", permanent=True, too_large=True)
    if e.status >= 500 or e.code < 0:
        return DeliveryError(f"Feishu failed {what}: {e}")
    return DeliveryError(f"Feishu refused {what}: {e}", permanent=True)


__all__ = ["FeishuAdapter"]
