"""The control path: stop, reset and cancel, beside the data path (the bus).

Messages to the agent queue on the bus and run in order; control acts at once, outside the
queue — `/stop` must not wait behind the very turn it is meant to cancel. Every entry point
(gateway methods, chat commands, the CLI through the gateway) controls sessions and tasks
through these two classes, never through the loop's internals.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .core.errors import Conflict, NotFound
from .core.events import EventHub
from .session import Record, SessionManager
from .tasks.store import Task, TaskStore

if TYPE_CHECKING:
    from .jobs.background import BackgroundJobs
    from .context.builder import ContextBuilder
    from .loop import AgentLoop


class SessionControl:
    def __init__(self, loop: "AgentLoop", sessions: SessionManager, context: "ContextBuilder",
                 background: "BackgroundJobs | None" = None) -> None:
        self._loop = loop
        self._sessions = sessions
        self._context = context
        self._background = background

    def busy(self, key: str) -> bool:
        """A message of this session is running or queued."""
        return self._loop.busy(key)

    def queued(self, key: str) -> int:
        """Messages waiting behind the running one."""
        return self._loop.queued(key)

    def active(self) -> list[str]:
        return self._loop.lanes.active_keys()

    def stop(self, key: str, *, user: str | None = None, reply_to: str | None = None) -> bool:
        """Cancel the running turn (it answers "Stopped."); queued messages still run. False: nothing ran.
        `user` (a guest in a shared conversation): only what is this person's — their running turn, else
        their messages waiting in the queue (each answered at once). `reply_to`: the stop command's
        platform message, which those answers answer too."""
        if self._loop.stop_current(key, user=user, reply_to=reply_to):
            return True
        return user is not None and self._loop.cancel_queued(key, user, reply_to=reply_to) > 0

    def stop_background(self, key: str, why: str = "by /stop", *, forget: bool = False,
                        user: str | None = None) -> list[str]:
        """Cancel the session's background jobs (their processes are killed); returns their ids.
        /stop means "stop what you are doing for me", and that includes work in the background.
        `user`: only the jobs this person's runs started."""
        if self._background is None:
            return []
        return self._background.cancel_session(key, why, forget=forget, user=user)

    def background_jobs(self, key: str | None = None) -> list[dict[str, Any]]:
        """Running background jobs (of one session, or all)."""
        return self._background.running(key) if self._background else []

    def reset(self, key: str) -> str | None:
        """Start the session afresh; returns the archived transcript's name (None: there was none).
        Background jobs are cancelled first: their results would land in a conversation that is gone."""
        if self.busy(key):
            raise Conflict(f"session {key!r} is busy; wait for the answer or stop it first")
        self.stop_background(key, "because the conversation was reset", forget=True)
        archived = self._sessions.reset(key)
        self._context.invalidate(key)
        return archived

    async def keep_delivered(self, key: str, outbox_id: str, payload: dict[str, Any]) -> None:
        """A trigger's answer delivered to session `key` (a cron job into `main`): kept in its log,
        labelled and numbered, durably — once per outbox id, however often the delivery is retried."""
        session = self._sessions.get(key)
        if session.delivered(outbox_id):
            return
        session.append("delivered", durable=True, outbox_id=outbox_id, text=str(payload.get("text") or ""),
                       origin=dict(payload.get("from") or {}), gseq=int(payload.get("seq") or 0),
                       error=payload.get("state") == "error", run_id=str(payload.get("runId") or ""))
        await session.flush()

    def history(self, key: str, limit: int = 200) -> list[Record]:
        return self._sessions.get(key).history(limit) if self._sessions.exists(key) else []

    def message_count(self, key: str) -> int:
        return self._sessions.get(key).message_count if self._sessions.exists(key) else 0

    def summaries(self) -> list[dict[str, Any]]:
        items = self._sessions.summaries()
        for item in items:
            item["busy"] = self.busy(item["key"])
        return items


class TaskControl:
    """Read and cancel long tasks; cancelling also stops the task's running turn."""

    def __init__(self, tasks: TaskStore, sessions: SessionControl, events: EventHub) -> None:
        self._tasks = tasks
        self._sessions = sessions
        self._events = events

    def list(self, *, session: str | None = None, include_finished: bool = False) -> list[Task]:
        tasks = self._tasks.all() if include_finished else self._tasks.active()
        return [t for t in tasks if session is None or t.session_key == session]

    def get(self, task_id: str) -> Task:
        task = self._tasks.get(task_id)
        if task is None:
            raise NotFound(f"no task {task_id!r}; `clawgate tasks list --all` shows the ids")
        return task

    def cancel(self, task_id: str) -> tuple[Task, bool]:
        """Returns the task and whether a running turn was stopped."""
        task = self.get(task_id)
        if task.status not in ("pending", "in_progress"):
            raise Conflict(f"task {task_id} is already {task.status}")
        task.status, task.result = "cancelled", "cancelled by the user"
        self._tasks.save(task)
        stopped = self._sessions.stop(task.session_key)
        self._events.emit("task", session=task.session_key, id=task.id, status=task.status, line=task.status_line())
        return task, stopped


def task_summary(task: Task) -> dict[str, Any]:
    """One task as clients list it (camelCase, like every gateway payload)."""
    return {"id": task.id, "session": task.session_key, "status": task.status, "goal": task.goal,
            "line": task.status_line(), "steps": len(task.steps), "done": task.done_count, "updatedAt": task.updated_at}
