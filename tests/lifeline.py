"""Servers the tests start (Synapse, Dovecot, redis-server, the daemons, the MCP server) die with the
pytest process, however it ends: a SIGKILL of pytest runs no fixture teardown, and each server runs
in its own session (so a Ctrl-C meant for pytest does not reach it first).

One small reaper process per pytest process reads, on a pipe from pytest, the process groups to kill
("+<pid> <start time>"). When pytest ends, by any means, the pipe closes and the reaper kills the
groups whose leader is still the very process that was listed (same pid and start time in /proc): a
server its fixture already stopped is left alone, and so is a later process that reused its pid.
PR_SET_PDEATHSIG is not used: it follows the thread that started the child, and some tests start a
daemon from a worker thread that ends long before the daemon should.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from typing import IO

REAPER = r"""
import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)
def started(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except OSError:
        return None
groups = {}
for line in sys.stdin:
    op, _, rest = line.strip().partition(" ")
    if op.startswith("+"):
        groups[int(op[1:])] = rest
for pid, start in groups.items():
    if started(pid) == start:
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
"""

_lock = threading.Lock()
_reaper: "subprocess.Popen[str] | None" = None


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (/proc/<pid>/stat field 22): with the pid, its identity."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except OSError:
        return None


def _send(line: str) -> None:
    global _reaper
    with _lock:
        if _reaper is None or _reaper.poll() is not None:
            _reaper = subprocess.Popen([sys.executable, "-S", "-c", REAPER], stdin=subprocess.PIPE, text=True,
                                       start_new_session=True)
        stdin: IO[str] | None = _reaper.stdin
        assert stdin is not None
        stdin.write(line + "\n")
        stdin.flush()


def hold(proc: "subprocess.Popen[...]") -> None:  # type: ignore[type-arg]
    """Kill `proc`'s process group when this pytest process ends. `proc` must lead its own group
    (started with `start_new_session=True`), so what it starts (Dovecot's imap processes) goes too."""
    start = _start_time(proc.pid)
    if start is not None:
        _send(f"+{proc.pid} {start}")

