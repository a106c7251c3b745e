"""checkpoints.list, checkpoints.show, checkpoints.restore, checkpoints.fork: time travel."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from clawgate.agent.services import Services

from ..connection import Connection
from ..methods import Params, method
from .chat import AgentName


class CheckpointList(Params):
    session: str | None = Field(None, max_length=200)
    task: str | None = Field(None, max_length=64)
    limit: int = Field(200, ge=1, le=10_000)
    agent: AgentName = None


class CheckpointId(Params):
    id: str = Field(min_length=1, max_length=64)
    agent: AgentName = None


class CheckpointRestore(Params):
    id: str = Field(min_length=1, max_length=64)
    mode: Literal["conversation", "files", "both"] = "both"
    confirm: bool = Field(False, description="go ahead although effects after the point cannot be undone")
    agent: AgentName = None


class CheckpointFork(Params):
    id: str = Field(min_length=1, max_length=64)
    session: str | None = Field(None, min_length=1, max_length=200, description="the new session's key")
    agent: AgentName = None


@method("checkpoints.list", CheckpointList, "checkpoints, newest first, optionally of one session or task")
async def checkpoints_list(services: Services, conn: Connection, p: CheckpointList) -> dict[str, Any]:
    session = services.agent_key(p.session, p.agent) if p.session else None
    return services.checkpoints.list(session=session, task=p.task, limit=p.limit)


@method("checkpoints.show", CheckpointId, "one checkpoint: what the agent knew and did, what a restore changes")
async def checkpoints_show(services: Services, conn: Connection, p: CheckpointId) -> dict[str, Any]:
    services.check_agent(services.checkpoints.get(p.id).session, p.agent)  # what it knew is its agent's
    return services.checkpoints.show(p.id)


@method("checkpoints.restore", CheckpointRestore,
        "go back to a checkpoint (conversation, files or both); without confirm, irreversible effects after it "
        "are returned and nothing changes")
async def checkpoints_restore(services: Services, conn: Connection, p: CheckpointRestore) -> dict[str, Any]:
    services.check_agent(services.checkpoints.get(p.id).session, p.agent)  # never one agent's in another's name
    return services.checkpoints.restore(p.id, p.mode, confirm=p.confirm)


@method("checkpoints.fork", CheckpointFork, "a new session branched from a checkpoint; the original is untouched")
async def checkpoints_fork(services: Services, conn: Connection, p: CheckpointFork) -> dict[str, Any]:
    services.check_agent(services.checkpoints.get(p.id).session, p.agent)
    target = services.agent_key(p.session, p.agent) if p.session else None
    if target is not None:  # a bare `agent:<id>:…` key never lands a fork in another agent
        services.check_agent(target, p.agent)
    return services.checkpoints.fork(p.id, target)
