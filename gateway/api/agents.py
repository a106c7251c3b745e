"""agents.list: the agents and bindings the running daemon routes by (which may differ from a
config.toml edited since it started: `clawgate agents` tells the two apart)."""

from __future__ import annotations

from typing import Any

from clawgate.agent.services import Services
from clawgate.config.agents import Roster, describe

from ..connection import Connection
from ..methods import method
from .sessions import NoParams


def roster_rows(roster: Roster) -> dict[str, Any]:
    """Each agent (id, default, workspace, where its heartbeat news goes and which setting says so, its
    bindings) and the bindings in file order."""
    bindings = [{"index": i, "agent": b.agent, "match": b.match.model_dump(exclude_none=True), "text": describe(b)}
                for i, b in enumerate(roster.bindings)]
    agents = [{"id": a.id, "default": a.default, "workspace": str(a.workspace),
               **dict(zip(("heartbeatDeliver", "heartbeatDeliverSetting"), roster.heartbeat_target(a))),
               "bindings": [row["text"] for row in bindings if row["agent"] == a.id]}
              for a in roster.agents.values()]
    return {"agents": agents, "bindings": bindings}


@method("agents.list", NoParams, "the agents (id, default, workspace, heartbeat delivery, bindings) and the bindings the daemon routes by")
async def agents_list(services: Services, conn: Connection, p: NoParams) -> dict[str, Any]:
    if services.agents is None:
        return {"agents": [], "bindings": []}
    return roster_rows(services.agents)
