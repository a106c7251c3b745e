"""The gateway's own chat clients (terminal, web page) as a channel like any other.

Inbound: `chat.send` publishes to the bus. Outbound: a reply becomes a `chat` event with
state final (or error) for the clients watching that session.
"""

from __future__ import annotations

from typing import Any, Protocol

from agent.bus import OutboundMessage

from .base import Channel


class EventSink(Protocol):
    """The gateway server, as this channel sees it: events to the clients watching a session."""

    def broadcast(self, name: str, payload: dict[str, Any], session: str | None = None) -> int: ...

NAME = "gateway"


class GatewayChatChannel(Channel):
    name = NAME

    def __init__(self, server: EventSink) -> None:
        self.server = server

    async def start(self) -> None:
        return None  # the WebSocket server is started by the daemon

    async def stop(self) -> None:
        return None

    async def send(self, msg: OutboundMessage) -> None:
        state = "error" if msg.kind == "error" else "final"
        # The chat id is the address (a gateway session); it differs from session_key when a
        # trigger (cron job in cron:<id>) delivers to a session people watch, e.g. gateway:main.
        target = msg.chat_id or msg.session_key
        self.server.broadcast("chat", {
            "session": target, "runId": msg.in_reply_to, "state": state,
            "kind": msg.kind, "text": msg.text,
        }, target)
