"""Gateway methods for long tasks: tasks.list, tasks.get, tasks.cancel."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import Field

from . import protocol
from .methods import MethodError, MethodTable, Params

if TYPE_CHECKING:
    from .daemon import Daemon
    from .server import Connection


class TaskList(Params):
    session: str | None = None
    all: bool = Field(False, description="include finished tasks")


class TaskId(Params):
    id: str = Field(min_length=1)


def register(table: MethodTable, daemon: "Daemon") -> None:
    @table.add("tasks.list", TaskList, "tasks (active ones unless all=true), optionally for one session")
    async def tasks_list(conn: "Connection", p: TaskList) -> dict[str, Any]:
        tasks = daemon.tasks.all() if p.all else daemon.tasks.active()
        return {"tasks": [_summary(t) for t in tasks if p.session is None or t.session_key == p.session]}

    @table.add("tasks.get", TaskId, "one task with its steps, notes and result")
    async def tasks_get(conn: "Connection", p: TaskId) -> dict[str, Any]:
        task = daemon.tasks.get(p.id)
        if task is None:
            raise MethodError(protocol.NOT_FOUND, f"no task {p.id!r}; tasks.list shows the ids")
        return {"task": task.to_dict()}

    @table.add("tasks.cancel", TaskId, "cancel a task (and stop its session's running turn)")
    async def tasks_cancel(conn: "Connection", p: TaskId) -> dict[str, Any]:
        task = daemon.tasks.get(p.id)
        if task is None:
            raise MethodError(protocol.NOT_FOUND, f"no task {p.id!r}; tasks.list shows the ids")
        if task.status not in ("pending", "in_progress"):
            raise MethodError(protocol.CONFLICT, f"task {p.id} is already {task.status}")
        task.status, task.result = "cancelled", "cancelled by the user"
        daemon.tasks.save(task)
        stopped = daemon.agent.stop_current(task.session_key)
        daemon.events.emit("task", session=task.session_key, id=task.id, status=task.status)
        return {"task": _summary(task), "stoppedRun": stopped}


def _summary(task: Any) -> dict[str, Any]:
    return {"id": task.id, "session": task.session_key, "status": task.status, "goal": task.goal,
            "line": task.status_line(), "steps": len(task.steps), "done": task.done_count, "updatedAt": task.updated_at}
