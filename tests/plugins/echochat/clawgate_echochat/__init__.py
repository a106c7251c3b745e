"""EchoChat: an example third-party clawgate channel, only its platform's protocol on the channel kit.

The platform (tests/fakes/echochat.py) is a small HTTP API: GET /me checks the token, GET /updates
long-polls events after a cursor, POST /send sends one message (429 with retry_after when rate
limited, 4xx refused for good). It renders Markdown itself, so `render` only chunks.
"""

from __future__ import annotations

import httpx
from pydantic import BaseModel

from clawgate.channels.kit import (AccessSettings, Capabilities, ChannelAuthError, ChannelUnavailable, DeliveryError,
                                   Incoming, PlatformAdapter, Sender, Target, Unconfirmed)


class EchoChatSettings(AccessSettings):
    """[channels.echochat]: the kit's keys, the token, the API base."""

    token: str | None = None
    poll_seconds: float = 1.0


class EchoChatAdapter(PlatformAdapter):
    name = "echochat"
    settings_model = EchoChatSettings
    capabilities = Capabilities(max_chars=500)  # no edits, typing or buttons: the kit's text fallbacks

    def __init__(self, settings: BaseModel, kit) -> None:  # type: ignore[no-untyped-def]
        super().__init__(settings, kit)
        self.client: httpx.AsyncClient | None = None

    async def connect(self) -> None:
        s = self.settings
        if not s.base_url or not s.token:
            raise ChannelAuthError("set channels.echochat.base_url and channels.echochat.token")
        await self.disconnect()  # a reconnect starts with a fresh client
        self.client = httpx.AsyncClient(base_url=s.base_url, headers={"Authorization": f"Bearer {s.token}"},
                                        timeout=10.0)
        try:
            reply = await self.client.get("/me")
        except httpx.HTTPError as exc:
            raise ChannelUnavailable(f"cannot reach EchoChat ({type(exc).__name__})") from None
        if reply.status_code == 401:
            raise ChannelAuthError("EchoChat rejected the token; set a valid channels.echochat.token")
        self.kit.bot_name = reply.json()["name"]

    async def run(self) -> None:
        assert self.client is not None
        cursor = int(self.kit.store.cursor() or 0)
        while True:
            try:
                reply = await self.client.get("/updates", params={"after": cursor, "timeout": self.settings.poll_seconds})
            except httpx.HTTPError as exc:
                raise ChannelUnavailable(f"EchoChat polling failed ({type(exc).__name__})") from None
            if reply.status_code == 401:
                raise ChannelAuthError("EchoChat rejected the token; set a valid channels.echochat.token")
            for event in reply.json()["events"]:
                await self.kit.receive(self.incoming(event))  # a failure here: not acknowledged, delivered again
                cursor = int(event["id"])
                self.kit.store.save_cursor(str(cursor))

    def incoming(self, event: dict) -> Incoming:  # type: ignore[type-arg]
        text = str(event["text"])
        mention = f"@{self.kit.bot_name}"
        return Incoming(message_id=str(event["message_id"]), chat_id=str(event["chat"]),
                        sender=Sender(str(event["user"]), event.get("username")), private=event["chat_type"] == "dm",
                        text=text.replace(mention, "").strip() if event.get("mentions_bot") else text,
                        addressed=event["chat_type"] == "dm" or bool(event.get("mentions_bot")),
                        sender_is_bot=bool(event.get("bot")))

    async def disconnect(self) -> None:
        if self.client is not None:
            await self.client.aclose()
            self.client = None

    def render(self, markdown: str) -> list[str]:
        return self.kit.markdown.split_markdown(markdown, self.capabilities.max_chars) or ["(empty reply)"]

    async def send_text(self, target: Target, text: str) -> str:
        if self.client is None:
            raise DeliveryError("EchoChat is not connected")
        try:
            reply = await self.client.post("/send", json={"chat": target.chat_id, "text": text,
                                                         "reply_to": target.reply_to})
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise DeliveryError(f"cannot reach EchoChat ({type(exc).__name__})") from None
        except httpx.HTTPError as exc:  # the request may have arrived
            raise Unconfirmed(type(exc).__name__) from None
        if reply.status_code == 429:
            raise DeliveryError("rate limited", retry_after=float(reply.json()["retry_after"]))
        if 400 <= reply.status_code < 500:
            raise DeliveryError(f"EchoChat refused the message ({reply.status_code})", permanent=True)
        if reply.status_code >= 500:
            raise DeliveryError(f"EchoChat failed ({reply.status_code})")
        return str(reply.json()["id"])
