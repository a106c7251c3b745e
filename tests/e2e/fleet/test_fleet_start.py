"""Joining a fleet: Redis unreachable or without its append-only file stops the start in one line;
single-process mode never imports redis."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.fleet_support import RedisServer
from tests.harness import ROOT, DaemonProcess, free_port


def _gateway(home: Path, url: str) -> subprocess.CompletedProcess[str]:
    proc = DaemonProcess(home, anthropic_url=None, env={"CLAWGATE_FLEET__REDIS_URL": url})
    proc.init()
    return proc.cli("gateway", timeout=60)


def test_unreachable_redis_is_one_line_naming_it_with_the_password_masked(tmp_path: Path) -> None:
    url = f"redis://:s3cret-pw@127.0.0.1:{free_port()}/0"  # nothing listens there
    result = _gateway(tmp_path / "home", url)
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "cannot reach Redis at redis://:***@127.0.0.1:" in lines[0]
    assert "CLAWGATE_FLEET__REDIS_URL" in lines[0]
    assert "s3cret-pw" not in result.stderr + result.stdout
    assert "Traceback" not in result.stderr


def test_redis_without_append_only_file_is_refused(tmp_path: Path) -> None:
    server = RedisServer(tmp_path / "redis", appendonly=False).start()
    try:
        result = _gateway(tmp_path / "home", server.url)
    finally:
        server.kill()
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "appendonly" in lines[0] and "appendonly yes" in lines[0]


def test_single_process_mode_never_imports_redis() -> None:
    code = ("import sys\n"
            "from clawgate.config.schema import Settings\n"
            "from clawgate.gateway import app, fleet\n"
            "assert fleet.build(Settings()) is None\n"
            "print(sorted(m for m in sys.modules if m == 'redis' or m.startswith('redis.')))\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
