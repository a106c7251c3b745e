"""Gateway method handlers, one module per area; importing this package registers them all.

Each handler is `async (services, connection, params) -> payload` and reaches the daemon only
through the narrow services (agent/services.py).
"""

from __future__ import annotations

from clawgate.agent.services import Services

from ..methods import REGISTRY, MethodTable
from . import agents, approvals, chat, checkpoints, cron, links, sessions, status, tasks, usage  # noqa: F401  (registration)


def build_methods(services: Services) -> MethodTable:
    return MethodTable(services, REGISTRY)
