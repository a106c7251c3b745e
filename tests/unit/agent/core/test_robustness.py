"""Robustness of state and input without the daemon: SQLite side files, idempotency ids."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from clawgate.agent.core.statedb import open_state_db
from clawgate.gateway.api.chat import idempotent_id


def test_sqlite_side_files_are_user_only_whatever_the_umask(tmp_path: Path) -> None:
    """SQLite creates -wal and -shm on its own schedule (first read, first write, after a checkpoint
    removed them); they take the database file's mode, which is 0600 from its first byte."""
    before = os.umask(0o022)
    try:
        path = tmp_path / "state.db"
        for _ in range(2):  # the second open recreates the side files the first close removed
            db = open_state_db(path, fsync=False)
            db.execute("CREATE TABLE IF NOT EXISTS t (x)")
            db.execute("INSERT INTO t VALUES (1)")
            modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in tmp_path.iterdir()}
            assert modes == {"state.db": 0o600, "state.db-wal": 0o600, "state.db-shm": 0o600}
            db.close()
    finally:
        os.umask(before)


def test_idempotency_ids_are_stable_and_unambiguous() -> None:
    assert idempotent_id("x:y", "z") != idempotent_id("x", "y:z")
    assert idempotent_id("a", "b:c:d") != idempotent_id("a:b", "c:d") != idempotent_id("a:b:c", "d")
    assert idempotent_id("main", "k1") == idempotent_id("main", "k1")  # a retry is recognised
    pairs = [(s, k) for s in ("", "1", "1:", ":1", "11") for k in ("", "1", ":1", "1:")]
    assert len({idempotent_id(s, k) for s, k in pairs}) == len(pairs)
