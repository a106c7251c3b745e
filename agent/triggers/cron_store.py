"""Cron jobs and their bounded run history, in the daemon's SQLite database (WAL).

Own tables (declared with every other in agent/core/schema.py) beside the inbox/outbox, so the
daemon and an offline `clawgate cron …` share one file safely (SQLite's locking, a busy timeout),
and a job change is one transaction.
Jobs are stored as JSON bodies: readable with the sqlite3 shell, no pickle.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clawgate.agent.core.statedb import open_state_db

from .jobs import Job

OPEN = ("queued", "running")
RESULT_CAP = 500


@dataclass
class Run:
    run_id: str
    job_id: str
    scheduled_at: float | None
    started_at: float
    ended_at: float | None
    status: str
    result: str

    def public(self) -> dict[str, Any]:
        return {"runId": self.run_id, "job": self.job_id, "scheduledAt": self.scheduled_at,
                "startedAt": self.started_at, "endedAt": self.ended_at, "status": self.status,
                "result": self.result}


class CronStore:
    """Jobs and runs. Give it the daemon Store's connection, or `open` a path (the offline CLI)."""

    def __init__(self, db: sqlite3.Connection, *, history: int = 50) -> None:
        self.db = db
        self.history = history

    @classmethod
    def open(cls, path: Path, *, history: int = 50, fsync: bool = True) -> "CronStore":
        """On its own connection (the offline CLI); never repairs: only the daemon sets files aside."""
        return cls(open_state_db(path, fsync=fsync, repair=False), history=history)

    # jobs ----------------------------------------------------------------------
    def save(self, job: Job) -> Job:
        job.updated_at = time.time()
        self.db.execute(
            "INSERT INTO cron_jobs(id, body, updated_at) VALUES(?, ?, ?) "
            "ON CONFLICT(id) DO UPDATE SET body=excluded.body, updated_at=excluded.updated_at",
            (job.id, json.dumps(job.to_dict(), ensure_ascii=False), job.updated_at),
        )
        return job

    def get(self, job_id: str) -> Job | None:
        row = self.db.execute("SELECT body FROM cron_jobs WHERE id=?", (job_id,)).fetchone()
        return Job.from_dict(json.loads(row[0])) if row else None

    def jobs(self) -> list[Job]:
        rows = self.db.execute("SELECT body FROM cron_jobs").fetchall()
        return sorted((Job.from_dict(json.loads(body)) for (body,) in rows), key=lambda j: j.created_at)

    def delete(self, job_id: str) -> bool:
        with self.db:
            self.db.execute("BEGIN")
            cur = self.db.execute("DELETE FROM cron_jobs WHERE id=?", (job_id,))
            self.db.execute("DELETE FROM cron_runs WHERE job_id=?", (job_id,))
        return cur.rowcount == 1

    # the daemon's starts (@reboot) ---------------------------------------------
    def meta(self, key: str) -> dict[str, Any] | None:
        row = self.db.execute("SELECT value FROM cron_meta WHERE key=?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def set_meta(self, key: str, value: dict[str, Any]) -> None:
        self.db.execute("INSERT INTO cron_meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                        (key, json.dumps(value)))

    # runs ----------------------------------------------------------------------
    def record(self, run: Run) -> bool:
        """Add a run (ignored if its id is known: a redelivered fire) and trim old history."""
        with self.db:
            self.db.execute("BEGIN")
            cur = self.db.execute(
                "INSERT OR IGNORE INTO cron_runs(run_id, job_id, scheduled_at, started_at, ended_at, status, result) "
                "VALUES(?, ?, ?, ?, ?, ?, ?)",
                (run.run_id, run.job_id, run.scheduled_at, run.started_at, run.ended_at, run.status,
                 run.result[:RESULT_CAP]),
            )
            self.db.execute(
                "DELETE FROM cron_runs WHERE job_id=? AND run_id NOT IN "
                "(SELECT run_id FROM cron_runs WHERE job_id=? ORDER BY started_at DESC, rowid DESC LIMIT ?)",
                (run.job_id, run.job_id, self.history),
            )
        return cur.rowcount == 1

    def finish(self, run_id: str, status: str, result: str, ended_at: float | None = None) -> bool:
        cur = self.db.execute(
            "UPDATE cron_runs SET status=?, result=?, ended_at=? WHERE run_id=?",
            (status, result[:RESULT_CAP], ended_at or time.time(), run_id),
        )
        return cur.rowcount == 1

    def run(self, run_id: str) -> Run | None:
        row = self.db.execute("SELECT * FROM cron_runs WHERE run_id=?", (run_id,)).fetchone()
        return Run(*row) if row else None

    def runs(self, job_id: str, limit: int = 50) -> list[Run]:
        rows = self.db.execute(
            "SELECT * FROM cron_runs WHERE job_id=? ORDER BY started_at DESC, rowid DESC LIMIT ?", (job_id, limit)
        ).fetchall()
        return [Run(*row) for row in rows]

    def close(self) -> None:
        self.db.close()
