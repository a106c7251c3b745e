"""`clawgate doctor`: the checks, each one line with its fix, and none needs a running daemon.

Why a separate module from the command: the checks take their probes (the sandbox status,
disk usage) as arguments, so each failing check can be produced in a test without breaking
the machine the test runs on.
"""

from __future__ import annotations

import errno
import shutil
import socket
import stat
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Literal

from config.loader import ConfigError, load
from config.paths import Paths
from config.schema import Settings
from config.token import gateway_token

Status = Literal["ok", "warn", "fail", "skip"]
ANTHROPIC_URL = "https://api.anthropic.com"
TELEGRAM_URL = "https://api.telegram.org/bot"
HTTP_SECONDS = 10.0
DISK_FAIL_BYTES = 100 * 1024 * 1024
DISK_WARN_BYTES = 1024 * 1024 * 1024


@dataclass(frozen=True)
class Check:
    name: str
    status: Status
    detail: str
    fix: str = ""

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


def default_sandbox_status() -> Any:
    """The exec sandbox's own report (agent/tools/sandbox.py: Landlock, probed with a real child)."""
    from agent.tools.sandbox import sandbox_status

    return sandbox_status()


def check_sandbox(sandbox_status: Callable[[], Any]) -> Check:
    try:
        report = sandbox_status()
    except Exception as exc:
        return Check("sandbox", "fail", f"the sandbox check failed: {_short(exc)}", "see docs/security.md")
    if report is None:
        return Check("sandbox", "skip", "this build has no exec sandbox; exec confines by argument checks only")
    available, detail, fix = _sandbox_fields(report)
    if available:
        return Check("sandbox", "ok", detail or "available")
    return Check("sandbox", "fail", detail or "not available",
                 fix or "exec then relies on argument checks alone: run on a Linux kernel with Landlock (5.13+), "
                        "see docs/security.md")


def _sandbox_fields(report: Any) -> tuple[bool, str, str]:
    """The sandbox module's report as (available, detail, fix), whatever simple shape it takes."""
    if isinstance(report, bool):
        return report, "", ""
    if isinstance(report, tuple):
        return bool(report[0]), str(report[1]) if len(report) > 1 else "", ""
    get = report.get if isinstance(report, dict) else lambda key, default=None: getattr(report, key, default)
    available = get("available", get("ok", False))
    detail = get("detail", None) or get("reason", None) or get("backend", None) or ""
    return bool(available), str(detail), str(get("fix", "") or "")


def check_database(paths: Paths) -> Check:
    from agent.statedb import StateUnavailable, open_state_db

    database = paths.database
    if not database.exists():
        return Check("database", "ok", f"{database} not created yet (the gateway makes it at first start)")
    try:
        open_state_db(database, repair=False).close()
    except StateUnavailable as exc:
        return Check("database", "fail", str(exc).split(";")[0], str(exc).split(";", 1)[-1].strip())
    return Check("database", "ok", f"{database} passed its integrity check")


def check_disk(paths: Paths, disk_usage: Callable[[Path], Any]) -> Check:
    where = paths.home
    while not where.exists() and where != where.parent:
        where = where.parent
    free = disk_usage(where).free
    text = f"{free / 1024 ** 3:.1f} GB free at {where}"
    if free < DISK_FAIL_BYTES:
        return Check("disk", "fail", text, "free disk space: the state database and session logs need room")
    if free < DISK_WARN_BYTES:
        return Check("disk", "warn", text, "free some disk space soon")
    return Check("disk", "ok", text)


def _short(exc: BaseException, secret: str | None = None) -> str:
    text = (str(exc).strip() or type(exc).__name__).splitlines()[0]
    return text.replace(secret, "***") if secret else text


def exit_code(checks: list[Check]) -> int:
    """0: nothing failed (warnings and skips allowed); 1: at least one check failed."""
    return 1 if any(c.status == "fail" for c in checks) else 0


def line(check: Check) -> str:
    mark = {"ok": "ok  ", "warn": "WARN", "fail": "FAIL", "skip": "skip"}[check.status]
    text = f"{mark} {check.name:10} {check.detail}"
    return text + (f" — fix: {check.fix}" if check.fix and check.status != "ok" else "")
