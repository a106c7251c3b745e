"""chat.send, chat.history, chat.stop: talking to a session."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from agent.bus import InboundMessage
from agent.services import Services
from channels.gateway_chat import NAME as GATEWAY_CHANNEL

from ..connection import Connection
from ..methods import Params, method

MAX_TEXT = 100_000
SESSION = Field(min_length=1, max_length=200)


class ChatSend(Params):
    session: str = Field("main", min_length=1, max_length=200)
    text: str = Field(min_length=1, max_length=MAX_TEXT)
    idempotencyKey: str | None = Field(None, min_length=1, max_length=200)


class SessionParam(Params):
    session: str = SESSION


class HistoryParams(SessionParam):
    limit: int = Field(200, ge=1, le=5000)


@method("chat.send", ChatSend, "send a message to a session; acks {runId} at once, the answer follows as chat events")
async def chat_send(services: Services, conn: Connection, p: ChatSend) -> dict[str, Any]:
    conn.subscribe(p.session)
    # Whoever holds the gateway token is the owner (it also reads config.toml and state/).
    msg = InboundMessage(channel=GATEWAY_CHANNEL, chat_id=p.session, sender_id=str(conn.client.get("id") or "gateway"),
                         session_key=p.session, text=p.text, metadata={"owner": True})
    if p.idempotencyKey:
        msg.id = f"gw:{p.session}:{p.idempotencyKey}"
    accepted = services.intake.publish_inbound(msg)
    return {"runId": msg.id, "status": "accepted" if accepted else "duplicate"}


@method("chat.history", HistoryParams, "the readable history of a session")
async def chat_history(services: Services, conn: Connection, p: HistoryParams) -> dict[str, Any]:
    conn.subscribe(p.session)
    return {"session": p.session, "messages": services.sessions.history(p.session, p.limit)}


@method("chat.stop", SessionParam, "cancel the running turn of a session (queued messages still run)")
async def chat_stop(services: Services, conn: Connection, p: SessionParam) -> dict[str, Any]:
    return {"session": p.session, "stopped": services.sessions.stop(p.session)}
