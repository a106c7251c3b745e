"""sessions.list, sessions.reset."""

from __future__ import annotations

from typing import Any

from clawgate.agent.services import Services
from clawgate.config.agents import IMPLICIT_AGENT, agent_id_of

from ..connection import Connection
from ..methods import Params, method
from .chat import SessionParam


class NoParams(Params):
    """A method that takes nothing (anything given is an invalid_params error)."""


@method("sessions.list", NoParams, "all sessions with their last activity")
async def sessions_list(services: Services, conn: Connection, p: NoParams) -> dict[str, Any]:
    rows = services.sessions.summaries()
    for row in rows:  # whose session it is: the agent named in its key (the default agent's keys are plain)
        ident = agent_id_of(str(row["key"]))
        row["agent"] = ident or (services.agents.default.id if services.agents is not None else IMPLICIT_AGENT)
    return {"sessions": rows}


@method("sessions.reset", SessionParam, "start a session afresh (the old transcript is archived, not deleted)")
async def sessions_reset(services: Services, conn: Connection, p: SessionParam) -> dict[str, Any]:
    session = services.agent_key(p.session, p.agent)
    return {"session": session, "archived": services.sessions.reset(session)}
