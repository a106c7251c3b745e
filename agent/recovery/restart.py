"""Recovery after a restart, and the bookkeeping that makes it possible.

- Unanswered inbound messages and undelivered replies are replayed by the bus (gateway/bus.py);
  a replayed run continues from its session log (agent/loop.py).
- Tasks still in progress whose session has nothing left to replay are resumed here: the user
  is told ("resumed after a restart: step 4/9") and a continuation turn is queued. A task that
  keeps getting interrupted without progress is failed and reported, not retried forever.
- TaskTracker counts model turns per task and reminds the agent to keep its plan current.
"""

from __future__ import annotations

import logging
from typing import Any

from clawgate.agent.bus import InboundMessage, MessageBus, OutboundMessage
from clawgate.workspace.users import OWNER

from ..context.shared_view import run_person
from ..core.events import Event, EventHub
from ..session import SessionManager
from ..tasks.store import Task, TaskStore
from ..tools import ToolContext, ToolOutcome

log = logging.getLogger(__name__)
CHANNEL = "recovery"


def resume_tasks(tasks: TaskStore, sessions: SessionManager, bus: MessageBus, *, max_resumes: int) -> list[str]:
    """Queue a continuation for every interrupted task; returns the ids resumed."""
    resumed: list[str] = []
    for task in tasks.active():
        if task.status != "in_progress" or bus.has_unanswered(task.session_key):
            continue  # a replayed message continues this session's work already
        known = sessions.exists(task.session_key)
        origin = sessions.get(task.session_key).last_origin() if known else None
        owner = known and sessions.get(task.session_key).acts_for_owner()
        if task.user is not None:  # the task's person, not whoever spoke last in a shared conversation
            owner = task.user == OWNER
        task.resume_attempts += 1
        if task.resume_attempts > max_resumes:
            task.status = "failed"
            task.result = (f"stopped: interrupted by {task.resume_attempts - 1} restarts in a row without progress "
                           f"at {task.status_line()}")
            tasks.save(task)
            log.error("task %s failed after %d resumes without progress", task.id, max_resumes)
            _notify(bus, sessions, origin, task, f"Task stopped after repeated restarts without progress: {task.goal}. "
                                                  f"Last state: {_where(task)}. Ask me to retry when ready.")
            continue
        tasks.save(task)
        _notify(bus, sessions, origin, task, f"Resumed after a restart: {_where(task)} — {task.goal}")
        bus.publish_inbound(InboundMessage(
            id=f"resume:{task.id}:{task.resume_attempts}", channel=CHANNEL, chat_id=task.session_key,
            sender_id="clawgate", session_key=task.session_key,
            text=(f"[clawgate] The daemon restarted while task {task.id} was in progress ({_where(task)}). "
                  "Check the current step's actual state (files, outputs) before redoing anything, then continue "
                  "the plan one step at a time."),
            metadata={"deliver": origin, "owner": owner, **({"user": task.user} if task.user else {})},
        ))
        resumed.append(task.id)
    return resumed


def _where(task: Task) -> str:
    index = task.current_index
    if index is None:
        return f"all {len(task.steps)} steps done, not yet finished"
    return f"step {index + 1}/{len(task.steps)}"


def _notify(bus: MessageBus, sessions: SessionManager, origin: dict[str, str] | None, task: Task, text: str) -> None:
    """Tell the user (if we know where they are) and keep the notice in the session's history."""
    sessions.get(task.session_key).append("event", name="notice", text=text, task=task.id)
    if origin is None:
        return
    bus.publish_outbound(OutboundMessage(channel=origin["channel"], chat_id=str(origin["chat_id"]), text=text,
                                         session_key=task.session_key, kind="notice",
                                         id=f"notice:{task.id}:{task.resume_attempts}:{task.status}"))


class TaskTracker:
    """Counts model turns against the session's current task, nudges stale plans, and
    announces plan changes as `task` events (gateway clients show live progress)."""

    def __init__(self, tasks: TaskStore, *, remind_after: int, events: EventHub | None = None,
                 sessions: SessionManager | None = None) -> None:
        """`sessions`: to count a turn only against the task of the run's own person (a conversation several
        people share); without it, against the session's current task."""
        self.tasks = tasks
        self.remind_after = remind_after
        self.sessions = sessions
        self.events = events
        self._stale: dict[str, tuple[float, int]] = {}  # task id -> (updated_at seen, turns since)

    def on_event(self, event: Event) -> None:
        if event["type"] != "turn_end" or not event.get("session"):
            return
        session = self.sessions.loaded(event["session"]) if self.sessions is not None else None
        task = self.tasks.current(event["session"]) if session is None else \
            self.tasks.current_for(session, run_person(session))
        if task is None or task.status != "in_progress":
            return
        seen, since = self._stale.get(task.id, (task.updated_at, 0))
        since = 0 if task.updated_at != seen else since + 1
        task.turns += 1
        self.tasks.save(task)
        self._stale[task.id] = (task.updated_at, since)

    def remind(self, call: dict[str, Any], outcome: ToolOutcome, ctx: ToolContext) -> None:
        if call["name"] == "task":
            self._announce(call, outcome, ctx)
            return
        task = self.tasks.current(ctx.session_key, ctx.user)  # the caller's own task, never another person's
        if task is None:
            return
        _, since = self._stale.get(task.id, (0.0, 0))
        if since >= self.remind_after:
            outcome.content += (f"\n[reminder] {since} turns since task {task.id}'s plan was updated "
                                f"({task.status_line()}). Record progress with the task tool.")

    def _announce(self, call: dict[str, Any], outcome: ToolOutcome, ctx: ToolContext) -> None:
        if self.events is None or outcome.is_error:
            return
        task_id = (call.get("input") or {}).get("task_id")
        task = self.tasks.get(task_id) if task_id else self.tasks.current(ctx.session_key, ctx.user)
        if task is None:  # just finished: the newest task of the session
            done = [t for t in self.tasks.all() if t.session_key == ctx.session_key]
            task = max(done, key=lambda t: t.updated_at) if done else None
        if task is not None:
            self.events.emit("task", session=task.session_key, id=task.id, status=task.status,
                             line=task.status_line(), action=(call.get("input") or {}).get("action"))
