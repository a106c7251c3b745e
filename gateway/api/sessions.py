"""sessions.list, sessions.reset."""

from __future__ import annotations

from typing import Any

from clawgate.agent.services import Services

from ..connection import Connection
from ..methods import Params, method
from .chat import SessionParam


class NoParams(Params):
    """A method that takes nothing (anything given is an invalid_params error)."""


@method("sessions.list", NoParams, "all sessions with their last activity")
async def sessions_list(services: Services, conn: Connection, p: NoParams) -> dict[str, Any]:
    return {"sessions": services.sessions.summaries()}


@method("sessions.reset", SessionParam, "start a session afresh (the old transcript is archived, not deleted)")
async def sessions_reset(services: Services, conn: Connection, p: SessionParam) -> dict[str, Any]:
    return {"session": p.session, "archived": services.sessions.reset(p.session)}
