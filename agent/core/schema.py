"""Every table and index of the daemon's SQLite files, their version, and how older files catch up.

Two files: the state database (`state/clawgate.db`: queues, cron, pairing, channel state, usage,
gateway replies) and the checkpoint database (`state/checkpoints/checkpoints.db`). Each has a
`Schema`: the SQL of every table as this version creates it, and an ordered list of migrations.
The version lives in the file (`PRAGMA user_version`); statedb.open_state_db brings a file up to
date once, at open, so the stores that own the rows only ever query.

A migration runs in one transaction that also records its version, so a crash leaves the file
before or after it, never halfway. Files written before the schema had a version say 0 and may
hold any earlier shape, so every migration must be idempotent: safe on a file that already has
what it adds. Changing the schema: edit the SQL below AND append a migration that gets every
earlier file there (tests/unit/agent/core/test_schema.py migrates a real file of every shipped
version and compares it with a fresh one). A file newer than this code is refused, untouched.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

STATE_TABLES = """
-- the message bus (agent/bus/sqlite.py)
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

-- cron jobs, their bounded run history, the daemon's starts for @reboot (agent/triggers/cron_store.py)
CREATE TABLE IF NOT EXISTS cron_jobs (
    id TEXT PRIMARY KEY,
    body TEXT NOT NULL,              -- the job as JSON (triggers/jobs.py Job.to_dict)
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS cron_runs (
    run_id TEXT PRIMARY KEY,         -- the inbound message id of the run (cron:<job>:<time>)
    job_id TEXT NOT NULL,
    scheduled_at REAL,
    started_at REAL NOT NULL,
    ended_at REAL,
    status TEXT NOT NULL,            -- queued | running | ok | error | cancelled | missed | skipped
    result TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS cron_runs_job ON cron_runs(job_id, started_at);
CREATE TABLE IF NOT EXISTS cron_meta (
    key TEXT PRIMARY KEY,            -- "daemon": the current daemon start, for @reboot jobs
    value TEXT NOT NULL              -- JSON
);

-- token usage per (day, session), added to in batches (agent/usage/store.py)
CREATE TABLE IF NOT EXISTS usage (
    day TEXT NOT NULL,               -- YYYY-MM-DD, the daemon host's local date
    session TEXT NOT NULL,           -- session key ('' for calls made outside any session)
    calls INTEGER NOT NULL DEFAULT 0,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    cache_read INTEGER NOT NULL DEFAULT 0,
    cache_write INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (day, session)
) WITHOUT ROWID;

-- pairing codes and the users they admitted, per channel (channels/kit/pairing.py)
CREATE TABLE IF NOT EXISTS pairing_requests (
    channel TEXT NOT NULL,
    code TEXT NOT NULL,
    user_id TEXT NOT NULL,
    username TEXT,
    chat_id TEXT NOT NULL,
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL,
    status TEXT NOT NULL DEFAULT 'pending',   -- pending | approved | replaced (pushed out by newer ones)
    code_sent INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (channel, code)
);
CREATE TABLE IF NOT EXISTS pairing_allowed (
    channel TEXT NOT NULL,
    user_id TEXT NOT NULL,
    username TEXT,
    chat_id TEXT,
    approved_at REAL NOT NULL,
    notified INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (channel, user_id)
);

-- every chat channel's own bookkeeping (channels/kit/store.py), one row per (channel, ...): the
-- cursor and small adapter state, chunks sent per reply, events handled outside the inbox,
-- strangers refused once, the id each owner named by username had at first contact
CREATE TABLE IF NOT EXISTS channel_state (channel TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
                                          PRIMARY KEY (channel, key));
CREATE TABLE IF NOT EXISTS channel_sent (channel TEXT NOT NULL, outbound_id TEXT NOT NULL, chunks INTEGER NOT NULL,
                                         updated_at REAL NOT NULL, PRIMARY KEY (channel, outbound_id));
CREATE TABLE IF NOT EXISTS channel_seen (channel TEXT NOT NULL, key TEXT NOT NULL, seen_at REAL NOT NULL,
                                         PRIMARY KEY (channel, key));
CREATE TABLE IF NOT EXISTS channel_refused (channel TEXT NOT NULL, user_id TEXT NOT NULL, refused_at REAL NOT NULL,
                                            PRIMARY KEY (channel, user_id));
CREATE TABLE IF NOT EXISTS channel_owner_ids (channel TEXT NOT NULL, username TEXT NOT NULL, user_id TEXT NOT NULL,
                                              bound_at REAL NOT NULL, PRIMARY KEY (channel, username));

-- the gateway's chat replies, numbered per session for clients that resume (channels/gateway_chat.py)
CREATE TABLE IF NOT EXISTS gateway_chat (
    session TEXT NOT NULL,
    seq INTEGER NOT NULL,                      -- per session, from 1
    outbox_id TEXT NOT NULL UNIQUE,            -- the reply's outbox row: a replayed reply keeps its number
    payload TEXT NOT NULL,                     -- the `chat` event as clients get it
    created_at REAL NOT NULL,
    PRIMARY KEY (session, seq)
);
"""

CHECKPOINT_TABLES = """
-- one row per checkpoint, and each session's live branch head (agent/checkpoints/store.py)
CREATE TABLE IF NOT EXISTS checkpoints (
    id TEXT PRIMARY KEY,
    session TEXT NOT NULL,
    time REAL NOT NULL,
    seq INTEGER NOT NULL,
    body BLOB NOT NULL                         -- the checkpoint's JSON with its checksum (checkpoints/model.py)
);
CREATE INDEX IF NOT EXISTS checkpoints_by_session ON checkpoints(session, time, seq);
CREATE TABLE IF NOT EXISTS heads (
    session TEXT PRIMARY KEY,
    id TEXT NOT NULL
);
"""

# Cron jobs stored before jobs recorded whether their creating run had read untrusted content:
# nobody can tell any more, so their runs are treated as untrusted (re-adding a job makes it trusted).
LEGACY_TAINT = "created before clawgate recorded where jobs come from"
_TELEGRAM_OFFSET = "telegram:offset"


class SchemaTooNew(Exception):
    """The file was written by a newer clawgate; the message says so in one line, with the fix."""


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    apply: Callable[[sqlite3.Connection], None]


@dataclass(frozen=True)
class Schema:
    """One database file's tables and the migrations that bring any earlier file to them."""

    tables: str
    migrations: tuple[Migration, ...]

    @property
    def version(self) -> int:
        return self.migrations[-1].version


def statements(sql: str) -> list[str]:
    """The SQL split into whole statements, to run them inside our own transaction (sqlite3's
    executescript would commit it first)."""
    found: list[str] = []
    pending = ""
    for piece in sql.split(";"):
        pending += piece + ";"
        if sqlite3.complete_statement(pending):
            code = [line for line in pending.splitlines() if not line.strip().startswith("--")]
            if "\n".join(code).strip(" \n;"):
                found.append(pending.strip())
            pending = ""
    return found


def _tables(sql: str) -> Callable[[sqlite3.Connection], None]:
    def create(db: sqlite3.Connection) -> None:
        for statement in statements(sql):
            db.execute(statement)
    return create


def _has_table(db: sqlite3.Connection, name: str) -> bool:
    return db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (name,)).fetchone() is not None


def _telegram_offset_out_of_kv(db: sqlite3.Connection) -> None:
    """The first versions kept Telegram's polling offset in a shared key/value table (its only key).
    A newer offset already in telegram_state wins (migration 4 carries that table over); then the
    shared table goes."""
    if not _has_table(db, "kv"):
        return
    if _has_table(db, "telegram_state"):
        db.execute("INSERT OR IGNORE INTO telegram_state(key, value) SELECT key, value FROM kv WHERE key=?",
                   (_TELEGRAM_OFFSET,))
    else:
        db.execute("INSERT OR IGNORE INTO channel_state(channel, key, value) "
                   "SELECT 'telegram', 'cursor', value FROM kv WHERE key=?", (_TELEGRAM_OFFSET,))
    db.execute("DROP TABLE kv")


def _cron_jobs_carry_creator_and_taint(db: sqlite3.Connection) -> None:
    """Jobs stored before cron recorded who made a job (the owner, then) and whether its creating
    run had read untrusted content (unknown, so untrusted: LEGACY_TAINT)."""
    for job_id, body in db.execute("SELECT id, body FROM cron_jobs").fetchall():
        try:
            job = json.loads(body)
        except (TypeError, ValueError):
            continue  # not ours to repair: the cron store reports a job it cannot read
        if not isinstance(job, dict) or ("tainted" in job and "created_by" in job):
            continue
        job.setdefault("created_by", "")
        job.setdefault("tainted", LEGACY_TAINT)
        db.execute("UPDATE cron_jobs SET body=? WHERE id=?", (json.dumps(job, ensure_ascii=False), job_id))


_LEGACY_TELEGRAM = {  # table -> the statement that carries its rows into the channel tables
    "telegram_state": "INSERT OR REPLACE INTO channel_state(channel, key, value) SELECT 'telegram', "
                      f"CASE key WHEN '{_TELEGRAM_OFFSET}' THEN 'cursor' ELSE key END, value FROM telegram_state",
    "telegram_sent": "INSERT OR IGNORE INTO channel_sent(channel, outbound_id, chunks, updated_at) "
                     "SELECT 'telegram', outbound_id, chunks, updated_at FROM telegram_sent",
    "telegram_seen": "INSERT OR IGNORE INTO channel_seen(channel, key, seen_at) SELECT 'telegram', key, seen_at "
                     "FROM telegram_seen",
    "telegram_refused": "INSERT OR IGNORE INTO channel_refused(channel, user_id, refused_at) "
                        "SELECT 'telegram', user_id, refused_at FROM telegram_refused",
    "telegram_owner_ids": "INSERT OR IGNORE INTO channel_owner_ids(channel, username, user_id, bound_at) "
                          "SELECT 'telegram', username, user_id, bound_at FROM telegram_owner_ids",
}


def _telegram_tables_become_channel_tables(db: sqlite3.Connection) -> None:
    """Telegram's bookkeeping moves into the tables every channel shares (the channel kit): the
    channel tables are made, the telegram_* rows carried over (its offset becomes the cursor), the
    old tables dropped."""
    _tables(STATE_TABLES)(db)
    for table, carry in _LEGACY_TELEGRAM.items():
        if _has_table(db, table):
            db.execute(carry)
            db.execute(f"DROP TABLE {table}")


STATE = Schema(STATE_TABLES, (
    Migration(1, "every table and index the file lacks", _tables(STATE_TABLES)),
    Migration(2, "Telegram's polling offset leaves the shared key/value table", _telegram_offset_out_of_kv),
    Migration(3, "cron jobs carry their creator and taint", _cron_jobs_carry_creator_and_taint),
    Migration(4, "Telegram's bookkeeping moves into the channel tables", _telegram_tables_become_channel_tables),
))
CHECKPOINTS = Schema(CHECKPOINT_TABLES, (
    Migration(1, "every table and index the file lacks", _tables(CHECKPOINT_TABLES)),
))


def version_of(db: sqlite3.Connection) -> int:
    return int(db.execute("PRAGMA user_version").fetchone()[0])


def refuse_newer(db: sqlite3.Connection, schema: Schema, path: Path | str) -> int:
    """The file's version; SchemaTooNew when a newer clawgate wrote it (nothing is changed)."""
    found = version_of(db)
    if found > schema.version:
        raise SchemaTooNew(f"{path} was written by a newer clawgate (schema {found} > {schema.version}); "
                           "upgrade clawgate or restore a backup")
    return found


def migrate(db: sqlite3.Connection, schema: Schema, path: Path | str = "the database") -> list[Migration]:
    """Bring the file to `schema.version`, one transaction per migration; returns those applied.

    The version is read again under the write lock, so two processes opening the same file at
    once apply each migration once. `db` must be in autocommit mode (isolation_level=None).
    """
    if refuse_newer(db, schema, path) == schema.version:
        return []
    applied: list[Migration] = []
    for migration in schema.migrations:
        db.execute("BEGIN IMMEDIATE")
        try:
            current = refuse_newer(db, schema, path)
            if current >= migration.version:
                db.execute("ROLLBACK")
                continue
            migration.apply(db)
            db.execute(f"PRAGMA user_version = {int(migration.version)}")
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        applied.append(migration)
    return applied
