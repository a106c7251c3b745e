"""status: the daemon's health."""

from __future__ import annotations

from typing import Any

from clawgate.agent.services import Services

from ..connection import Connection
from ..methods import method
from .sessions import NoParams


@method("status", NoParams, "daemon health: version, uptime, sessions, queues, provider, channels")
async def status(services: Services, conn: Connection, p: NoParams) -> dict[str, Any]:
    return services.status.snapshot()
