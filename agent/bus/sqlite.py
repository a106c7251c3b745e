"""The embedded MessageBus: SQLite (WAL) inbox and outbox, updated in place.

The inbox row is committed before a channel acknowledges a message to its platform, and
the outbox row before a channel sends, so after a crash the daemon knows what was accepted
but not answered and what was answered but not delivered. The connection comes from
agent/core/statedb.py (shared settings and the tables, declared in agent/core/schema.py).

With a Durability barrier (the daemon), commits do not fsync one by one (synchronous=NORMAL:
a process crash loses nothing, the database is never corrupted); `durable()` fsyncs the WAL
for every commit so far in one batch shared by all callers (agent/core/durability.py).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from pathlib import Path
from typing import Iterator

from clawgate.agent.core.durability import Durability
from clawgate.agent.core.statedb import durable_file, open_state_db

from .bus import MessageBus
from .messages import InboundMessage, OutboundMessage


class SqliteBus(MessageBus):
    """One writer: the daemon's event loop thread. The queues in memory mirror the open rows."""

    def __init__(self, db: sqlite3.Connection, durability: Durability | None = None) -> None:
        self._db = db
        self._durability = durability
        self._wal = durable_file(db)
        self._inbound: asyncio.Queue[InboundMessage] = asyncio.Queue()
        self._outbound: asyncio.Queue[OutboundMessage] = asyncio.Queue()

    @classmethod
    def open(cls, path: Path, *, fsync: bool = True) -> "SqliteBus":
        """A bus on its own connection (tests, tools); the daemon shares one connection."""
        return cls(open_state_db(path, fsync=fsync))

    def close(self) -> None:
        self._db.close()

    # intake ------------------------------------------------------------------------------
    def publish_inbound(self, msg: InboundMessage) -> bool:
        cur = self._db.execute(
            "INSERT OR IGNORE INTO inbox(id, session_key, body, accepted_at) VALUES (?, ?, ?, ?)",
            (msg.id, msg.session_key, json.dumps(msg.to_dict()), time.time()),
        )
        if cur.rowcount != 1:
            return False
        self._written()
        self._inbound.put_nowait(msg)
        return True

    async def durable(self) -> None:
        if self._durability is not None:
            await self._durability.sync()

    def _written(self) -> None:
        if self._durability is not None:
            self._durability.mark(self._wal)

    async def next_inbound(self) -> InboundMessage:
        return await self._inbound.get()

    def begin_attempt(self, inbound_id: str, progress: int) -> int:
        row = self._db.execute(
            "UPDATE inbox SET attempts = CASE WHEN progress < ? THEN 1 ELSE attempts + 1 END, "
            "progress = max(progress, ?) WHERE id=? RETURNING attempts", (progress, progress, inbound_id)).fetchone()
        return int(row[0]) if row else 0

    def settle(self, inbound_id: str) -> None:
        self._db.execute("UPDATE inbox SET status='answered', answered_at=? WHERE id=?", (time.time(), inbound_id))

    def is_unanswered(self, inbound_id: str) -> bool:
        row = self._db.execute("SELECT status FROM inbox WHERE id=?", (inbound_id,)).fetchone()
        return row is not None and row[0] == "accepted"

    def has_unanswered(self, session_key: str) -> bool:
        row = self._db.execute("SELECT 1 FROM inbox WHERE status='accepted' AND session_key=? LIMIT 1",
                               (session_key,)).fetchone()
        return row is not None

    # delivery ----------------------------------------------------------------------------
    def publish_outbound(self, msg: OutboundMessage, *, answers: str | None = None) -> bool:
        with self._db:
            self._db.execute("BEGIN")
            inserted = self._db.execute(
                "INSERT OR IGNORE INTO outbox(id, channel, body, created_at) VALUES (?, ?, ?, ?)",
                (msg.id, msg.channel, json.dumps(msg.to_dict()), time.time()),
            ).rowcount == 1
            if answers:
                self._db.execute("UPDATE inbox SET status='answered', answered_at=? WHERE id=?", (time.time(), answers))
        if inserted:
            self._written()
            self._outbound.put_nowait(msg)
        return inserted

    async def next_outbound(self) -> OutboundMessage:
        return await self._outbound.get()

    def mark_delivered(self, outbound_id: str) -> None:
        self._db.execute("UPDATE outbox SET status='delivered', delivered_at=?, attempts=attempts+1 WHERE id=?",
                         (time.time(), outbound_id))

    def mark_failed(self, outbound_id: str, error: str) -> None:
        self._db.execute("UPDATE outbox SET status='failed', error=?, attempts=attempts+1 WHERE id=?",
                         (error[:500], outbound_id))

    def delivery_status(self, outbound_id: str) -> str | None:
        row = self._db.execute("SELECT status FROM outbox WHERE id=?", (outbound_id,)).fetchone()
        return row[0] if row else None

    # recovery and upkeep -----------------------------------------------------------------
    def replay_pending(self) -> tuple[int, int]:
        inbound, outbound = list(self.unanswered()), list(self.undelivered())
        for msg in inbound:
            self._inbound.put_nowait(msg)
        for out in outbound:
            self._outbound.put_nowait(out)
        return len(inbound), len(outbound)

    def unanswered(self) -> Iterator[InboundMessage]:
        rows = self._db.execute("SELECT body FROM inbox WHERE status='accepted' ORDER BY accepted_at, rowid").fetchall()
        for (body,) in rows:
            yield InboundMessage.from_dict(json.loads(body))

    def undelivered(self) -> Iterator[OutboundMessage]:
        rows = self._db.execute("SELECT body FROM outbox WHERE status='pending' ORDER BY created_at, rowid").fetchall()
        for (body,) in rows:
            yield OutboundMessage.from_dict(json.loads(body))

    def prune(self, keep_days: float) -> int:
        """Ids must be remembered only as long as a platform may redeliver them (Telegram: until
        the offset is confirmed; gateway idempotency keys: a client's retry window): days are plenty."""
        cutoff = time.time() - keep_days * 86400
        with self._db:
            self._db.execute("BEGIN")
            gone = self._db.execute("DELETE FROM inbox WHERE status='answered' AND answered_at < ?", (cutoff,)).rowcount
            gone += self._db.execute("DELETE FROM outbox WHERE status!='pending' AND created_at < ?", (cutoff,)).rowcount
        return gone

    def counts(self) -> dict[str, int]:
        q = self._db.execute
        return {
            "inboxOpen": q("SELECT count(*) FROM inbox WHERE status='accepted'").fetchone()[0],
            "outboxPending": q("SELECT count(*) FROM outbox WHERE status='pending'").fetchone()[0],
        }

    @property
    def inbound_depth(self) -> int:
        return self._inbound.qsize()
