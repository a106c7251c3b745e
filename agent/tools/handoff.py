"""What a tool needs to hand its running work to the background jobs, without importing them.

The background jobs (agent/jobs/background.py) sit above the tools: they adopt work a tool started
and report back into the session. A tool sees only this side of the hand-off — the record of the
OS process it runs, the refusal when there is no room, and the two calls it makes — so the tools
never import the jobs package.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol


class JobLimit(Exception):
    """No room for another background job; the message names the cap and what to do."""


def process_start(pid: int) -> str | None:
    """The kernel's start time of `pid` (Linux /proc), or None when it cannot be read."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else None  # field 22 of stat; the first two precede ")"


@dataclass
class ProcessInfo:
    """The OS process behind a job, filled in by the tool that runs it: a restart kills a leftover
    process by it, and the end event reports its exit."""

    pid: int | None = None
    start: str | None = None
    exit_code: int | None = None
    timed_out: bool = False
    spawned: asyncio.Event = field(default_factory=asyncio.Event)

    def started(self, pid: int) -> None:
        self.pid, self.start = pid, process_start(pid)
        self.spawned.set()


class Adopted(Protocol):
    """The job a hand-off became; its id is what the model is told."""

    id: str


class Background(Protocol):
    """The background jobs as a tool uses them (agent/jobs/background.py BackgroundJobs)."""

    def refusal(self, session_key: str) -> str | None:
        """Why another job cannot start now (one line naming the cap), or None."""

    def adopt(self, task: "asyncio.Task[str]", *, session_key: str, kind: str, summary: str, sender_id: str,
              owner: bool, deliver: dict[str, str] | None, process: ProcessInfo | None = None,
              user: str = "") -> Adopted:
        """Take over running work; raises JobLimit when the caps are reached."""
