"""Long-task state on disk: `tasks/<id>.json`, written atomically after every change.

A task is the agent's explicit plan: a goal, ordered steps (at most one in progress),
verified progress notes and context. It lives outside the conversation so it survives
crashes, context resets and consolidation, and so heartbeats and restarts can resume it.
"""

from __future__ import annotations

import enum
import json
import logging
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Literal

from clawgate.workspace.users import OWNER

from ..context.shared_view import sees_all
from ..core.durability import Durability
from ..core.fsio import atomic_write_bytes
from ..session import Session

log = logging.getLogger(__name__)


class Anyone(enum.Enum):
    """No person filter: every task of the session."""

    ANYONE = "anyone"


ANYONE = Anyone.ANYONE
TaskStatus = Literal["pending", "in_progress", "completed", "failed", "cancelled"]
StepStatus = Literal["pending", "in_progress", "done", "skipped", "failed"]
ACTIVE: tuple[str, ...] = ("pending", "in_progress")
SCHEMA_VERSION = 1


@dataclass
class Step:
    text: str
    status: StepStatus = "pending"
    verification: str = ""


@dataclass
class Task:
    goal: str
    session_key: str
    id: str = field(default_factory=lambda: "t_" + uuid.uuid4().hex[:10])
    status: TaskStatus = "pending"
    steps: list[Step] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # verified progress
    context: dict[str, str] = field(default_factory=dict)
    turns: int = 0
    resume_attempts: int = 0
    result: str = ""
    created_at: float = field(default_factory=time.time)
    updated_at: float = field(default_factory=time.time)
    version: int = SCHEMA_VERSION
    # Whose task it is (workspace/users.py's key: OWNER, or a guest's): in a conversation several people
    # share, each person's runs see and work on their own tasks only. None: planned before tasks had one.
    user: str | None = None

    def belongs_to(self, person: str | None) -> bool:
        """A task from before tasks had a person is the owner's (the only one whose runs could plan then)."""
        return self.user == person if self.user is not None else person == OWNER

    @property
    def current_index(self) -> int | None:
        for i, step in enumerate(self.steps):
            if step.status == "in_progress":
                return i
        for i, step in enumerate(self.steps):
            if step.status == "pending":
                return i
        return None

    @property
    def done_count(self) -> int:
        return sum(1 for s in self.steps if s.status in ("done", "skipped"))

    def status_line(self) -> str:
        """One line for the runtime block and for /tasks."""
        n = len(self.steps)
        index = self.current_index
        if index is None:
            where = f"{self.done_count}/{n} steps done" if n else "no plan yet"
        else:
            where = f"step {index + 1}/{n}: {self.steps[index].text}"
        return f"task {self.id} [{self.status}] {self.goal} — {where}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Task":
        data = dict(data)
        data["steps"] = [Step(**s) for s in data.get("steps", [])]
        return cls(**data)


class CorruptTask(Exception):
    pass


class TaskStore:
    def __init__(self, folder: Path, *, fsync: bool = True, durability: Durability | None = None) -> None:
        self.folder = folder
        self.fsync = fsync
        self.durability = durability  # given: flushed with the next batch (before the reply), not inline
        folder.mkdir(parents=True, exist_ok=True)
        self._cache: dict[str, Task] = {}
        self._loaded = False
        # Called with the task's session before every save; raises to refuse it (a fleet worker that
        # lost the session's partition, agent/fleet). None: every save goes through.
        self.guard: Callable[[str], None] | None = None

    def path(self, task_id: str) -> Path:
        return self.folder / f"{task_id}.json"

    def save(self, task: Task) -> None:
        """Atomic: temp file, rename — never half a file; fsynced (file, then folder) inline, or with
        the next group flush when there is a Durability barrier."""
        if self.guard is not None:
            self.guard(task.session_key)
        task.updated_at = time.time()
        data = json.dumps(task.to_dict(), ensure_ascii=False, indent=2).encode()
        path = self.path(task.id)
        if self.durability is not None and self.fsync:
            atomic_write_bytes(path, data, fsync=False)
            self.durability.mark(path)
            self.durability.mark(self.folder)
        else:
            atomic_write_bytes(path, data, fsync=self.fsync)
        self._cache[task.id] = task

    def reload(self) -> None:
        """Read the files again at the next look (a fleet worker that took over sessions whose
        tasks another worker changed)."""
        self._cache.clear()
        self._loaded = False

    def _load_all(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        for path in sorted(self.folder.glob("t_*.json")):
            task_id = path.stem
            if task_id in self._cache:
                continue
            try:
                self._cache[task_id] = self._read(path)
            except CorruptTask as exc:
                aside = path.with_suffix(f".corrupt-{int(time.time())}")
                path.rename(aside)
                log.error("task file %s is corrupt (%s); moved aside to %s, other tasks unaffected", path, exc, aside.name)

    @staticmethod
    def _read(path: Path) -> Task:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(data, dict) or data.get("version") != SCHEMA_VERSION:
                raise CorruptTask(f"unexpected schema version {data.get('version') if isinstance(data, dict) else '?'}")
            return Task.from_dict(data)
        except (json.JSONDecodeError, UnicodeDecodeError, TypeError, ValueError) as exc:
            raise CorruptTask(str(exc).splitlines()[0][:200]) from None

    def get(self, task_id: str) -> Task | None:
        self._load_all()
        return self._cache.get(task_id)

    def all(self) -> list[Task]:
        self._load_all()
        return sorted(self._cache.values(), key=lambda t: t.created_at)

    def active(self, session_key: str | None = None) -> list[Task]:
        # Filtered before sorting (the same order: the sort is stable): asked several times per message,
        # where the tasks of every session ever run would otherwise be sorted each time.
        self._load_all()
        return sorted((t for t in self._cache.values()
                       if t.status in ACTIVE and (session_key is None or t.session_key == session_key)),
                      key=lambda t: t.created_at)

    def current(self, session_key: str, person: str | None | Anyone = ANYONE) -> Task | None:
        """The session's task being worked on: the most recently updated active one (of `person`)."""
        active = [t for t in self.active(session_key) if person is ANYONE or t.belongs_to(person)]
        return max(active, key=lambda t: t.updated_at) if active else None

    def current_for(self, session: Session, person: str | None) -> Task | None:
        """The current task a run of `person` sees: in a conversation several people share (or about to be:
        `person` is new to it), only their own (context/shared_view.py); alone, the session's."""
        return self.current(session.key, ANYONE if sees_all(session, person) else person)

    def __iter__(self) -> Iterator[Task]:
        return iter(self.all())
