"""SQLite (WAL) for queue-like state updated in place: the inbox and the outbox.

The inbox row is committed before a channel acknowledges a message to its platform, and
the outbox row before a channel sends, so after a crash the daemon knows what was accepted
but not answered and what was answered but not delivered.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from pathlib import Path
from typing import Iterator

from .messages import InboundMessage, OutboundMessage

log = logging.getLogger(__name__)

SCHEMA = """
CREATE TABLE IF NOT EXISTS inbox (
    id TEXT PRIMARY KEY,
    session_key TEXT NOT NULL,
    body TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'accepted',   -- accepted | answered
    attempts INTEGER NOT NULL DEFAULT 0,       -- starts without progress; guards against poison messages
    progress INTEGER NOT NULL DEFAULT -1,      -- session log position when the last attempt began
    accepted_at REAL NOT NULL,
    answered_at REAL
);
CREATE INDEX IF NOT EXISTS inbox_open ON inbox(status) WHERE status = 'accepted';
CREATE TABLE IF NOT EXISTS outbox (
    id TEXT PRIMARY KEY,
    channel TEXT NOT NULL,
    body TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'pending',    -- pending | delivered | failed
    attempts INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL,
    delivered_at REAL,
    error TEXT
);
CREATE INDEX IF NOT EXISTS outbox_open ON outbox(status) WHERE status = 'pending';
CREATE TABLE IF NOT EXISTS kv (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
"""


class Store:
    """One connection, one writer (the daemon's event loop thread)."""

    def __init__(self, path: Path, *, fsync: bool = True) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        try:
            self.db = self._open(path, fsync)
        except sqlite3.DatabaseError as exc:
            # Never crash-loop on a damaged file: keep it for inspection, start a fresh one.
            aside = path.with_name(f"{path.name}.corrupt-{int(time.time())}")
            path.rename(aside)
            for suffix in ("-wal", "-shm"):
                extra = path.with_name(path.name + suffix)
                if extra.exists():
                    extra.rename(aside.with_name(aside.name + suffix))
            log.error("state database %s is corrupt (%s); moved aside to %s and started a new one", path, exc, aside.name)
            self.db = self._open(path, fsync)

    @staticmethod
    def _open(path: Path, fsync: bool) -> sqlite3.Connection:
        db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            # FULL fsyncs the WAL on each commit (power-loss safe); NORMAL is process-crash safe.
            db.execute(f"PRAGMA synchronous={'FULL' if fsync else 'NORMAL'}")
            db.execute("PRAGMA busy_timeout=5000")
            if db.execute("PRAGMA quick_check").fetchone()[0] != "ok":
                raise sqlite3.DatabaseError("integrity check failed")
            db.executescript(SCHEMA)
        except sqlite3.DatabaseError:
            db.close()
            raise
        path.chmod(0o600)
        return db

    def close(self) -> None:
        self.db.close()

    # inbox -----------------------------------------------------------------
    def accept(self, msg: InboundMessage) -> bool:
        """Record an inbound message; False if its id was seen before (a redelivery)."""
        cur = self.db.execute(
            "INSERT OR IGNORE INTO inbox(id, session_key, body, accepted_at) VALUES (?, ?, ?, ?)",
            (msg.id, msg.session_key, json.dumps(msg.to_dict()), time.time()),
        )
        return cur.rowcount == 1

    def mark_answered(self, inbound_id: str) -> None:
        self.db.execute(
            "UPDATE inbox SET status='answered', answered_at=? WHERE id=?", (time.time(), inbound_id)
        )

    def begin_attempt(self, inbound_id: str, progress: int) -> int:
        """Count a processing start; an attempt that begins further along than the last one
        (the session log grew) resets the count. Returns starts-without-progress so far."""
        row = self.db.execute(
            "UPDATE inbox SET attempts = CASE WHEN progress < ? THEN 1 ELSE attempts + 1 END, "
            "progress = max(progress, ?) WHERE id=? RETURNING attempts", (progress, progress, inbound_id)).fetchone()
        return int(row[0]) if row else 0

    def has_unanswered(self, session_key: str) -> bool:
        row = self.db.execute("SELECT 1 FROM inbox WHERE status='accepted' AND session_key=? LIMIT 1", (session_key,)).fetchone()
        return row is not None

    def unanswered(self) -> Iterator[InboundMessage]:
        rows = self.db.execute(
            "SELECT body FROM inbox WHERE status='accepted' ORDER BY accepted_at, rowid"
        ).fetchall()
        for (body,) in rows:
            yield InboundMessage.from_dict(json.loads(body))

    def inbox_status(self, inbound_id: str) -> str | None:
        row = self.db.execute("SELECT status FROM inbox WHERE id=?", (inbound_id,)).fetchone()
        return row[0] if row else None

    # outbox ----------------------------------------------------------------
    def enqueue(self, msg: OutboundMessage, *, answers: str | None = None) -> bool:
        """Record a reply and, in the same transaction, mark the message it answers.
        False when a reply with this id was recorded before (nothing is queued twice)."""
        with self.db:
            self.db.execute("BEGIN")
            inserted = self.db.execute(
                "INSERT OR IGNORE INTO outbox(id, channel, body, created_at) VALUES (?, ?, ?, ?)",
                (msg.id, msg.channel, json.dumps(msg.to_dict()), time.time()),
            ).rowcount == 1
            if answers:
                self.db.execute(
                    "UPDATE inbox SET status='answered', answered_at=? WHERE id=?", (time.time(), answers)
                )
        return inserted

    def mark_delivered(self, outbound_id: str) -> None:
        self.db.execute(
            "UPDATE outbox SET status='delivered', delivered_at=?, attempts=attempts+1 WHERE id=?",
            (time.time(), outbound_id),
        )

    def mark_failed(self, outbound_id: str, error: str) -> None:
        self.db.execute(
            "UPDATE outbox SET status='failed', error=?, attempts=attempts+1 WHERE id=?", (error[:500], outbound_id)
        )

    def undelivered(self) -> Iterator[OutboundMessage]:
        rows = self.db.execute(
            "SELECT body FROM outbox WHERE status='pending' ORDER BY created_at, rowid"
        ).fetchall()
        for (body,) in rows:
            yield OutboundMessage.from_dict(json.loads(body))

    def outbox_status(self, outbound_id: str) -> str | None:
        row = self.db.execute("SELECT status FROM outbox WHERE id=?", (outbound_id,)).fetchone()
        return row[0] if row else None

    def prune(self, keep_days: float) -> int:
        """Forget answered inbox and finished outbox rows older than `keep_days`. Ids must be
        remembered only as long as a platform may redeliver them (Telegram: until the offset
        is confirmed; gateway idempotency keys: a client's retry window), so days are plenty."""
        cutoff = time.time() - keep_days * 86400
        with self.db:
            self.db.execute("BEGIN")
            gone = self.db.execute("DELETE FROM inbox WHERE status='answered' AND answered_at < ?", (cutoff,)).rowcount
            gone += self.db.execute("DELETE FROM outbox WHERE status!='pending' AND created_at < ?", (cutoff,)).rowcount
        return gone

    def counts(self) -> dict[str, int]:
        q = self.db.execute
        return {
            "inbox_open": q("SELECT count(*) FROM inbox WHERE status='accepted'").fetchone()[0],
            "outbox_pending": q("SELECT count(*) FROM outbox WHERE status='pending'").fetchone()[0],
        }

    # small key/value state for channels (e.g. a Telegram offset) -------------
    def get(self, key: str, default: str | None = None) -> str | None:
        row = self.db.execute("SELECT value FROM kv WHERE key=?", (key,)).fetchone()
        return row[0] if row else default

    def put(self, key: str, value: str) -> None:
        self.db.execute("INSERT INTO kv(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value=excluded.value", (key, value))
