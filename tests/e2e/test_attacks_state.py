"""State files under attack or accident: a locked database is not corruption, real corruption is.

Only a failed integrity check (or bytes that are not a database) may move the state file aside;
a lock held by another process, a full disk or too many open files must leave it where it is,
say so in one line, and stop.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from clawgate.agent.core import statedb
from clawgate.agent.core.statedb import StateUnavailable, open_state_db

HOLD_LOCK = textwrap.dedent("""
    import sqlite3, sys, time
    db = sqlite3.connect(sys.argv[1], isolation_level=None)
    db.execute("BEGIN EXCLUSIVE")
    print("locked", flush=True)
    sys.stdin.read()  # hold the lock until the test closes our stdin
""")


def _rollback_journal_db(path: Path) -> None:
    """A database in the default rollback-journal mode: switching it to WAL needs an exclusive lock."""
    db = sqlite3.connect(str(path))
    db.execute("CREATE TABLE cron_jobs (id TEXT PRIMARY KEY, body TEXT)")
    db.execute("INSERT INTO cron_jobs VALUES ('j1', '{}')")
    db.commit()
    db.close()


def _hold_lock(path: Path) -> subprocess.Popen[str]:
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(path)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
    return holder


def test_a_locked_database_is_reported_and_left_in_place(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(statedb, "BUSY_TIMEOUT_MS", 300)
    monkeypatch.setattr(statedb, "OPEN_PATIENCE_SECONDS", 1.0)
    path = tmp_path / "clawgate.db"
    _rollback_journal_db(path)
    holder = _hold_lock(path)
    try:
        with pytest.raises(StateUnavailable, match="locked by another process"):
            open_state_db(path)
    finally:
        holder.communicate("", timeout=30)
    assert not list(tmp_path.glob("*.corrupt*"))
    db = open_state_db(path)  # once the lock is gone it opens, data intact
    assert db.execute("SELECT id FROM cron_jobs").fetchall() == [("j1",)]


def test_a_real_corruption_is_moved_aside(tmp_path: Path) -> None:
    path = tmp_path / "clawgate.db"
    path.write_bytes(b"SQLite format 3\x00" + b"\xff" * 4000)
    db = open_state_db(path)
    assert db.execute("PRAGMA quick_check").fetchone()[0] == "ok"
    assert len(list(tmp_path.glob("clawgate.db.corrupt-*"))) == 1


def test_the_cli_never_sets_a_corrupt_file_aside(tmp_path: Path) -> None:
    path = tmp_path / "clawgate.db"
    path.write_bytes(b"not a database at all" * 50)
    with pytest.raises(StateUnavailable, match="corrupt"):
        open_state_db(path, repair=False)
    assert path.read_bytes().startswith(b"not a database") and not list(tmp_path.glob("*.corrupt*"))


@pytest.mark.waits
def test_the_daemon_stops_with_one_line_when_its_database_is_locked(tmp_path: Path) -> None:
    from tests.harness import DaemonProcess

    daemon = DaemonProcess(tmp_path / "home", anthropic_url=None)
    daemon.init()
    state = tmp_path / "home" / "state"
    state.mkdir(parents=True, exist_ok=True)
    _rollback_journal_db(state / "clawgate.db")
    holder = _hold_lock(state / "clawgate.db")
    try:
        result = subprocess.run([sys.executable, "-m", "clawgate.gateway.cli", "gateway"], env=daemon.env, cwd=daemon_root(),
                                capture_output=True, text=True, timeout=120)
    finally:
        holder.communicate("", timeout=30)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("clawgate:")]
    assert len(lines) == 1 and "locked by another process" in lines[0]
    assert not list(state.glob("*.corrupt*"))
    db = sqlite3.connect(str(state / "clawgate.db"))
    assert db.execute("SELECT id FROM cron_jobs").fetchall() == [("j1",)]


def daemon_root() -> Path:
    return Path(__file__).resolve().parents[2]
