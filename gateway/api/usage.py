"""usage: token counts per day and per session, kept across restarts (agent/usage/ledger.py)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from clawgate.agent.core.errors import Unavailable
from clawgate.agent.services import Services

from ..connection import Connection
from ..methods import Params, method
from .chat import AgentName, SessionKey


class UsageParams(Params):
    session: SessionKey | None = None
    days: int = Field(7, ge=1, le=366)
    top: int = Field(5, ge=1, le=100)
    agent: AgentName = None


@method("usage", UsageParams, "token usage: today, total, since start, the last days, top sessions, one session")
async def usage(services: Services, conn: Connection, p: UsageParams) -> dict[str, Any]:
    if services.usage is None:
        raise Unavailable("token usage is not recorded by this daemon")
    session = services.agent_key(p.session, p.agent) if p.session else None
    return services.usage.report(session=session, days=p.days, top=p.top)
