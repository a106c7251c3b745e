"""Checkpoints: created from the session log as it grows; list, show, restore, fork, undo.

Checkpoints are a projection of the session log (agent/session.py) plus a snapshot of what
the log does not hold: a session observer sees every record and takes a checkpoint before
each user turn, at each task step boundary (the tool results after a step was completed),
after every `every_turns`-th model turn that ran tools (so drift control always has a point
before a drift began), and every `every_events` records at a clean point. Restoring = the log's prefix up to the
checkpoint (projected again, no model call, no tool run) + the snapshot (task, workspace).
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal, Sequence

from clawgate.config.agents import agent_id_of, workspace_of
from clawgate.config.schema import CheckpointSettings

from ..core.durability import Durability
from ..core.errors import Conflict, DomainError, Forbidden, NotFound
from ..core.events import EventHub
from ..core.fsio import atomic_write_bytes
from ..session import Record, Session, SessionManager, session_file_name
from ..tasks.store import Task, TaskStore
from . import branches
from .effects import EFFECT_TOOLS, Effects
from .model import Checkpoint, CheckpointRefused
from .replay import FILE_TOOLS, TASK_TOOLS, Tapes
from .store import CheckpointStore
from .workspace_store import StoreError, WorkspaceStore

log = logging.getLogger(__name__)
PRUNE_EVERY = 50  # checkpoints of a session between two prunes of it

Mode = Literal["conversation", "files", "both"]
MODES: tuple[str, ...] = ("conversation", "files", "both")
# Effects a restore cannot take back: they left the daemon (or ran outside the workspace).
MAX_CHANGED_LISTED = 100  # paths kept per checkpoint (the count is always exact)
IRREVERSIBLE = {"message": "message sent", "exec": "command run", "web_fetch": "web request", "cron": "cron change",
                "browser": "browser action"}


@dataclass
class _Track:
    """What the observer remembers per session between records."""

    head: str | None
    turns: int
    since: int = 0
    run_turns: int = 0  # model turns that ran tools since the last user turn
    created: int = 0  # checkpoints taken since this session was last pruned
    intents: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    step: tuple[str | None, int | None] | None = None  # a step was completed in the running tool batch
    tree: tuple[str, dict[str, list[object]]] | None = None  # the previous checkpoint's workspace tree (id, files)
    user: str = ""  # whose workspace the session's runs work in ("" the owner's; workspace/users.py)


class CheckpointService:
    def __init__(self, *, folder: Path, workspace: Path, sessions: SessionManager, tasks: TaskStore, events: EventHub,
                 settings: CheckpointSettings, version: str, busy: Callable[[str], bool],
                 invalidate: Callable[[str], None], fsync: bool = True, durability: Durability | None = None,
                 repair: bool = True, roots: Callable[[str], Path] | None = None) -> None:
        """`roots(where)`: the workspace root of a person ("" the owner: `workspace`), of another agent
        than the default with `agent:<id>:` in front (`workspace_of`); a session's checkpoints snapshot
        and restore the workspace of the person its runs act for in its agent's, never another's."""
        self.settings = settings
        self.version = version
        self.sessions = sessions
        self.tasks = tasks
        self.events = events
        self.busy = busy
        self.invalidate = invalidate
        self.fsync = fsync
        # `repair`: a corrupt database is set aside and a fresh one started (the daemon); offline
        # commands pass False and report it instead (agent/core/statedb.py).
        self.store = CheckpointStore(folder, fsync=fsync, durability=durability, repair=repair)
        # Blobs and trees are not fsynced one by one (that would cost more than the 20 ms goal per step);
        # after a power loss a checkpoint may name a lost blob, and is then refused in one line.
        self.workspace = WorkspaceStore(workspace, folder, fsync=False)
        self.folder = folder
        self.roots = roots or (lambda user: workspace)
        self._stores: dict[str, WorkspaceStore] = {"": self.workspace}
        self.effects = Effects(folder / "effects", self.files_of)  # what each command changed, for replay
        self.tapes = Tapes(folder / "tapes", events.emit, effects=self.effects)
        # Extra snapshot state by name (e.g. drift counters): each returns JSON-able data for a session.
        self.snapshot_sources: dict[str, Callable[[str], Any]] = {}
        self._tracks: dict[str, _Track] = {}
        self._branch_points: dict[str, set[str]] = {}  # session -> checkpoints its live log branched from
        # a fleet's processes share the store: blobs and trees younger than this survive a collection
        self.collect_grace_seconds = 0.0

    # creation (a session observer) ---------------------------------------------------------
    def on_append(self, session: Session, record: Record) -> None:
        if not self.settings.enabled:
            return
        if record.get("seq") == 1:  # a fresh log (a new session, or after a reset): a new lineage
            self._tracks[session.key] = _Track(head=None, turns=0)
        track = self._track(session, record)
        kind = record.get("kind")
        track.since += 1
        if kind == "user":
            if isinstance(record.get("user"), str):  # the loop names the person; other user records keep it
                track.user = str(record["user"])
            track.turns += 1
            track.run_turns = 0
            before = session.records[-2] if len(session.records) > 1 else None
            self.create(session, "turn", seq=int(record["seq"]) - 1, anchor_ts=before["ts"] if before else None,
                        description=f"before message: {_clip(record.get('text') or '', 60)}", turn=track.turns - 1)
        elif kind == "tool_intent":
            track.intents[str(record.get("id"))] = (str(record.get("name")), dict(record.get("input") or {}))
            if record.get("name") in EFFECT_TOOLS:
                self.effects.started(str(record.get("id")), workspace_of(session.key, track.user))
        elif kind == "tool_done":
            name, args = track.intents.pop(str(record.get("id")), ("", {}))
            if name in EFFECT_TOOLS:
                self.effects.finished(session.key, str(record.get("id")))
            if name == "task" and args.get("action") == "complete" and not record.get("is_error"):
                track.step = (args.get("task_id"), args.get("step"))
        elif kind == "tool_results":
            track.run_turns += 1
            every = self.settings.every_turns
            if track.step is not None:
                task_id, step = track.step
                track.step = None
                self.create(session, "step", seq=int(record["seq"]), anchor_ts=record["ts"], task_id=task_id, step=step)
            elif every and track.run_turns % every == 0:  # drift control goes back to the last one before a drift
                self.create(session, "auto", seq=int(record["seq"]), anchor_ts=record["ts"],
                            description=f"after model turn {track.run_turns}")
            elif track.since >= self.settings.every_events:
                self.create(session, "auto", seq=int(record["seq"]), anchor_ts=record["ts"],
                            description=f"every {self.settings.every_events} events")
        elif track.since >= self.settings.every_events and kind == "assistant" and \
                not any(b.get("type") == "tool_use" for b in record.get("content") or []):
            self.create(session, "auto", seq=int(record["seq"]), anchor_ts=record["ts"],
                        description=f"every {self.settings.every_events} events")

    def forget_track(self, key: str) -> None:
        """The session left memory (idle): its track is rebuilt from its log if it is read again."""
        self._tracks.pop(key, None)

    def _track(self, session: Session, record: Record) -> _Track:
        track = self._tracks.get(session.key)
        if track is None:
            earlier = session.records[:-1] if session.records and session.records[-1] is record else session.records
            track = _Track(head=self.store.head(session.key), turns=sum(1 for r in earlier if r.get("kind") == "user"),
                           user=_user_of(session.records))
            self._tracks[session.key] = track
        return track

    def create(self, session: Session, kind: str, *, seq: int, anchor_ts: float | None, description: str = "",
               turn: int | None = None, task_id: str | None = None, step: int | None = None) -> Checkpoint:
        """Snapshot the session's state at `seq` (the caller guarantees nothing changed since)."""
        track = self._tracks.get(session.key) or self._track(session, {})
        task = (self.tasks.get(task_id) if task_id else None) or self._task_of(session.key)
        verified = False
        if kind == "step" and task is not None and step and 0 < step <= len(task.steps):
            done = task.steps[step - 1]
            verified = done.status == "done" and bool(done.verification.strip())
            description = description or f"step {step}/{len(task.steps)} done: {_clip(done.text, 60)}"
        files = self.files_of(workspace_of(session.key, track.user))
        tree = files.snapshot()
        changed = self._changed_files(track, tree, files)
        snapshot: dict[str, Any] = {
            "task": task.to_dict() if task else None,
            "drift": {"task_turns": task.turns if task else 0, "task_resumes": task.resume_attempts if task else 0},
            "seeds": {},  # nothing random decides a run; ids are fresh per branch on purpose
            "workspace": tree,
            "user": track.user,
            "messages": session.message_count,
            "changed": changed[:MAX_CHANGED_LISTED] if changed is not None else None,
            "changedCount": len(changed) if changed is not None else None,
        }
        for name, source in self.snapshot_sources.items():
            try:
                snapshot[name] = source(session.key)
            except Exception:
                log.exception("checkpoint snapshot source %s failed", name)
        cp = Checkpoint(session=session.key, seq=seq, anchor_ts=anchor_ts, kind=kind, description=description or kind,
                        time=time.time(), turn=track.turns if turn is None else turn, version=self.version,
                        parent=track.head, task=task.id if task else None, step=step if kind == "step" else None,
                        verified=verified, snapshot=snapshot)
        self.store.save(cp)
        track.head, track.since = cp.id, 0
        self.events.emit("checkpoint", session=session.key, id=cp.id, kind=kind, seq=seq, step=cp.step)
        track.created += 1
        if track.created >= PRUNE_EVERY:  # only this session grew: prune it alone (the full prune runs at start)
            track.created = 0
            self.prune(session.key)
        return cp

    def files_of(self, user: str) -> WorkspaceStore:
        """The snapshot store of `user`'s workspace (`workspace_of`; one content store shared by all)."""
        files = self._stores.get(user)
        if files is None:
            files = self._stores[user] = WorkspaceStore(self.roots(user), self.folder, fsync=False)
        return files

    def _files(self, cp: Checkpoint) -> WorkspaceStore:
        """The workspace a checkpoint snapshotted (checkpoints from before per-person workspaces: the owner's)."""
        return self.files_of(workspace_of(cp.session, str(cp.snapshot.get("user") or "")))

    def _changed_files(self, track: _Track, tree: str, files: WorkspaceStore) -> list[str] | None:
        """Workspace paths that differ from the branch's previous checkpoint (None: there is none, or
        its tree cannot be read). The previous tree is kept per session, so this costs no I/O per step."""
        now = files.tree(tree)  # the snapshot just taken: in memory
        before = track.tree
        if before is None and track.head:
            try:
                parent = self.store.get(track.head)
                sha = str(parent.snapshot.get("workspace") or "") if parent else ""
                before = (sha, files.tree(sha)) if sha else None
            except (CheckpointRefused, StoreError):
                before = None
        track.tree = (tree, now)
        if before is None:
            return None
        if before[0] == tree:
            return []
        return sorted(p for p in set(now) | set(before[1]) if now.get(p) != before[1].get(p))

    def _task_of(self, key: str) -> Task | None:
        current = self.tasks.current(key)
        if current is not None:
            return current
        mine = [t for t in self.tasks.all() if t.session_key == key]
        return max(mine, key=lambda t: t.updated_at) if mine else None

    # reading -------------------------------------------------------------------------------
    def get(self, cp_id: str) -> Checkpoint:
        cp = self.store.get(cp_id)  # CheckpointRefused (a Conflict) when corrupt or newer
        if cp is None:
            raise NotFound(f"no checkpoint {cp_id!r}; `clawgate checkpoints list` shows the ids")
        return cp

    def list(self, *, session: str | None = None, task: str | None = None, limit: int = 200) -> dict[str, Any]:
        found, problems = [], []
        for item in self.store.scan(session):
            if isinstance(item, CheckpointRefused):
                problems.append(item.message)
            elif task is None or item.task == task:
                found.append(item)
        found.sort(key=lambda c: (c.time, c.seq), reverse=True)
        # with a session: its HEAD, so a client can tell the live branch from abandoned ones (follow `parent`)
        head = self.store.head(session) if session else None
        return {"checkpoints": [c.summary() for c in found[:limit]], "problems": problems, "head": head}

    def show(self, cp_id: str) -> dict[str, Any]:
        """What the agent knew and did at that point, and what a restore would change."""
        cp = self.get(cp_id)
        located = branches.locate(self.sessions.folder, cp.session, cp.seq, cp.anchor_ts)
        history: list[dict[str, Any]] = []
        if located is not None:
            _, raw, length = located
            session = Session(cp.session, self.sessions.folder / ".past", fsync=False, load=False)
            for record in branches.records(raw[:length]):
                session.records.append(record)
            history = session.history(limit=20)
        try:
            files = self._files(cp).diff(str(cp.snapshot.get("workspace"))).to_dict()
            file_count = len(self._files(cp).tree(str(cp.snapshot.get("workspace"))))
        except StoreError as exc:
            files, file_count = {"error": str(exc)}, 0  # type: ignore[dict-item]
        return {"checkpoint": cp.summary(), "task": cp.snapshot.get("task"), "drift": cp.snapshot.get("drift"),
                "changedFiles": cp.snapshot.get("changed"),
                "history": history, "logFound": located is not None, "workspaceFiles": file_count,
                "restoreWouldChange": files, "irreversible": self.irreversible_after(cp)}

    def irreversible_after(self, cp: Checkpoint) -> list[dict[str, Any]]:
        """Effects on the session's live branch after the point that a restore cannot take back."""
        if not self.sessions.exists(cp.session):
            return []
        session = self.sessions.get(cp.session)
        intents: dict[str, Record] = {}
        out: list[dict[str, Any]] = []
        for record in session.records:
            if int(record.get("seq", 0)) <= cp.seq:
                continue
            if record["kind"] == "tool_intent":
                intents[str(record.get("id"))] = record
            elif record["kind"] == "tool_done" and not record.get("is_error"):
                intent = intents.get(str(record.get("id")))
                if intent and intent.get("name") in IRREVERSIBLE:
                    args = intent.get("input") or {}
                    out.append({"tool": intent["name"], "what": IRREVERSIBLE[str(intent["name"])],
                                "summary": _clip(", ".join(f"{k}={v}" for k, v in args.items()), 120),
                                "time": record.get("ts")})
        return out

    # restore and fork ----------------------------------------------------------------------
    def restore(self, cp_id: str, mode: str = "both", *, confirm: bool = False) -> dict[str, Any]:
        """Go back to a checkpoint. With irreversible effects after it and no `confirm`, nothing
        changes and they are returned for the user to see first."""
        if mode not in MODES:
            raise DomainError(f"unknown restore mode {mode!r}; use conversation, files or both")
        cp = self.get(cp_id)
        if self.busy(cp.session):
            raise Conflict(f"session {cp.session!r} is busy; wait for the answer or stop it first")
        return self._restore(cp, mode, confirm=confirm, only=set(self.own_changes_after(cp)))

    def _restore(self, cp: Checkpoint, mode: str, *, confirm: bool, only: set[str] | None = None) -> dict[str, Any]:
        """`only`: the workspace paths to put back (None: the whole workspace of the checkpoint's person)."""
        effects = self.irreversible_after(cp)
        result: dict[str, Any] = {"checkpoint": cp.summary(), "mode": mode, "irreversible": effects}
        if effects and not confirm:
            return {**result, "restored": False}
        tree = str(cp.snapshot.get("workspace") or "")
        if mode in ("files", "both"):
            try:
                self._files(cp).tree(tree)  # the snapshot is readable before anything changes
            except StoreError as exc:
                raise Conflict(f"{exc}; restore with mode=conversation instead") from None
        if mode in ("conversation", "both"):
            result["abandoned"] = self._rewind_log(cp, rerun=TASK_TOOLS | (FILE_TOOLS if mode == "both" else set()),
                                                   effects=len(effects))
            self._rewind_tasks(cp)
            self.store.set_head(cp.session, cp.id)
            self._tracks.pop(cp.session, None)
        if mode in ("files", "both"):
            try:
                result["files"] = self._files(cp).restore(tree, only=only).to_dict()
            except StoreError as exc:
                raise Conflict(f"{exc}; restore with mode=conversation instead") from None
        self.events.emit("checkpoint_restored", session=cp.session, id=cp.id, mode=mode, irreversible=len(effects))
        log.info("session %s restored to checkpoint %s (%s)", cp.session, cp.id, mode)
        return {**result, "restored": True}

    def _prefix(self, cp: Checkpoint) -> tuple[bytes, list[Record]]:
        located = branches.locate(self.sessions.folder, cp.session, cp.seq, cp.anchor_ts)
        if located is None:
            raise Conflict(f"the session log of checkpoint {cp.id} is gone (reset and pruned?); it cannot be restored")
        _, raw, length = located
        return raw[:length], branches.records(raw[length:])

    def _rewind_log(self, cp: Checkpoint, *, rerun: set[str] | frozenset[str], effects: int, tape: bool = True,
                    how: str = "restore", fields: dict[str, Any] | None = None,
                    after: Sequence[dict[str, Any]] = ()) -> str | None:
        """The live log becomes the prefix; the later history is kept beside it as an abandoned branch.
        `after` records follow the branch event in the same write. The live name never goes missing:
        the old history gets its second name (a hard link) before the new log replaces the live one,
        so a crash leaves the old log or the new one, and a repeated rewind reuses that second name."""
        prefix, future = self._prefix(cp)
        tape_id = None
        if tape:
            tape_id = "tp_" + uuid.uuid4().hex[:12]
            self.tapes.write(tape_id, future)
        live = self.sessions.folder / session_file_name(cp.session)
        self.sessions.forget(cp.session)
        self.tapes.forget(cp.session)
        aside = None
        if live.exists():
            aside = next((p for p in branches.log_files(self.sessions.folder, cp.session)[1:] if p.samefile(live)), None)
            if aside is None:
                aside = branches.aside_name(live)
                try:
                    os.link(live, aside)
                except OSError:  # a file system without hard links: a rename (a crash here loses the live name)
                    live.rename(aside)
        lines = [branches.record_line(cp.seq + 1, "event", name="branch", how=how, checkpoint=cp.id, tape=tape_id,
                                      rerun=sorted(rerun), abandoned=aside.name if aside else None,
                                      irreversible=effects, **(fields or {}))]
        lines += [branches.record_line(cp.seq + 2 + i, str(r["kind"]), **{k: v for k, v in r.items() if k != "kind"})
                  for i, r in enumerate(after)]
        self._write_log(cp.session, prefix + b"".join(lines))
        self.invalidate(cp.session)
        return aside.name if aside else None

    def _write_log(self, key: str, data: bytes) -> None:
        """Replace a session's live log (a rewind, a fork): the only writes of branch records, so the
        branch points kept for retention are dropped here and read again from the new log."""
        atomic_write_bytes(self.sessions.folder / session_file_name(key), data, fsync=self.fsync)
        self._branch_points.pop(key, None)

    def _rewind_tasks(self, cp: Checkpoint) -> None:
        """The task's plan goes back with the conversation; tasks begun after the point are abandoned.
        Each changed task is announced (`task` event), as any plan change is."""
        changed: list[Task] = []
        saved = cp.snapshot.get("task")
        if saved:
            changed.append(Task.from_dict(saved))
            self.tasks.save(changed[-1])
        for task in self.tasks.active(cp.session):
            if (not saved or task.id != saved["id"]) and task.created_at > cp.time:
                task.status, task.result = "cancelled", f"abandoned: the conversation went back to checkpoint {cp.id}"
                self.tasks.save(task)
                changed.append(task)
        for task in changed:
            self.events.emit("task", session=task.session_key, id=task.id, status=task.status,
                             line=task.status_line(), action="restored")

    def fork(self, cp_id: str, session: str | None = None) -> dict[str, Any]:
        """A new session branched from the checkpoint; the original is not touched."""
        cp = self.get(cp_id)
        key = session or f"{cp.session}~{uuid.uuid4().hex[:6]}"
        if agent_id_of(key) != agent_id_of(cp.session):  # its files and memory are its agent's: no crossing
            raise Forbidden(f"checkpoint {cp.id} belongs to another agent's session; fork it into a session of that agent")
        if self.sessions.exists(key):
            raise Conflict(f"session {key!r} already exists; choose another name for the fork")
        prefix, future = self._prefix(cp)
        tape = "tp_" + uuid.uuid4().hex[:12]
        self.tapes.write(tape, future)
        event = branches.record_line(cp.seq + 1, "event", name="branch", how="fork", checkpoint=cp.id, tape=tape,
                                     rerun=sorted(TASK_TOOLS), parent_session=cp.session)
        self._write_log(key, prefix + event)
        saved = cp.snapshot.get("task")
        task_id = None
        if saved and saved.get("status") in ("pending", "in_progress"):
            task = Task.from_dict({**saved, "id": "t_" + uuid.uuid4().hex[:10], "session_key": key,
                                   "created_at": time.time()})
            self.tasks.save(task)
            task_id = task.id
        self.store.set_head(key, cp.id)
        self.events.emit("checkpoint_forked", session=key, id=cp.id, parent_session=cp.session)
        return {"session": key, "parent": cp.id, "parentSession": cp.session, "task": task_id,
                "checkpoint": cp.summary()}

    # going back by steps -------------------------------------------------------------------
    def step_targets(self, key: str) -> list[Checkpoint]:
        """Where "back N steps" lands, N = 1, 2, …: the live branch's step boundaries of the current
        task, newest first, then the last checkpoint before its first step."""
        lineage = self.store.lineage(key)
        task = self._task_of(key)
        if task is None:
            return []
        steps = [c for c in lineage if c.kind == "step" and c.task == task.id]
        if not steps:
            return []
        before = next((c for c in lineage if c.seq < steps[-1].seq and c.kind != "step"), None)
        return steps[1:] + ([before] if before else [])

    def undo(self, key: str, steps: int = 1, *, confirm: bool = False, user: str | None = None,
             conversation: bool = True) -> dict[str, Any]:
        """Back `steps` step boundaries: the conversation, and of the files only those this session's own
        file tools and recorded commands changed since (never what another session — or another
        person — wrote meanwhile).
        `user`: who asks (None: the owner, on the machine); a point in another person's workspace is refused.
        `conversation=False`: the files only (a guest in a shared conversation, which only the owner rewinds)."""
        if steps < 1:
            raise DomainError("give a number of steps of 1 or more, e.g. /undo 2")
        targets = self.step_targets(key)
        if not targets:
            raise NotFound("there is no completed task step to go back from in this chat")
        if steps > len(targets):
            raise DomainError(f"only {len(targets)} step(s) can be undone in the current task")
        if self.busy(key):
            raise Conflict("I'm still working; send /stop first (or wait), then /undo")
        target = targets[steps - 1]
        if user is not None and str(target.snapshot.get("user") or "") != user:
            raise Forbidden("that point is in another person's workspace; only they can undo it")
        return self._restore(target, "both" if conversation else "files", confirm=confirm,
                             only=set(self.own_changes_after(target)))

    # for drift control (agent/supervision/drift_restore.py) ----------------------------------------------
    def last_good(self, session_key: str, task_id: str) -> Checkpoint | None:
        """The newest checkpoint of the session's live branch at a verified step boundary of the task,
        whose log prefix and workspace tree can still be read; None: there is none."""
        for cp in self.store.lineage(session_key):
            if cp.session != session_key or cp.kind != "step" or not cp.verified or cp.task != task_id:
                continue
            try:
                self._files(cp).tree(str(cp.snapshot.get("workspace") or ""))
                self._prefix(cp)
            except (StoreError, DomainError):
                continue
            return cp
        return None

    def before_drift(self, session_key: str, *, before: int, floor: int, task_id: str | None) -> Checkpoint | None:
        """The newest readable checkpoint of the session's live branch taken before seq `before` (where a
        drift began) and not before seq `floor` (the run's start); with `task_id`, one holding that task."""
        for cp in self.store.lineage(session_key):
            if cp.seq < floor:
                return None
            if cp.session != session_key or cp.seq >= before or (task_id is not None and cp.task != task_id):
                continue
            try:
                self.workspace.tree(str(cp.snapshot.get("workspace") or ""))
                self._prefix(cp)
            except (StoreError, DomainError):
                continue
            return cp
        return None

    def written_after(self, cp: Checkpoint) -> list[str]:
        """Workspace paths the session's own file tools wrote after the point: what a drift restore puts
        back (and what /undo puts back). Other sessions share the workspace; their files are left alone."""
        root = os.path.realpath(self._files(cp).root)
        paths: list[str] = []
        for record in self.sessions.get(cp.session).records:
            if int(record.get("seq", 0)) > cp.seq and record.get("kind") == "tool_intent" \
                    and record.get("name") in ("write_file", "edit_file"):
                path = str((record.get("input") or {}).get("path") or "")
                real = os.path.realpath(os.path.join(root, path)) if path else ""
                if real.startswith(root + os.sep) and (rel := real[len(root) + 1:]) not in paths:
                    paths.append(rel)
        return paths

    def own_changes_after(self, cp: Checkpoint) -> list[str]:
        """What the session itself changed after the point: its file tools' paths and the paths its
        commands changed as recorded (effects.py). A restore or /undo puts back these and nothing
        else, so another session's work in the same workspace is never undone by it."""
        paths = self.written_after(cp)
        for record in self.sessions.get(cp.session).records:
            if int(record.get("seq", 0)) > cp.seq and record.get("kind") == "tool_intent" \
                    and record.get("name") in EFFECT_TOOLS:
                effect = self.effects.get(str(record.get("id")))
                paths += [str(p) for p in (effect or {}).get("paths", []) if str(p) not in paths]
        return paths

    def drift_changes(self, cp: Checkpoint, paths: list[str]) -> dict[str, list[str]]:
        """What putting `paths` back to the point would write and remove (nothing changes)."""
        return self._files(cp).diff(str(cp.snapshot.get("workspace") or ""), only=set(paths)).to_dict()

    def rewind_for_drift(self, cp_id: str, *, paths: list[str], fields: dict[str, Any],
                         after: Sequence[dict[str, Any]]) -> dict[str, Any]:
        """Go back to `cp_id` for drift control, from the session's own lane, in an order a crash can
        repeat: the session's files (`paths`), the task, HEAD, then the log — the commit point. Each step
        leaves the same state when run twice; once the log is replaced, the caller's decision (written
        after the point) is no longer in the live log. No tape: the recorded future is the drift."""
        cp = self.get(cp_id)
        effects = len(self.irreversible_after(cp))
        try:
            files = self._files(cp).restore(str(cp.snapshot.get("workspace") or ""), only=set(paths)).to_dict()
        except StoreError as exc:
            raise Conflict(f"{exc}; the checkpoint's files cannot be put back") from None
        self._rewind_tasks(cp)
        self.store.set_head(cp.session, cp.id)
        abandoned = self._rewind_log(cp, rerun=set(), effects=effects, tape=False, how="drift", fields=fields,
                                     after=after)
        self._tracks.pop(cp.session, None)
        self.events.emit("checkpoint_restored", session=cp.session, id=cp.id, mode="both", irreversible=effects,
                         by="drift")
        log.info("session %s went back to checkpoint %s (drift control)", cp.session, cp.id)
        return {"checkpoint": cp.summary(), "files": files, "abandoned": abandoned}

    # retention -----------------------------------------------------------------------------
    def needed(self) -> set[str]:
        """What live branches stand on: each live session's HEAD and the checkpoints it branched from.

        A session's branch points are read from its log once and then kept: branch records are
        written only by `_write_log` (a rewind or a fork), which drops the session's entry so it is
        read again, never appended. A log that lost one since (a reset) can only make this keep
        more than needed. Reading every session's log at every prune made each prune cost the
        whole history of every session (seconds with a hundred long sessions)."""
        live = self.sessions.keys()
        heads = self.store.heads()
        keep = {heads[key] for key in live if key in heads}
        for key in live:
            points = self._branch_points.get(key)
            if points is None:
                points = self._branch_points[key] = self._read_branch_points(key)
            keep |= points
        return keep

    def _read_branch_points(self, key: str) -> set[str]:
        points: set[str] = set()
        try:
            fh = open(self.sessions.folder / session_file_name(key), "rb")
        except FileNotFoundError:
            return points  # a session known only in memory so far has not branched
        with fh:
            for line in fh:
                if b'"name":"branch"' in line:
                    event = branches.records(line)
                    if event and event[0].get("checkpoint"):
                        points.add(str(event[0]["checkpoint"]))
        return points

    def prune(self, session: str | None = None) -> list[str]:
        """Retention for one session, or for all of them plus unreferenced workspace blobs (which
        needs every checkpoint read, so it is left to the prune at start)."""
        removed = self.store.prune(keep_count=self.settings.keep_count, keep_days=self.settings.keep_days,
                                   needed=self.needed(), session=session)
        if session is None:
            self.effects.prune(self.settings.keep_days)
        if removed and session is None:
            trees = {str(c.snapshot.get("workspace")) for c in self.store.all()} | self.effects.trees()
            # one content store for every person's workspace: each one's latest tree is a base to keep
            trees |= {tree for files in self._stores.values() if (tree := files.latest)}
            self.workspace.collect(trees, min_age_seconds=self.collect_grace_seconds)
            log.info("pruned %d old checkpoint(s)", len(removed))
        return removed


def _user_of(records: Sequence[Record]) -> str:
    """The person the session's runs last worked for, as the loop recorded it ("" the owner)."""
    for record in reversed(records):
        if record.get("kind") == "user" and isinstance(record.get("user"), str):
            return str(record["user"])
    return ""


def _clip(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"
