"""The durable index of background jobs (`state/background.json`) and what a restart needs from it.

Why a file beside the session logs: the logs are the conversation's truth (a job's start, end and
result are recorded there), but a restart must find the jobs that were running without reading
every session log. The index holds one small entry per job from its start until its result has
reached the conversation, and the counter that numbers jobs (bg-1, bg-2, …) across restarts.
Written atomically (temp file, fsync, rename) on every change; a corrupt index is moved aside and
reported, never fatal (the session logs still hold every result).

Shared (`share()`, a fleet's processes on one home): each process holds in memory only the entries
of the sessions it works for (taken with `take`, given up with `release`), and every write is a
read-merge-write of the file under an exclusive lock (`background.json.lock`), so processes
never overwrite each other's entries and job ids stay unique across the fleet.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import signal
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from clawgate.workspace.users import OWNER

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
    user: str = ""  # the person whose run started it (OWNER or "<channel>:<sender>"; "" before this was kept)

    def person(self) -> str:
        """Whose job it is (whose /stop cancels it): the person recorded, else the owner for an owner's job."""
        return self.user or (OWNER if self.owner else f"?:{self.sender}")

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
    shared: bool = False
    _dropped: set[str] = field(default_factory=set)

    @classmethod
    def load(cls, path: Path, *, fsync: bool = True) -> "Index":
        index = cls(path, fsync)
        index.next, index.jobs = index._read()
        return index

    def _read(self) -> tuple[int, dict[str, Entry]]:
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
            return int(raw.get("next", 1)), {k: Entry.from_dict(v) for k, v in dict(raw.get("jobs", {})).items()}
        except FileNotFoundError:
            pass
        except (ValueError, TypeError, AttributeError, UnicodeDecodeError) as exc:
            aside = self.path.with_name(f"{self.path.name}.corrupt-{int(time.time())}")
            self.path.rename(aside)
            log.error("background job index %s is unreadable (%s); moved aside to %s. Results already "
                      "recorded stay in the session logs; jobs it listed are not reported again",
                      self.path, exc, aside.name)
        return 1, {}

    def share(self) -> None:
        """Several processes use this file from now on: hold only the entries taken (`take`)."""
        self.shared = True
        self.jobs.clear()

    def take(self, include: Callable[[str], bool]) -> None:
        """Shared: adopt the file's entries of the sessions `include` names (their work moved here)."""
        if not self.shared:
            return
        with self._locked():
            _, on_disk = self._read()
        for job_id, entry in on_disk.items():
            if include(entry.session) and job_id not in self.jobs:
                self.jobs[job_id] = entry

    def release(self, include: Callable[[str], bool]) -> list[Entry]:
        """Shared: forget the entries of these sessions here, leaving them in the file for the next holder."""
        gone = [entry for entry in self.jobs.values() if include(entry.session)]
        for entry in gone:
            del self.jobs[entry.id]
        return gone

    def drop(self, job_id: str) -> None:
        """The entry is done with (its result reached the conversation, or the conversation is gone)."""
        self.jobs.pop(job_id, None)
        if self.shared:  # the next merge must not bring it back from the file
            self._dropped.add(job_id)

    def new_id(self) -> str:
        if self.shared:  # the counter is the file's: the fleet's processes number jobs in one sequence
            with self._locked():
                self.next, _ = self._read()
                job_id = f"bg-{self.next}"
                self.next += 1
                self._write(self._merged())
            return job_id
        job_id = f"bg-{self.next}"
        self.next += 1
        return job_id

    def save(self) -> None:
        if not self.shared:
            self._write(self.jobs)
            return
        with self._locked():
            next_on_disk, _ = self._read()
            self.next = max(self.next, next_on_disk)
            self._write(self._merged())

    def _merged(self) -> dict[str, Entry]:
        """Under the lock: the file's entries of other processes, this process's own, minus those dropped here."""
        _, on_disk = self._read()
        merged = {k: v for k, v in on_disk.items() if k not in self._dropped}
        merged.update(self.jobs)
        self._dropped.clear()
        return merged

    def _write(self, jobs: dict[str, Entry]) -> None:
        data = {"version": VERSION, "next": self.next, "jobs": {k: asdict(v) for k, v in jobs.items()}}
        try:
            atomic_write_text(self.path, json.dumps(data, indent=1, ensure_ascii=False), fsync=self.fsync)
        except OSError as exc:
            log.error("could not write the background job index %s: %s", self.path, exc)

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """An exclusive lock beside the file: the read-merge-write of one process at a time."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path.with_name(self.path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)


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
