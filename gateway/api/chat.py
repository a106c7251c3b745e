"""chat.send, chat.history, chat.stop: talking to a session."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError

from clawgate.agent.bus import InboundMessage
from clawgate.agent.services import Services
from clawgate.agent.session import InvalidSessionKey, check_session_key
from clawgate.channels.gateway_chat import NAME as GATEWAY_CHANNEL

from ..connection import Connection
from ..methods import Params, method
from .chat_commands import command_of, run_command

MAX_TEXT = 100_000


def _session_key(value: str) -> str:
    """The shared rule (agent/session.py), reported as the params error `invalid_params`."""
    try:
        return check_session_key(value)
    except InvalidSessionKey as exc:
        raise PydanticCustomError("session_key", exc.message) from None


SessionKey = Annotated[str, AfterValidator(_session_key)]


AgentName = Annotated[str | None, Field(None, min_length=1, max_length=32, description=(
    "the agent whose session it is ([agents.<id>]); default: the default agent"))]


class ChatSend(Params):
    session: SessionKey = "main"
    agent: AgentName = None
    text: str = Field(min_length=1, max_length=MAX_TEXT)
    idempotencyKey: str | None = Field(None, min_length=1, max_length=200)


class SessionParam(Params):
    session: SessionKey
    agent: AgentName = None


def idempotent_id(session: str, key: str) -> str:
    """The inbound id of a retried send: the same for the same (session, key), and different for
    any other pair — the session's length is written first, so `x:y` + `z` is not `x` + `y:z`."""
    return f"gw:{len(session)}:{session}:{key}"


class HistoryParams(SessionParam):
    limit: int = Field(200, ge=1, le=5000)


@method("chat.send", ChatSend, "send a message to a session; acks {runId, seq} at once, the answer follows as "
                               "chat events (resume after seq to catch up); a chat command (/help) is answered "
                               "in the result, status command")
async def chat_send(services: Services, conn: Connection, p: ChatSend) -> dict[str, Any]:
    session = services.agent_key(p.session, p.agent)  # the route: decided here, stored in the key
    conn.subscribe(session)
    if (command := command_of(p.text)) is not None:  # answered now, never queued behind a run
        return run_command(services, conn, session, command)
    seq = conn.chat_seq(session)  # the answer is numbered after this
    # Whoever holds the gateway token is the owner (it also reads config.toml and state/).
    msg = InboundMessage(channel=GATEWAY_CHANNEL, chat_id=session, sender_id=str(conn.client.get("id") or "gateway"),
                         session_key=session, text=p.text,
                         metadata={"owner": True, **({"agent": p.agent} if p.agent else {})})
    if p.idempotencyKey:
        msg.id = idempotent_id(session, p.idempotencyKey)
    accepted = await services.intake.publish_inbound_async(msg)
    await services.intake.durable()
    return {"runId": msg.id, "status": "accepted" if accepted else "duplicate", "seq": seq}


@method("chat.history", HistoryParams, "the readable history of a session")
async def chat_history(services: Services, conn: Connection, p: HistoryParams) -> dict[str, Any]:
    session = services.agent_key(p.session, p.agent)
    conn.subscribe(session)
    return {"session": session, "messages": services.sessions.history(session, p.limit)}


@method("chat.stop", SessionParam, "cancel the running turn and the background jobs of a session (queued messages still run)")
async def chat_stop(services: Services, conn: Connection, p: SessionParam) -> dict[str, Any]:
    session = services.agent_key(p.session, p.agent)
    cancelled = services.sessions.stop_background(session)
    return {"session": session, "stopped": services.sessions.stop(session), "backgroundCancelled": cancelled}
