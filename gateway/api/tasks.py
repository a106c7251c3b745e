"""tasks.list, tasks.get, tasks.cancel: long tasks."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from clawgate.agent.control import task_summary
from clawgate.agent.services import Services

from ..connection import Connection
from ..methods import Params, method
from .chat import AgentName


class TaskList(Params):
    session: str | None = Field(None, max_length=200)
    all: bool = Field(False, description="include finished tasks")
    agent: AgentName = None


class TaskId(Params):
    id: str = Field(min_length=1, max_length=64)


@method("tasks.list", TaskList, "tasks (active ones unless all=true), optionally for one session")
async def tasks_list(services: Services, conn: Connection, p: TaskList) -> dict[str, Any]:
    return {"tasks": [task_summary(t) for t in services.tasks.list(
        session=services.agent_key(p.session, p.agent) if p.session else None, include_finished=p.all)]}


@method("tasks.get", TaskId, "one task with its steps, notes and result")
async def tasks_get(services: Services, conn: Connection, p: TaskId) -> dict[str, Any]:
    return {"task": services.tasks.get(p.id).to_dict()}


@method("tasks.cancel", TaskId, "cancel a task (and stop its session's running turn)")
async def tasks_cancel(services: Services, conn: Connection, p: TaskId) -> dict[str, Any]:
    task, stopped = services.tasks.cancel(p.id)
    return {"task": task_summary(task), "stoppedRun": stopped}
