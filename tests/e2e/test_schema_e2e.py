"""The state database's schema version through the real CLI and daemon.

A file written by a newer clawgate stops the gateway, doctor and the offline commands with one
line and is left byte for byte; the oldest shipped file is reported by doctor (unchanged), then
migrated by the gateway at start and read by it.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

from clawgate.agent.core.schema import CHECKPOINTS, LEGACY_TAINT, STATE
from tests.harness import ROOT, DaemonProcess

OLDEST = Path(__file__).resolve().parents[1] / "fixtures" / "statedb" / "v0.1.0-6a78ab2.sql"
NEWER = STATE.version + 1


def _home(tmp_path: Path, anthropic_url: str | None = None) -> DaemonProcess:
    proc = DaemonProcess(tmp_path / "home", anthropic_url=anthropic_url)
    proc.init()
    (proc.home / "state").mkdir(parents=True, exist_ok=True)
    return proc


def _newer_database(proc: DaemonProcess) -> Path:
    path = proc.home / "state" / "clawgate.db"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE inbox (id TEXT PRIMARY KEY, things_to_come BLOB)")
    db.execute(f"PRAGMA user_version = {NEWER}")
    db.commit()
    db.close()
    return path


def _one_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode != 0 and "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("clawgate:")]
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_a_newer_database_stops_the_gateway_and_every_offline_command_untouched(tmp_path: Path) -> None:
    proc = _home(tmp_path)
    path = _newer_database(proc)
    original = path.read_bytes()
    expected = (f"{path} was written by a newer clawgate (schema {NEWER} > {STATE.version}); "
                "upgrade clawgate or restore a backup")

    gateway = subprocess.run([sys.executable, "-m", "clawgate.gateway.cli", "gateway"], env=proc.env, cwd=ROOT,
                             capture_output=True, text=True, timeout=120)
    assert _one_line(gateway) == f"clawgate: {expected}"
    assert _one_line(proc.cli("cron", "list")) == f"clawgate: {expected}"
    assert _one_line(proc.cli("pairing", "list")) == f"clawgate: {expected}"

    doctor = proc.cli("doctor", "--json", "--offline")
    checks = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}
    assert doctor.returncode == 1 and checks["database"]["status"] == "fail"
    assert f"schema {NEWER} > {STATE.version}" in checks["database"]["detail"]
    assert checks["database"]["fix"] == "upgrade clawgate or restore a backup"

    assert path.read_bytes() == original
    assert sorted(p.name for p in path.parent.iterdir() if p.name.startswith("clawgate.db")) == ["clawgate.db"]


def test_a_newer_checkpoint_database_stops_the_gateway_with_one_line(tmp_path: Path) -> None:
    proc = _home(tmp_path)
    path = proc.home / "state" / "checkpoints" / "checkpoints.db"
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version = {CHECKPOINTS.version + 1}")
    db.commit()
    db.close()
    original = path.read_bytes()
    gateway = subprocess.run([sys.executable, "-m", "clawgate.gateway.cli", "gateway"], env=proc.env, cwd=ROOT,
                             capture_output=True, text=True, timeout=120)
    assert _one_line(gateway) == (f"clawgate: {path} was written by a newer clawgate (schema "
                                  f"{CHECKPOINTS.version + 1} > {CHECKPOINTS.version}); upgrade clawgate or restore a backup")
    assert path.read_bytes() == original


def test_the_oldest_shipped_database_is_migrated_at_start_and_read(tmp_path: Path, fake_model) -> None:
    proc = _home(tmp_path, fake_model.base_url)
    path = proc.home / "state" / "clawgate.db"
    db = sqlite3.connect(path)
    db.executescript(OLDEST.read_text())
    db.execute("PRAGMA journal_mode=WAL")  # as the daemon of that version left it
    original = [*db.iterdump(), db.execute("PRAGMA user_version").fetchone()]
    db.close()

    doctor = proc.cli("doctor", "--json", "--offline")
    checks = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}
    assert checks["database"]["status"] == "ok"
    assert f"(schema 0; the gateway brings it to {STATE.version} at its next start)" in checks["database"]["detail"]
    db = sqlite3.connect(path)
    assert [*db.iterdump(), db.execute("PRAGMA user_version").fetchone()] == original  # doctor only looked
    db.close()

    proc.start()
    try:
        listed = json.loads(proc.cli("cron", "list", "--json").stdout)
        jobs = listed["jobs"] if isinstance(listed, dict) else listed
        assert sorted(j["message"] for j in jobs) == ["morning briefing", "water the plants"]
        assert all(LEGACY_TAINT in j["tainted"] for j in jobs)
    finally:
        proc.kill()
    db = sqlite3.connect(path)
    try:
        assert db.execute("PRAGMA user_version").fetchone()[0] == STATE.version
        assert db.execute("SELECT value FROM channel_state WHERE channel='telegram' AND key='cursor'").fetchone() == (
            "424242",)
    finally:
        db.close()


def test_a_corrupt_database_is_one_line_for_offline_commands_and_left_for_the_gateway(tmp_path: Path) -> None:
    proc = _home(tmp_path)
    path = proc.home / "state" / "clawgate.db"
    path.write_bytes(b"SQLite format 3\x00" + b"\xff" * 4000)
    original = path.read_bytes()
    line = _one_line(proc.cli("cron", "list"))
    assert "is corrupt" in line and "start the gateway once to set it aside" in line
    doctor = proc.cli("doctor", "--json", "--offline")
    checks = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}
    assert doctor.returncode == 1 and checks["database"]["status"] == "fail" and "corrupt" in checks["database"]["detail"]
    assert path.read_bytes() == original
