"""The daemons under test start from a copy of one home the real `clawgate init --yes` wrote this run
(tests/harness.py): that copy must be exactly what the command writes for a new home, or every daemon
test would run on a home no user has."""

from __future__ import annotations

import re
import stat
import subprocess
import sys
from pathlib import Path

from tests.harness import ROOT, DaemonProcess

TOKEN_LINE = re.compile(r'^token = "([^"]+)"', re.MULTILINE)


def _tree(home: Path) -> list[tuple[str, int, bytes | None]]:
    """Every path under `home` with its mode and, for files, its bytes (config.toml without its token)."""
    out = []
    for path in sorted([home, *home.rglob("*")]):
        data = path.read_bytes() if path.is_file() else None
        if path.name == "config.toml" and data is not None:
            data = TOKEN_LINE.sub('token = "…"', data.decode()).encode()
        out.append((str(path.relative_to(home)), stat.S_IMODE(path.lstat().st_mode), data))
    return out


def _token(home: Path) -> str:
    found = TOKEN_LINE.search((home / "config.toml").read_text())
    assert found is not None
    return found.group(1)


def test_a_copied_home_is_what_init_writes_with_a_token_of_its_own(tmp_path: Path) -> None:
    real = DaemonProcess(tmp_path / "real", anthropic_url=None)
    done = subprocess.run([sys.executable, "-m", "clawgate.gateway.cli", "init", "--yes"], env=real.env, cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    first, second = (DaemonProcess(tmp_path / name, anthropic_url=None) for name in ("first", "second"))
    first.init()
    second.init()
    assert _tree(first.home) == _tree(real.home) == _tree(second.home)
    assert len({_token(real.home), _token(first.home), _token(second.home)}) == 3
    assert stat.S_IMODE((first.home / "config.toml").stat().st_mode) == 0o600
