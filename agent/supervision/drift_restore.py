"""Drift control's rung (b): go back to the last good checkpoint, then continue from there.

Drift control decides inside the running loop (an after-turn hook), where the session's log
cannot be swapped. So the rung happens in three steps, each safe to repeat after a crash:

1. decide (`decide`, in the after-turn hook): choose the newest verified step checkpoint of the
   current task, else the newest checkpoint before the drift began (within the run without a
   task, holding the task with one: turn checkpoints make sure there is one); write a pending
   marker (`state/checkpoints/drift/`, an index so a restart finds it), then the decision into the session log: the run's final answer, a short report, carrying
   the plan (`drift_restore`). The run ends with that report.
2. restore (`settle`, an after-run hook in the session's lane): put back the files this session
   wrote since the point, the task, then replace the log — the commit point. The decision was
   written after the point, so once the log is replaced it is gone from the live log and cannot
   be carried out twice; until then, doing it again leaves the same state. The new log's branch
   event holds the plan, followed by the ladder's records (so the next drift goes on to a reset).
3. continue: a message on the bus with a fixed id (publishing it again is a no-op), the original
   message's owner/guest flag and delivery target, telling the model what was undone and why.

`recover` (on start, before any message runs) settles every pending marker whose run was
answered; one whose run is still unanswered is replayed (the recorded report is its answer) and
its after-run hook settles it.
"""

from __future__ import annotations

import json
import logging
import uuid
from pathlib import Path
from typing import Any, Callable
from urllib.parse import quote

from ..bus import InboundMessage, MessageBus
from ..checkpoints import CheckpointService
from .drift import Signal
from .drift_control import CONTINUATION_CHANNEL, RestoreDecision
from ..core.errors import DomainError
from ..core.events import EventHub
from ..core.fsio import atomic_write_bytes
from ..loop import acts_for_owner
from .run_view import run_user_text
from ..session import Record, Session, SessionManager
from ..tasks.store import Task

log = logging.getLogger(__name__)
CHANNEL = CONTINUATION_CHANNEL


class DriftRestore:
    def __init__(self, checkpoints: CheckpointService, sessions: SessionManager, bus: MessageBus, events: EventHub,
                 folder: Path, *, fsync: bool = True) -> None:
        self.checkpoints = checkpoints
        self.sessions = sessions
        self.bus = bus
        self.events = events
        self.folder = folder
        self.fsync = fsync
        self._pending: dict[str, dict[str, Any]] = {}
        self._read_markers(lambda key: True)

    def _read_markers(self, include: Callable[[str], bool]) -> None:
        """The markers on disk of the sessions `include` names (another process may have written them)."""
        for path in sorted(self.folder.glob("*.json")) if self.folder.exists() else []:
            try:
                marker = json.loads(path.read_text())
                key = str(marker["session"])
            except FileNotFoundError:
                continue  # settled meanwhile by the process holding that session
            except (OSError, ValueError, KeyError, TypeError):
                log.warning("unreadable drift restore marker %s removed", path)
                path.unlink(missing_ok=True)
                continue
            if include(key):
                self._pending[key] = marker

    # 1. decide (inside the run) ------------------------------------------------------------
    def decide(self, session: Session, msg: InboundMessage, task: Task | None, *, signal: Signal, turn: int,
               avoid: list[str]) -> RestoreDecision | None:
        """The point: the task's last verified step; else (no task, or no step verified yet) the newest
        checkpoint before the drift began — the end of the last model turn without a signal — within
        the run (without a task) or holding the task. None: there is none."""
        cp = self.checkpoints.last_good(session.key, task.id) if task is not None else None
        verified = cp is not None
        if cp is None:
            began = _drift_began(session, msg, task)
            floor = session.inbound_seqs.get(msg.id, 0) - 1 if task is None else 0  # the point before the message
            cp = self.checkpoints.before_drift(session.key, before=began, floor=floor,
                                               task_id=task.id if task else None) if began is not None else None
        if cp is None:
            return None
        paths = self.checkpoints.written_after(cp)
        reflection = next((r for r in reversed(session.records) if r.get("name") == "drift_reflection"
                           and r.get("assessment")), None)
        plan: dict[str, Any] = {
            "checkpoint": cp.id, "step": cp.step if verified else None, "steps": len(task.steps) if task else 0,
            "description": cp.description, "task": task is not None,
            "request": "" if task else run_user_text(session, msg.id),
            "signal": signal.name, "why": f"{signal.name}: {signal.detail}", "turn": turn, "avoid": avoid,
            "reflection": f"{reflection['assessment']} Next: {reflection.get('next_action', '')}" if reflection else "",
            "paths": paths, "files": self.checkpoints.drift_changes(cp, paths),
            "irreversible": [f"{e['what']}: {e['summary']}" for e in self.checkpoints.irreversible_after(cp)][:10],
            "continuation": "drift:" + uuid.uuid4().hex[:16], "run": msg.id, "metadata": continuation_metadata(msg),
        }
        files = len(plan["files"]["written"]) + len(plan["files"]["removed"])
        report = (f"I was going in circles ({plan['why']}). I'm going back to {_point(plan)} and continuing from there "
                  "with a different approach."
                  + (f" The {files} file(s) I changed since then will be put back as they were." if files else ""))
        self._mark(session.key, plan)
        session.append("assistant", durable=True, run_id=msg.id, drift_restore=plan,
                       content=[{"type": "text", "text": report}])
        return RestoreDecision(checkpoint=cp.id, report=report)

    # 2 and 3. restore and continue (after the run, in the lane; or on start) ---------------
    async def after_run(self, session: Session, msg: InboundMessage) -> None:
        if session.key in self._pending:
            self.settle(session.key)

    def recover(self, include: Callable[[str], bool] | None = None) -> list[str]:
        """On start, before any message runs: settle what a crash left pending; returns the sessions.
        `include`: only these sessions, their markers read again from disk (a fleet's worker: those of
        a partition it just took, which another process may have marked)."""
        if include is not None:
            self._read_markers(include)
        settled = []
        for key, marker in list(self._pending.items()):
            if include is not None and not include(key):
                continue
            if self.bus.is_unanswered(str(marker.get("run"))):
                continue  # the run replays with its recorded report; its after-run hook settles this
            self.settle(key)
            settled.append(key)
        return settled

    def settle(self, key: str) -> str:
        """Carry out what the session's pending decision still needs; returns what was found:
        decided (now restored or failed), restored, failed, continued or none."""
        marker = self._pending.get(key)
        if marker is None:
            return "none"
        session = self.sessions.get(key)
        found, plan, error = _find(session, str(marker["continuation"]))
        if found == "decided" and plan is not None:
            try:
                self._restore(session, plan)
                found = "restored"
            except (DomainError, OSError) as exc:
                error = str(exc)
                log.error("drift restore of %s to %s failed: %s", key, plan["checkpoint"], error)
                self.sessions.get(key).append("event", durable=True, name="drift_restore_failed", plan=plan,
                                              continuation=plan["continuation"], error=error)
                found = "failed"
            self.events.emit("drift", session=key, run_id=plan["run"], action="restore", turn=plan["turn"],
                             checkpoint=plan["checkpoint"], restored=found == "restored", error=error)
        if found in ("restored", "failed") and plan is not None:
            self.bus.publish_inbound(InboundMessage(
                id=str(plan["continuation"]), channel=CHANNEL, chat_id=key, sender_id="clawgate", session_key=key,
                text=continuation_text(plan, error if found == "failed" else None), metadata=dict(plan["metadata"])))
        self._unmark(key)
        return found

    def _restore(self, session: Session, plan: dict[str, Any]) -> None:
        cp = self.checkpoints.get(str(plan["checkpoint"]))
        after: list[dict[str, Any]] = []
        for r in session.records:  # the ladder's position survives the cut (its records are after the point)
            if int(r.get("seq", 0)) <= cp.seq or r.get("kind") != "event":
                continue
            if r.get("name") == "drift_reflection" or (r.get("name") == "drift_correction"
                                                        and r.get("checkpoint") != cp.id):
                after.append({**{k: v for k, v in r.items() if k not in ("seq", "ts")}, "carried": True})
        after.append({"kind": "event", "name": "drift_correction", "run_id": plan["run"], "turn": plan["turn"],
                      "step": "restore", "signal": plan["signal"], "checkpoint": cp.id, "restored": True})
        self.checkpoints.rewind_for_drift(cp.id, paths=list(plan["paths"]), fields={"drift": plan}, after=after)

    # the marker: an index of sessions with a decision in flight -----------------------------
    def _marker_path(self, key: str) -> Path:
        return self.folder / (quote(key, safe="") + ".json")

    def _mark(self, key: str, plan: dict[str, Any]) -> None:
        marker = {"session": key, "run": plan["run"], "continuation": plan["continuation"]}
        atomic_write_bytes(self._marker_path(key), json.dumps(marker).encode(), fsync=self.fsync)
        self._pending[key] = marker

    def _unmark(self, key: str) -> None:
        self._marker_path(key).unlink(missing_ok=True)
        self._pending.pop(key, None)


def _find(session: Session, continuation: str) -> tuple[str, dict[str, Any] | None, str | None]:
    """Where the decision stands, from the live log (newest first)."""
    for record in reversed(session.records):
        kind, name = record.get("kind"), record.get("name")
        if kind == "user" and record.get("inbound_id") == continuation:
            return "continued", None, None
        if kind == "event" and name == "drift_restore_failed" and record.get("continuation") == continuation:
            return "failed", record.get("plan"), str(record.get("error") or "")
        if kind == "event" and name == "branch" and _plan_of(record, "drift", continuation):
            return "restored", record["drift"], None
        if kind == "assistant" and _plan_of(record, "drift_restore", continuation):
            return "decided", record["drift_restore"], None
    return "none", None, None


def _plan_of(record: Record, field: str, continuation: str) -> bool:
    plan = record.get(field)
    return isinstance(plan, dict) and plan.get("continuation") == continuation


def _drift_began(session: Session, msg: InboundMessage, task: Task | None) -> int | None:
    """The seq of the model turn in which the span's first drift signal fired (the task's, or this run's)."""
    records = session.records
    for index, record in enumerate(records):
        if record.get("kind") != "event" or record.get("name") != "drift_signal":
            continue
        if task is None and record.get("run_id") != msg.id:
            continue
        if task is not None and float(record.get("ts", 0)) < task.created_at:
            continue
        turn = next((r for r in reversed(records[:index]) if r.get("kind") == "assistant"), None)
        return int(turn["seq"]) if turn is not None else int(record["seq"])
    return None


def _point(plan: dict[str, Any]) -> str:
    """Where the work goes back to, in words."""
    if plan.get("step"):
        return f"the checkpoint after step {plan['step']}/{plan['steps']} ({plan['description']})"
    if plan.get("task", True):
        return f"the point in the task before the drift began ({plan['description']})"
    return f"the point in this request before the drift began ({plan['description']})"


def continuation_metadata(msg: InboundMessage) -> dict[str, Any]:
    """The original message's metadata, its delivery target and owner/guest flag made explicit:
    the continuation acts for the same person with the same rights, and answers in the same place."""
    meta = {k: v for k, v in msg.metadata.items() if k not in ("deliver", "owner")}
    meta["deliver"] = msg.metadata.get("deliver", {"channel": msg.channel, "chat_id": msg.chat_id})
    meta["owner"] = acts_for_owner(msg)
    return meta


def continuation_text(plan: dict[str, Any], error: str | None) -> str:
    """What the model reads when it continues: what was undone, why, and what not to repeat."""
    point = _point(plan)
    avoid = list(plan.get("avoid") or [])
    if plan.get("reflection"):
        avoid.append(f"reflection: {plan['reflection']}")
    dont = ("Do not repeat what failed: " + "; ".join(avoid) + ".\n") if avoid else "Do not repeat that path.\n"
    if error is not None:
        return (f"[clawgate] Drift control meant to take this work back to {point}, because it was going in "
                f"circles ({plan['why']}), but the restore failed: {error}. Nothing was undone.\n{dont}"
                f"Step back and continue the {'task' if plan.get('task', True) else 'request'} "
                "with a different approach.")
    files = plan.get("files") or {}
    changed = []
    if files.get("removed"):
        changed.append("files removed: " + ", ".join(files["removed"][:20]))
    if files.get("written"):
        changed.append("files put back as they were: " + ", ".join(files["written"][:20]))
    lines = [f"[clawgate] Drift control took this work back to {point}, because it was going in circles: "
             f"{plan['why']}.",
             "Undone: everything after that point in this conversation and the task's plan; "
             + ("; ".join(changed) if changed else "no files needed changing") + "."]
    if plan.get("irreversible"):
        lines.append("Not undone (it left the workspace): " + "; ".join(plan["irreversible"]) + ".")
    lines.append(dont.rstrip("\n"))
    if plan.get("step"):
        lines.append(f"Continue the task from the step after step {plan['step']}, with a different approach.")
    elif plan.get("task", True):
        lines.append("Continue the task from there, with a different approach.")
    else:
        lines.append("Continue the request from there, with a different approach. "
                     f"The request was: {plan['request'][:2000]}")
    return "\n".join(lines)
