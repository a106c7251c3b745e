"""DingTalkAdapter: a DingTalk app robot for the channel kit (docs/dingtalk.md).

Receiving is Stream mode through the official SDK (channels/dingtalk/stream.py): one WebSocket per account
takes the robot topic's messages; each is handed to the kit and ACKed by the SDK only after `kit.receive`
returned (durable), so a crash before that has DingTalk deliver it again and the kit drops the msgId it
saw. Replies go through the message's session webhook while it is valid, else through the robot OpenAPI
(1:1 by the user's id, groups by the open conversation id) with the app's access token: cron results and
approvals answered hours later still arrive. Messages are DingTalk Markdown (`sampleMarkdown`), split
under MAX_CHARS. DingTalk cannot edit a robot's message: no status line, only typing-free answers.
Approvals are an interactive card with Approve / Deny (`approval_cards`, on by default): a press comes back
on the card callback topic of the same Stream connection, as the DingTalk user id DingTalk names, and counts
only for the card's own unguessable outTrackId and only from an owner (the kit decides); `/approve ID` /
`/deny ID` always work too.
"""

from __future__ import annotations

import contextlib
import asyncio
import dataclasses
import json
import logging
import mimetypes
import secrets
import time
import uuid
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel

from clawgate.channels.dingtalk.events import PRIVATE, chat_of, incoming
from clawgate.channels.dingtalk.openapi import NETWORK, THROTTLED, ApiError, DingTalkApi, SentMaybe, TokenRefused
from clawgate.channels.dingtalk.settings import DingTalkSettings
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
from clawgate.channels.kit.markdown import split_markdown, to_plain
from clawgate.channels.kit.probe import ProbeResult, http_status, logged_in, refused, unreachable

if TYPE_CHECKING:
    from dingtalk_stream import ChatbotMessage

    from clawgate.channels.dingtalk.stream import StreamClient

# DingTalk documents no exact limit for a robot's Markdown text; long ones are cut or refused
# (invalidParameter.msgParam.tooLong), so answers are split well under what it takes.
MAX_CHARS = 4000
MAX_FILE_BYTES = 20 * 1024 * 1024  # media/upload's limit for a file
CREDENTIALS_FIX = ("the app's Client ID and Client Secret (DingTalk developer console → your app → Credentials) in "
                   "[channels.dingtalk] client_id and client_secret")
TOO_LONG = "invalidParameter.msgParam.tooLong"
# DingTalk's public message card template (the one the SDK's AI and carousel cards use): Markdown content and
# buttons from `sys_full_json_obj`; a button with `request: true` calls back over Stream mode when pressed.
CARD_TEMPLATE = "382e4302-551d-4880-bf29-a30acfab2e71.schema"
APPROVE, DENY = "clawgate_approve", "clawgate_deny"


class DingTalkAdapter(PlatformAdapter):
    name: ClassVar[str] = "dingtalk"
    settings_model: ClassVar[type[DingTalkSettings]] = DingTalkSettings
    account_fields: ClassVar[tuple[str, ...]] = ("base_url", "client_id")
    capabilities: ClassVar[Capabilities] = Capabilities(max_chars=MAX_CHARS, files=True, max_file_bytes=MAX_FILE_BYTES)

    def __init__(self, settings: DingTalkSettings, kit: ChannelKit) -> None:  # type: ignore[override]
        super().__init__(settings, kit)
        self.settings: DingTalkSettings = settings
        secret = settings.client_secret.get_secret_value() if settings.client_secret else ""
        self.api = DingTalkApi(settings.api_base(), settings.client_id, secret, timeout=settings.request_timeout_seconds)
        self.client: StreamClient | None = None
        if settings.approval_cards:  # presses come back on our own Stream connection: the prompt has buttons
            self.capabilities = dataclasses.replace(type(self).capabilities, buttons=True)  # type: ignore[misc]

    # -- lifecycle --------------------------------------------------------------------------
    @classmethod
    async def probe(cls, settings: BaseModel) -> ProbeResult:
        """The app's access token with its Client ID and Secret: the credentials DingTalk accepts."""
        assert isinstance(settings, DingTalkSettings)
        if not settings.client_id or not settings.client_secret:
            return refused("DingTalk", "missing settings", "channels.dingtalk.client_id and client_secret",
                           CREDENTIALS_FIX)
        api = DingTalkApi(settings.api_base(), settings.client_id, settings.client_secret.get_secret_value(),
                          timeout=settings.request_timeout_seconds)
        try:
            await api.access_token()
        except ApiError as e:
            if isinstance(e, TokenRefused):  # DingTalk answers a wrong Client ID or Secret with a 400
                return refused("DingTalk", f"credentials ({e.code})", "channels.dingtalk.client_secret",
                               CREDENTIALS_FIX)
            return http_status("DingTalk", settings.api_base(), e.status, credential="channels.dingtalk.client_secret",
                               base_setting="channels.dingtalk.base_url", how=CREDENTIALS_FIX) or refused(
                "DingTalk", f"credentials ({e.code})", "channels.dingtalk.client_secret", CREDENTIALS_FIX)
        except (*NETWORK, TimeoutError) as e:
            return unreachable("DingTalk", settings.api_base(), str(e) or type(e).__name__, "channels.dingtalk.base_url")
        finally:
            await api.close()
        return logged_in(f"app {settings.client_id} got an access token from {settings.api_base()} "
                         f"(robot {settings.robot()})")

    @staticmethod
    def split_chat(rest: str) -> tuple[str, str | None] | None:
        """DingTalk chats have no threads, and a sender from outside the organisation is named by an id with
        ':' in it (`$:LWCP_v1:$…`): everything after `dingtalk:` is the chat."""
        return (rest, None) if rest else None

    async def connect(self) -> None:
        if not self.settings.client_id or not self.settings.client_secret:
            raise ChannelAuthError(f"DingTalk: no credentials: put {CREDENTIALS_FIX} "
                                   "(CLAWGATE_CHANNELS__DINGTALK__CLIENT_SECRET)")
        try:
            from clawgate.channels.dingtalk.stream import CARD_TOPIC, CardHandler, Credential, RobotHandler, StreamClient
        except ImportError:
            raise ChannelAuthError("DingTalk needs the dingtalk-stream SDK: pip install 'clawgate[dingtalk]'") from None
        try:
            await self.api.access_token(fresh=True)
        except ApiError as e:
            if e.status in (400, 401, 403):
                raise ChannelAuthError(f"DingTalk refused the app's credentials ({e.code or e.status}): put "
                                       f"{CREDENTIALS_FIX}") from None
            if e.status == 404:
                raise ChannelAuthError(f"{self.settings.api_base()} is not DingTalk's API (HTTP 404): check "
                                       "[channels.dingtalk] base_url") from None
            raise ChannelUnavailable(f"DingTalk answered {e}") from None
        except (*NETWORK, TimeoutError) as e:
            raise ChannelUnavailable(f"DingTalk not reachable at {self.settings.api_base()} "
                                     f"({e or type(e).__name__})") from None
        secret = self.settings.client_secret.get_secret_value()
        # The SDK's own lines go to a child logger kept at errors: it warns of every SYSTEM ping as an
        # "unknown message topic", which would fill the daemon's log.
        sdk_log = logging.getLogger(f"{self.kit.log.name}.sdk")
        sdk_log.setLevel(logging.ERROR)
        client = StreamClient(Credential(self.settings.client_id, secret), self.settings.api_base(), sdk_log,
                              self.settings.request_timeout_seconds)
        from dingtalk_stream import ChatbotMessage

        client.register_callback_handler(ChatbotMessage.TOPIC, RobotHandler(self._on_message))
        if self.settings.approval_cards:
            client.register_callback_handler(CARD_TOPIC, CardHandler(self._pressed))
        self.client = client
        self.kit.log.info("DingTalk app %s ready for Stream mode at %s", self.settings.client_id, self.settings.api_base())

    async def run(self) -> None:
        from clawgate.channels.dingtalk.stream import OpenRefused

        assert self.client is not None
        import websockets

        while True:  # a SYSTEM `disconnect` returns: the next connection is opened at once
            try:
                moved = await self.client.serve()
            except OpenRefused as e:
                if e.status in (400, 401, 403):
                    raise ChannelAuthError(f"DingTalk refused to open a Stream connection ({e}): put "
                                           f"{CREDENTIALS_FIX}, and turn on Stream mode for the robot") from None
                raise ChannelUnavailable(f"DingTalk Stream gateway not reachable ({e})") from None
            except (websockets.ConnectionClosed, websockets.InvalidHandshake, *NETWORK, TimeoutError) as e:
                raise ChannelUnavailable(f"DingTalk Stream connection lost ({e or type(e).__name__})") from None
            if not moved:  # closed without asking us to move: the runner reconnects with backoff
                raise ChannelUnavailable("DingTalk closed the Stream connection")
            self.kit.log.info("DingTalk asked to reconnect; opening a new Stream connection")

    async def disconnect(self) -> None:
        client, self.client = self.client, None
        if client is not None and client.websocket is not None:
            with contextlib.suppress(Exception):  # closing a socket that may be half gone
                await client.websocket.close()
        await self.api.close()

    def status(self) -> dict[str, Any]:
        return {"app": self.settings.client_id, "api": self.settings.api_base()}

    # -- receiving --------------------------------------------------------------------------
    async def _on_message(self, message: ChatbotMessage, raw: dict[str, Any]) -> None:
        """Keep where to answer (the session webhook, the chat's kind), then hand it to the kit; the SDK
        sends the ACK after this returned."""
        chat = chat_of(message)
        if chat:
            self.kit.store.kv_set(f"kind:{chat}", str(message.conversation_type or ""))
            if message.session_webhook and message.session_webhook_expired_time:
                self.kit.store.kv_set(f"webhook:{chat}", json.dumps(
                    {"url": message.session_webhook, "expires_ms": int(message.session_webhook_expired_time)}))
        found = incoming(message, raw, self._download)
        if found is not None:
            await self.kit.receive(found)

    async def _download(self, download_code: str) -> bytes:
        """A file sent to the robot, read up to one byte past `max_file_bytes` (the kit refuses at that)."""
        return await self.api.download(self.settings.robot(), download_code, self.settings.max_file_bytes + 1)

    def _webhook(self, chat: str) -> str | None:
        """The chat's latest session webhook while it is valid (with the margin), else None."""
        stored = self.kit.store.kv_get(f"webhook:{chat}")
        if not stored:
            return None
        with contextlib.suppress(ValueError, KeyError, TypeError):  # a stored record from another version
            hook = json.loads(stored)
            if time.time() * 1000 < int(hook["expires_ms"]) - self.settings.webhook_margin_seconds * 1000:
                return str(hook["url"])
        return None

    async def _pressed(self, user_id: str, track: str, actions: list[str]) -> str:
        """A press on an approval card: counted only for a card this account sent (its outTrackId, random and
        kept in the store), as the user DingTalk names; the kit admits only owners' answers."""
        stored = self.kit.store.kv_get(f"card:{track}") if track else None
        if not stored or not user_id:
            return "This prompt is not known here."
        card = json.loads(stored)
        if APPROVE in actions or DENY in actions:
            return await self.kit.approval_answer(str(card["approval"]), Sender(user_id=user_id, username=user_id),
                                                  APPROVE in actions, chat_id=str(card.get("chat") or "") or None)
        return ""

    # -- sending ----------------------------------------------------------------------------
    def render(self, markdown: str) -> list[str]:
        """DingTalk renders its Markdown subset itself: only split under the limit."""
        return [chunk for chunk in split_markdown(markdown, self.capabilities.max_chars) if chunk.strip()]

    async def send_text(self, target: Target, text: str) -> str:
        title = _title(str(text))
        hook = self._webhook(target.chat_id)
        try:
            if hook:
                await self.api.webhook_send(hook, {"msgtype": "markdown", "markdown": {"title": title, "text": str(text)}})
                return f"webhook-{uuid.uuid4().hex}"  # a session webhook names no message
            return await self._openapi_send(target.chat_id, title, str(text))
        except ApiError as e:
            raise _delivery_error(e) from None
        except SentMaybe as e:
            raise Unconfirmed(str(e)) from None
        except (*NETWORK, asyncio.TimeoutError) as e:
            raise DeliveryError(f"DingTalk unreachable ({e or type(e).__name__})") from None

    async def send_file(self, target: Target, name: str, data: bytes, caption: str) -> str:
        """Upload (media/upload), then a `sampleFile` message through the robot OpenAPI (a session webhook
        carries no files); the caption follows as its own message."""
        mime = mimetypes.guess_type(name)[0] or "application/octet-stream"
        try:
            media_id = await self.api.upload(self.settings.media(), name, data, mime)
            file_type = name.rpartition(".")[2].lower() if "." in name else "file"
            sent = await self._openapi_send(target.chat_id, "", "", key="sampleFile", param={
                "mediaId": media_id, "fileName": name, "fileType": file_type})
        except ApiError as e:
            raise _delivery_error(e) from None
        except SentMaybe as e:
            raise Unconfirmed(str(e)) from None
        except (*NETWORK, asyncio.TimeoutError) as e:
            raise DeliveryError(f"DingTalk unreachable ({e or type(e).__name__})") from None
        if caption.strip():
            try:  # the file is out: a caption that fails is not worth sending the file again
                await self.send_text(target, self.kit.markdown.escape(caption))
            except (DeliveryError, Unconfirmed) as e:
                self.kit.log.warning("DingTalk: the caption of %s was not sent: %s", name, e)
        return sent

    async def _openapi_send(self, chat: str, title: str, text: str, *, key: str = "sampleMarkdown",
                            param: dict[str, Any] | None = None) -> str:
        params = param if param is not None else {"title": title, "text": text}
        param_text = json.dumps(params, ensure_ascii=False)
        robot = self.settings.robot()
        if self._is_private(chat):
            answer = await self.api.robot_send("/v1.0/robot/oToMessages/batchSend", {
                "robotCode": robot, "userIds": [chat], "msgKey": key, "msgParam": param_text})
            if chat in (answer.get("invalidStaffIdList") or []):
                raise DeliveryError(f"DingTalk: {chat} is no user of the organisation the robot can write to",
                                    permanent=True)
            if chat in (answer.get("flowControlledStaffIdList") or []):
                raise DeliveryError("DingTalk is holding back messages to this user (flow control)")
        else:
            answer = await self.api.robot_send("/v1.0/robot/groupMessages/send", {
                "robotCode": robot, "openConversationId": chat, "msgKey": key, "msgParam": param_text})
        return str(answer.get("processQueryKey") or f"openapi-{uuid.uuid4().hex}")

    async def send_approval(self, target: Target, approval_id: str, text: str) -> str | None:
        """The prompt as an interactive card (createAndDeliver, DingTalk's public message template) with
        Approve / Deny buttons that call back over Stream mode. Its outTrackId is random and remembered: the
        callback names it, so a press counts for this prompt only."""
        track = secrets.token_urlsafe(24)
        self.kit.store.kv_set(f"card:{track}", json.dumps({"approval": approval_id, "chat": target.chat_id}))
        buttons = [{"text": "Approve", "color": "blue", "id": APPROVE, "request": True},
                   {"text": "Deny", "color": "red", "id": DENY, "request": True}]
        layout = {"order": ["msgTitle", "staticMsgContent", "msgButtons"], "msgButtons": buttons}
        body: dict[str, Any] = {
            "cardTemplateId": CARD_TEMPLATE, "outTrackId": track, "callbackType": "STREAM",
            "cardData": {"cardParamMap": {"msgTitle": _title(str(text)), "staticMsgContent": str(text),
                                          "flowStatus": "3", "sys_full_json_obj": json.dumps(layout),
                                          "approvalId": approval_id}},
            "imGroupOpenSpaceModel": {"supportForward": False}, "imRobotOpenSpaceModel": {"supportForward": False}}
        robot = self.settings.robot()
        if self._is_private(target.chat_id):
            body["openSpaceId"] = f"dtv1.card//IM_ROBOT.{target.chat_id}"
            body["imRobotOpenDeliverModel"] = {"spaceType": "IM_ROBOT", "robotCode": robot}
        else:
            body["openSpaceId"] = f"dtv1.card//IM_GROUP.{target.chat_id}"
            body["imGroupOpenDeliverModel"] = {"robotCode": robot}
        try:
            answer = await self.api.robot_send("/v1.0/card/instances/createAndDeliver", body)
        except ApiError as e:
            raise _delivery_error(e) from None
        except SentMaybe as e:
            raise Unconfirmed(str(e)) from None
        except (*NETWORK, asyncio.TimeoutError) as e:
            raise DeliveryError(f"DingTalk unreachable ({e or type(e).__name__})") from None
        result = answer.get("result") if isinstance(answer.get("result"), dict) else {}
        failed = [r for r in result.get("deliverResults") or [] if isinstance(r, dict) and not r.get("success")]
        if failed:
            raise DeliveryError(f"DingTalk did not deliver the approval card: {failed[0].get('errorMsg')}",
                                permanent=True)
        return track

    def _is_private(self, chat: str) -> bool:
        """A 1:1 chat is a user id; a group an open conversation id (`cid…`), remembered from its messages."""
        kind = self.kit.store.kv_get(f"kind:{chat}")
        return kind == PRIVATE if kind else not chat.startswith("cid")


def _title(text: str) -> str:
    """The notification's title: the first words of the message, as plain text."""
    first = next((line.strip() for line in to_plain(text).splitlines() if line.strip()), "") or "clawgate"
    return first if len(first) <= 40 else first[:39] + "…"


def _delivery_error(e: ApiError) -> DeliveryError:
    if isinstance(e, TokenRefused):
        return DeliveryError(f"DingTalk refused the app's credentials ({e.code or e.status}): put {CREDENTIALS_FIX}",
                             permanent=True, channel_down=True)
    if e.code.isdigit() and int(e.code) in THROTTLED or e.status == 429 or "Throttling" in e.code or "QpsLimit" in e.code:
        return DeliveryError(f"DingTalk is rate-limiting the robot ({e.message or e.code})")
    if e.status in (401, 403) and e.code.lower() in ("invalidauthentication", "forbidden.accessdenied.accesstokenpermissiondenied"):
        return DeliveryError(f"DingTalk refused the app's access token ({e.code}): put {CREDENTIALS_FIX}",
                             permanent=True, channel_down=True)
    if e.code == TOO_LONG:
        return DeliveryError("DingTalk refused the message as too long", permanent=True, too_large=True)
    if e.status >= 500 or e.code == "-1":
        return DeliveryError(f"DingTalk failed to send: {e}")
    return DeliveryError(f"DingTalk refused the message: {e}", permanent=True)


__all__ = ["DingTalkAdapter"]
