"""Stream mode through the official SDK (dingtalk-stream): the connection ticket, the WebSocket, the
envelopes, their ACKs.

The SDK names the gateway's open-connection address as a class constant built from
`https://api.dingtalk.com` (`DingTalkStreamClient.OPEN_CONNECTION_API`, read by `open_connection` through
the class), so `StreamClient` subclasses it only to take that address per client (`api_base`): two
accounts, or a test server, each have their own. Everything else is the SDK's: the subscription body,
`route_message` (SYSTEM ping / disconnect, CALLBACK topics to their handlers) and the ACK it sends after the
handler returned. `DingTalkStreamClient.start()` is not used: it retries forever by itself, sleeping and
swallowing every error, where the kit's runner must tell refused credentials (failed) from an outage
(retrying); `serve()` below runs the same steps once per connection.

Imported only when the channel connects (the SDK pulls `requests` and `websockets`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import platform
from typing import Any, Awaitable, Callable
from urllib.parse import quote_plus

import requests
import websockets
from dingtalk_stream import (
    AckMessage,
    CallbackHandler,
    CallbackMessage,
    CardCallbackMessage,
    ChatbotMessage,
    Credential,
    DingTalkStreamClient,
)
from dingtalk_stream.card_callback import Card_Callback_Router_Topic
from dingtalk_stream.version import VERSION_STRING

OnMessage = Callable[[ChatbotMessage, dict[str, Any]], Awaitable[None]]
OnPress = Callable[[str, str, list[str]], Awaitable[str]]  # (user id, the card's outTrackId, action ids) -> line
CARD_TOPIC = Card_Callback_Router_Topic  # "/v1.0/card/instances/callback"


class OpenRefused(Exception):
    """The gateway refused to open a connection: `status` says whether for the credentials."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(f"HTTP {status}: {text[:200]}" if status else text)
        self.status = status


class StreamClient(DingTalkStreamClient):
    """The SDK's client, its gateway address its own (see the module's docstring)."""

    def __init__(self, credential: Credential, api_base: str, logger: logging.Logger, timeout: float) -> None:
        super().__init__(credential, logger=logger)
        self.open_connection_api = api_base.rstrip("/") + "/v1.0/gateway/connections/open"
        self.timeout = timeout

    def open_connection(self) -> dict[str, Any]:
        """The SDK's request to the gateway, to this client's address; OpenRefused instead of None, so the
        caller can tell a refused secret from an outage."""
        topics: list[dict[str, str]] = []
        if self._is_event_required:
            topics.append({"type": "EVENT", "topic": "*"})
        topics += [{"type": "CALLBACK", "topic": topic} for topic in self.callback_handler_map]
        body = json.dumps({
            "clientId": self.credential.client_id, "clientSecret": self.credential.client_secret,
            "subscriptions": topics, "ua": f"dingtalk-sdk-python/v{VERSION_STRING}-union", "localIp": "",
        }).encode("utf-8")
        headers = {"Content-Type": "application/json", "Accept": "application/json",
                   "User-Agent": f"DingTalkStream/1.0 SDK/{VERSION_STRING} Python/{platform.python_version()} "
                                 "(+https://github.com/open-dingtalk/dingtalk-stream-sdk-python)"}
        try:
            response = requests.post(self.open_connection_api, headers=headers, data=body, timeout=self.timeout)
        except requests.RequestException as e:
            raise OpenRefused(0, f"{type(e).__name__}: {e}") from None
        if response.status_code >= 400:
            raise OpenRefused(response.status_code, response.text)
        try:
            answer = response.json()
        except ValueError:
            answer = None
        if not isinstance(answer, dict) or not answer.get("endpoint") or not answer.get("ticket"):
            raise OpenRefused(0, "the gateway answered without an endpoint and ticket")
        return answer

    async def serve(self) -> bool:
        """One connection: open it, route every envelope in order (its handler, then its ACK), until the
        gateway asks us to reconnect (SYSTEM `disconnect`: True) or closes it (False)."""
        self.pre_start()
        connection = await asyncio.to_thread(self.open_connection)
        uri = f'{connection["endpoint"]}?ticket={quote_plus(connection["ticket"])}'
        async with websockets.connect(uri, max_size=None) as websocket:
            self.websocket = websocket
            async for raw in websocket:
                try:
                    envelope = json.loads(raw)
                except ValueError:
                    self.logger.warning("DingTalk sent a frame that is not JSON; ignored")
                    continue
                if await self.route_message(envelope) == DingTalkStreamClient.TAG_DISCONNECT:
                    return True  # the gateway is about to close this one: the caller opens the next at once
        return False


class RobotHandler(CallbackHandler):
    """The robot topic `/v1.0/im/bot/messages/get`: each message handed on; the ACK (sent by the SDK after
    `process` returned) says OK only then. An exception propagates: no ACK, DingTalk delivers it again."""

    def __init__(self, on_message: OnMessage) -> None:
        super().__init__()
        self._on_message = on_message

    async def process(self, message: CallbackMessage) -> tuple[int, str]:
        data = message.data if isinstance(message.data, dict) else {}
        try:
            parsed = ChatbotMessage.from_dict(data)
        except (KeyError, TypeError, ValueError, AttributeError) as e:  # redelivering it would fail the same way
            self.logger.warning("DingTalk robot message %s not readable (%s); acknowledged and dropped",
                                message.headers.message_id, type(e).__name__)
            return AckMessage.STATUS_OK, "OK"
        await self._on_message(parsed, data)
        return AckMessage.STATUS_OK, "OK"


class CardHandler(CallbackHandler):
    """The card callback topic: a press on a card's button, by the DingTalk user id DingTalk names. The
    answer goes back in the ACK as the presser's own card data (`userPrivateData`: only they see it)."""

    def __init__(self, on_press: OnPress) -> None:
        super().__init__()
        self._on_press = on_press

    async def process(self, message: CallbackMessage) -> tuple[int, Any]:
        data = message.data if isinstance(message.data, dict) else {}
        try:
            press = CardCallbackMessage.from_dict(data)
        except (TypeError, ValueError) as e:
            self.logger.warning("DingTalk card callback not readable (%s); ignored", type(e).__name__)
            return AckMessage.STATUS_OK, {}
        content = press.content if isinstance(press.content, dict) else {}
        private = content.get("cardPrivateData") if isinstance(content.get("cardPrivateData"), dict) else {}
        actions = [str(a) for a in private.get("actionIds") or []]
        line = await self._on_press(str(press.user_id or ""), str(press.card_instance_id or ""), actions)
        return AckMessage.STATUS_OK, {"cardUpdateOptions": {"updatePrivateDataByKey": True},
                                      "userPrivateData": {"cardParamMap": {"tips": line}}}


__all__ = ["CARD_TOPIC", "CardHandler", "ChatbotMessage", "Credential", "OpenRefused", "RobotHandler", "StreamClient"]
