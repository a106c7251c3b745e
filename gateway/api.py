"""Gateway method handlers: the daemon's public API, one small function per method."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from pydantic import Field

from channels.gateway_chat import NAME as GATEWAY_CHANNEL

from . import __version__, protocol
from .messages import InboundMessage
from .methods import MethodError, MethodTable, Params

if TYPE_CHECKING:
    from .daemon import Daemon
    from .server import Connection

MAX_TEXT = 100_000


class ChatSend(Params):
    session: str = Field("main", min_length=1, max_length=200)
    text: str = Field(min_length=1, max_length=MAX_TEXT)
    idempotencyKey: str | None = Field(None, min_length=1, max_length=200)


class SessionParam(Params):
    session: str = Field(min_length=1, max_length=200)


class HistoryParams(SessionParam):
    limit: int = Field(200, ge=1, le=5000)


class NoParams(Params):
    pass


class ApprovalResolve(Params):
    id: str
    approve: bool


def build_methods(daemon: "Daemon") -> MethodTable:
    table = MethodTable()

    @table.add("chat.send", ChatSend, "send a message to a session; acks {runId} at once, the answer follows as chat events")
    async def chat_send(conn: "Connection", p: ChatSend) -> dict[str, Any]:
        conn.subscribe(p.session)
        msg = InboundMessage(
            channel=GATEWAY_CHANNEL, chat_id=p.session, sender_id=str(conn.client.get("id") or "gateway"),
            session_key=p.session, text=p.text,
        )
        if p.idempotencyKey:
            msg.id = f"gw:{p.session}:{p.idempotencyKey}"
        accepted = daemon.bus.publish_inbound(msg)
        return {"runId": msg.id, "status": "accepted" if accepted else "duplicate"}

    @table.add("chat.history", HistoryParams, "the readable history of a session")
    async def chat_history(conn: "Connection", p: HistoryParams) -> dict[str, Any]:
        conn.subscribe(p.session)
        if not daemon.sessions.exists(p.session):
            return {"session": p.session, "messages": []}
        return {"session": p.session, "messages": daemon.sessions.get(p.session).history(p.limit)}

    @table.add("sessions.list", NoParams, "all sessions with their last activity")
    async def sessions_list(conn: "Connection", p: NoParams) -> dict[str, Any]:
        items = daemon.sessions.summaries()
        for item in items:
            item["busy"] = daemon.agent.busy(item["key"])
        return {"sessions": items}

    @table.add("sessions.reset", SessionParam, "start a session afresh (the old transcript is archived, not deleted)")
    async def sessions_reset(conn: "Connection", p: SessionParam) -> dict[str, Any]:
        if daemon.agent.busy(p.session):
            raise MethodError(protocol.CONFLICT, f"session {p.session!r} is busy; wait for the answer or stop it first")
        archived = daemon.reset_session(p.session)
        return {"session": p.session, "archived": archived}

    @table.add("chat.stop", SessionParam, "cancel the running turn of a session (queued messages still run)")
    async def chat_stop(conn: "Connection", p: SessionParam) -> dict[str, Any]:
        return {"session": p.session, "stopped": daemon.agent.stop_current(p.session)}

    @table.add("status", NoParams, "daemon health: version, uptime, sessions, queues, provider, channels")
    async def status(conn: "Connection", p: NoParams) -> dict[str, Any]:
        return daemon.status()

    @table.add("approvals.list", NoParams, "tool calls waiting for the user's approval")
    async def approvals_list(conn: "Connection", p: NoParams) -> dict[str, Any]:
        return {"pending": daemon.approvals.pending()}

    @table.add("approvals.resolve", ApprovalResolve, "approve or deny a pending tool call")
    async def approvals_resolve(conn: "Connection", p: ApprovalResolve) -> dict[str, Any]:
        if not daemon.approvals.resolve(p.id, p.approve):
            raise MethodError(protocol.NOT_FOUND, f"no pending approval {p.id!r}; it may have timed out")
        return {"id": p.id, "approved": p.approve}

    return table


def uptime_since(started: float) -> float:
    return round(time.time() - started, 1)


__all__ = ["build_methods", "uptime_since", "__version__"]
