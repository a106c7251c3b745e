"""Reach a checkpoint's stored row from a test, as a person with the database file could: read its
JSON, tamper with it, or remove it (state/checkpoints/checkpoints.db, agent/checkpoints/store.py)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any


def _db(checkpoints: Path) -> sqlite3.Connection:
    db = sqlite3.connect(checkpoints / "checkpoints.db", timeout=10, isolation_level=None)
    db.execute("PRAGMA busy_timeout=10000")  # the daemon may be writing
    return db


def read(checkpoints: Path, cp_id: str) -> dict[str, Any]:
    db = _db(checkpoints)
    try:
        row = db.execute("SELECT body FROM checkpoints WHERE id=?", (cp_id,)).fetchone()
    finally:
        db.close()
    assert row is not None, f"no row for {cp_id}"
    return json.loads(row[0])


def write(checkpoints: Path, cp_id: str, body: dict[str, Any] | bytes) -> None:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    db = _db(checkpoints)
    try:
        assert db.execute("UPDATE checkpoints SET body=? WHERE id=?", (raw, cp_id)).rowcount == 1
    finally:
        db.close()


def remove(checkpoints: Path, cp_id: str) -> None:
    db = _db(checkpoints)
    try:
        assert db.execute("DELETE FROM checkpoints WHERE id=?", (cp_id,)).rowcount == 1
    finally:
        db.close()
