"""The rotating log file (log.file) and `clawgate logs [--follow] [--json]`."""

from __future__ import annotations

import json
import logging
import select
import stat
import subprocess
import sys
from pathlib import Path

from clawgate.agent.core.redact import register_secrets
from clawgate.gateway.logs import setup_logging
from tests.harness import ROOT
from tests.waiting import wait_until
from tests.zygote import outside_environment


def test_the_daemon_writes_a_private_log_file_that_logs_prints(daemon_factory) -> None:
    daemon = daemon_factory({"CLAWGATE_LOG__FILE": "true"})
    log_file = daemon.home / "logs/clawgate.log"
    wait_until(lambda: "job(s) scheduled" in (log_file.read_text() if log_file.exists() else ""),
               "the daemon's log file", interval=0.1)
    assert stat.S_IMODE(log_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(log_file.parent.stat().st_mode) == 0o700
    out = daemon.cli("logs")
    assert out.returncode == 0 and "job(s) scheduled" in out.stdout
    as_json = [json.loads(line) for line in daemon.cli("logs", "--json").stdout.splitlines()]
    assert any(e["level"] == "info" and e["logger"].startswith("clawgate.agent.") and "scheduled" in e["message"]
               for e in as_json), as_json


def test_logs_without_a_file_says_how_to_turn_it_on(daemon) -> None:
    out = daemon.cli("logs")
    assert out.returncode == 1 and out.stderr.count("\n") == 1 and "log.file = true" in out.stderr


def test_secrets_are_masked_in_the_file_and_it_rotates(tmp_path: Path) -> None:
    log_file = tmp_path / "logs/clawgate.log"
    register_secrets(["sk-very-secret-value-123456"])
    try:
        setup_logging("info", file=log_file, max_bytes=10_000, backups=2)
        log = logging.getLogger("test.logs")
        log.info("the key is sk-very-secret-value-123456")
        for i in range(400):
            log.info("line %d %s", i, "x" * 60)
    finally:
        setup_logging("info")  # back to stderr only; closes the file
    files = sorted(p.name for p in log_file.parent.iterdir())
    assert files == ["clawgate.log", "clawgate.log.1", "clawgate.log.2"], files
    text = "".join(p.read_text() for p in log_file.parent.iterdir())
    assert "sk-very-secret-value-123456" not in text
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in log_file.parent.iterdir())


def test_follow_prints_new_lines_across_a_rotation(tmp_path: Path) -> None:
    home = tmp_path / "home"
    log_file = home / "logs/clawgate.log"
    log_file.parent.mkdir(parents=True)
    log_file.write_text("2026-11-23T10:00:00Z info    old: before\n")
    env = {**outside_environment(), "CLAWGATE_HOME": str(home)}
    proc = subprocess.Popen([sys.executable, "-m", "clawgate.gateway.cli", "logs", "--follow", "--json"], env=env, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen: list[dict[str, str]] = []

    def until(message: str) -> None:
        def printed() -> bool:
            assert proc.poll() is None, (message, seen, proc.poll())
            ready, _, _ = select.select([proc.stdout], [], [], 0.5)
            if ready:
                seen.append(json.loads(proc.stdout.readline()))
            return any(e["message"] == message for e in seen)
        wait_until(printed, f"`logs --follow` to print {message!r}", interval=0, describe=lambda: repr(seen))

    try:
        until("before")
        with open(log_file, "a") as fh:
            fh.write("2026-11-23T10:00:01Z warning new: appended\n")
        until("appended")
        log_file.rename(log_file.with_name("clawgate.log.1"))
        log_file.write_text("2026-11-23T10:00:02Z error rotated: in the new file\n")
        until("in the new file")
    finally:
        proc.kill()
        proc.wait(10)
    assert [e["level"] for e in seen] == ["info", "warning", "error"]
    assert seen[1] == {"ts": "2026-11-23T10:00:01Z", "level": "warning", "logger": "new", "message": "appended"}
