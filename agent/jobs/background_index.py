"""The durable index of background jobs (`state/background.json`) and what a restart needs from it.

Why a file beside the session logs: the logs are the conversation's truth (a job's start, end and
result are recorded there), but a restart must find the jobs that were running without reading
every session log. The index holds one small entry per job from its start until its result has
reached the conversation, and the counter that numbers jobs (bg-1, bg-2, …) across restarts.
Written atomically (temp file, fsync, rename) on every change; a corrupt index is moved aside and
reported, never fatal (the session logs still hold every result).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..core.fsio import atomic_write_text
from ..tools.handoff import process_start

log = logging.getLogger(__name__)
VERSION = 1


@dataclass
class Entry:
    """One job as a restart needs it: whose it is, where to tell them, and which process it was."""

    id: str
    session: str
    kind: str
    summary: str
    sender: str
    owner: bool
    deliver: dict[str, str] | None
    started: float
    state: str = "running"  # running | ended (its result not yet in the conversation)
    pid: int | None = None
    pid_start: str | None = None  # the process's start time (/proc), so a reused pid is never killed
    quiet: bool = False  # cancelled by the person: told at the next model call, never woken for

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Entry":
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        return cls(**known)


@dataclass
class Index:
    path: Path
    fsync: bool = True
    next: int = 1
    jobs: dict[str, Entry] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path, *, fsync: bool = True) -> "Index":
        index = cls(path, fsync)
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            index.next = int(raw.get("next", 1))
            index.jobs = {k: Entry.from_dict(v) for k, v in dict(raw.get("jobs", {})).items()}
        except FileNotFoundError:
            pass
        except (ValueError, TypeError, AttributeError, UnicodeDecodeError) as exc:
            aside = path.with_name(f"{path.name}.corrupt-{int(time.time())}")
            path.rename(aside)
            log.error("background job index %s is unreadable (%s); moved aside to %s. Results already "
                      "recorded stay in the session logs; jobs it listed are not reported again", path, exc, aside.name)
        return index

    def new_id(self) -> str:
        job_id = f"bg-{self.next}"
        self.next += 1
        return job_id

    def save(self) -> None:
        data = {"version": VERSION, "next": self.next, "jobs": {k: asdict(v) for k, v in self.jobs.items()}}
        try:
            atomic_write_text(self.path, json.dumps(data, indent=1, ensure_ascii=False), fsync=self.fsync)
        except OSError as exc:
            log.error("could not write the background job index %s: %s", self.path, exc)


def kill_leftover(entry: Entry) -> bool:
    """Kill the process group of a job that outlived a crashed daemon; True if it was still running.

    Only when the pid still names the same process (same start time): a pid reused by an
    unrelated program is never touched.
    """
    if entry.pid is None or entry.pid_start is None or process_start(entry.pid) != entry.pid_start:
        return False
    try:
        os.killpg(entry.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return False
    return True
