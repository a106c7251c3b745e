"""The gateway's own chat clients (terminal, web page) as a channel like any other.

Inbound: `chat.send` publishes to the bus. Outbound: a reply becomes a `chat` event with
state final (or error) for the clients watching that session.

Replies are numbered per session (`seq`, kept in the state database with the reply) so a
client that lost its connection asks for what came after the last number it saw (connect
`resume`, docs/protocol.md). A reply no client of its session received is not delivered:
`send` waits until one has it — a client that subscribes or resumes — so the outbox row stays
pending meanwhile and is sent again after a restart.

A trigger's answer (cron job, heartbeat) delivered to a session people watch is also kept in that
session's log, before anyone is told it was delivered, so `chat.history` shows it with its label
and the agent of that session can refer to it (docs/triggers.md, "Answers in the target's history").
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import logging
import time
from typing import Any, Awaitable, Callable, Protocol

from clawgate.agent.bus import OutboundMessage, unsent_line
from clawgate.agent.core.errors import WriteRefused

from .base import Channel

log = logging.getLogger(__name__)

# Writes a delivered trigger answer into the target session's log, once per outbox id, durably.
KeepDelivered = Callable[[str, str, dict[str, Any]], Awaitable[None]]

# Replies kept per session for clients catching up; older ones are read with chat.history.
KEEP = 500


class EventSink(Protocol):
    """The gateway server, as this channel sees it: events to the clients watching a session."""

    def broadcast(self, name: str, payload: dict[str, Any], session: str | None = None) -> int: ...

NAME = "gateway"


class GatewayChatChannel(Channel):
    name = NAME

    def __init__(self, server: EventSink, db: sqlite3.Connection, keep_delivered: KeepDelivered | None = None) -> None:
        self.server = server
        self.db = db
        self.keep_delivered = keep_delivered
        # session -> seq -> resolved once a client of the session has that reply
        self._waiting: dict[str, dict[int, asyncio.Future[None]]] = {}

    async def start(self) -> None:
        return None  # the WebSocket server is started by the daemon

    async def stop(self) -> None:
        return None

    async def send(self, msg: OutboundMessage) -> None:
        """Return once a client of the session has the reply (then the dispatcher marks it delivered)."""
        # The chat id is the address (a gateway session); it differs from session_key when a
        # trigger (cron job in cron:<id>) delivers to a session people watch, e.g. gateway:main.
        target = msg.chat_id or msg.session_key
        payload = self._numbered(msg, target)
        await self.keep(msg, target, payload)
        if self.server.broadcast("chat", payload, target) > 0:
            return
        seq = int(payload["seq"])
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(target, {})[seq] = waiter
        try:
            await waiter
        finally:
            waiting = self._waiting.get(target, {})
            waiting.pop(seq, None)
            if not waiting:
                self._waiting.pop(target, None)

    def number(self, msg: OutboundMessage) -> tuple[str, dict[str, Any]]:
        """The reply's address and its numbered `chat` event, kept for clients that `resume` (a
        fleet relays it to the clients of every process, gateway/fleet.py)."""
        target = msg.chat_id or msg.session_key
        return target, self._numbered(msg, target)

    async def keep(self, msg: OutboundMessage, target: str, payload: dict[str, Any]) -> None:
        """A trigger's answer delivered to another session goes into that session's log (numbered,
        labelled) before the delivery is acknowledged; a reply in the session that ran it is there already."""
        if self.keep_delivered is None or "from" not in payload or target == msg.session_key:
            return
        try:
            await self.keep_delivered(target, msg.id, payload)
        except WriteRefused as exc:  # a fleet worker not holding the target session: still shown live
            log.warning("trigger answer %s not kept in the history of %s: %s", msg.id, target, exc)

    def _numbered(self, msg: OutboundMessage, target: str) -> dict[str, Any]:
        """The reply's `chat` event with its number: the same number when the reply is sent again."""
        row = self.db.execute("SELECT payload FROM gateway_chat WHERE outbox_id = ?", (msg.id,)).fetchone()
        if row is not None:
            return dict(json.loads(row[0]))
        seq = self.last_seq(target) + 1
        payload = {"session": target, "runId": msg.in_reply_to, "state": "error" if msg.kind == "error" else "final",
                   "kind": msg.kind, "text": self._text(msg), "seq": seq}
        origin = _origin(msg)
        if origin:
            payload["from"] = origin
        self.db.execute("INSERT INTO gateway_chat(session, seq, outbox_id, payload, created_at) VALUES (?, ?, ?, ?, ?)",
                        (target, seq, msg.id, json.dumps(payload, ensure_ascii=False), time.time()))
        if seq > KEEP:  # a session's first KEEP replies leave nothing to drop: no write for it
            self.db.execute("DELETE FROM gateway_chat WHERE session = ? AND seq <= ?", (target, seq - KEEP))
        return payload

    @staticmethod
    def _text(msg: OutboundMessage) -> str:
        """A file from send_file is not carried here: the page and `clawgate chat` get a line saying so."""
        if msg.file is None:
            return msg.text
        return unsent_line(msg, "files are only delivered to chat platforms (Telegram, Discord, Slack, Matrix, email).")

    def last_seq(self, session: str) -> int:
        """The number of the session's latest reply (0: none yet)."""
        return int(self.db.execute("SELECT MAX(seq) FROM gateway_chat WHERE session = ?", (session,)).fetchone()[0] or 0)

    def waiting_sessions(self) -> list[str]:
        """Sessions with a reply no client has had yet."""
        return sorted(self._waiting)

    def catch_up(self, session: str, since: int | None, deliver: Callable[[dict[str, Any]], bool]) -> int:
        """Hand one client what it has not seen of a session: every kept reply numbered after
        `since`, or without `since` only the replies no client has had yet. A reply `deliver`
        accepted counts as delivered. Returns how many were handed over."""
        if since is None:
            seqs = sorted(self._waiting.get(session, {}))
            rows = [r for s in seqs for r in self.db.execute(
                "SELECT payload FROM gateway_chat WHERE session = ? AND seq = ?", (session, s))]
        else:
            rows = self.db.execute("SELECT payload FROM gateway_chat WHERE session = ? AND seq > ? ORDER BY seq",
                                   (session, since)).fetchall()
        sent = 0
        for (raw,) in rows:
            payload = json.loads(raw)
            if not deliver(payload):
                continue
            sent += 1
            waiter = self._waiting.get(session, {}).get(int(payload["seq"]))
            if waiter is not None and not waiter.done():
                waiter.set_result(None)
        return sent


def _origin(msg: OutboundMessage) -> dict[str, Any] | None:
    """Which trigger a reply comes from, for the clients to label it: a cron job (its id, name and
    schedule), the heartbeat or a webhook (its name, the delivery); None for an answer to a person's message."""
    cron = msg.metadata.get("cron")
    if isinstance(cron, dict):
        return {"kind": "cron", "job": cron.get("job"), "name": cron.get("name"), "schedule": cron.get("schedule")}
    if msg.metadata.get("heartbeat") is not None:
        return {"kind": "heartbeat"}
    hook = msg.metadata.get("hook")
    if isinstance(hook, dict):  # an inbound webhook's run (agent/triggers/hooks.py)
        return {"kind": "hook", "name": hook.get("name"), "delivery": hook.get("delivery")}
    return None
