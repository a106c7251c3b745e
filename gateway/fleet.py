"""Fleet mode's wiring: the one place the daemon joins a fleet (docs/fleet.md).

Without `[fleet] redis_url` nothing here runs and nothing of redis is imported: `build` returns
None and the daemon is the single process it always was. With it, `build` reaches Redis (or
raises FleetUnavailable: one line, the daemon does not start) and `wire` connects the parts the
App built to the fleet: the session log and task store refuse writes for partitions this worker
no longer holds, runs of lost partitions stop, connections that may exist once per bot run under
a singleton lease, cron and heartbeat runs are claimed once across the fleet.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from clawgate.config.schema import Settings

if TYPE_CHECKING:
    from clawgate.agent.fleet.node import FleetNode

    from .app import App

log = logging.getLogger("clawgate.fleet")


def build(settings: Settings) -> "FleetNode | None":
    if not settings.fleet.redis_url:
        return None
    from clawgate.agent.fleet.node import FleetNode  # redis only in fleet mode

    return FleetNode(settings.fleet, keep_days=settings.state.keep_days, port=settings.gateway.port)


def wire(app: "App", node: "FleetNode") -> None:
    app.sessions.guard = node.guard
    app.tasks.guard = node.guard
    node.stop_sessions = lambda keys: _stop(app, keys)
    gained = node.partitions.on_gained

    def on_gained(n: int, lease: Any) -> None:
        """Sessions of a partition another worker had may have moved on: read them again."""
        for key in app.sessions.loaded_keys():
            if node.bus.partition(key) == n and not app.loop.busy(key):
                app.sessions.forget(key)
        app.tasks.reload()
        gained(n, lease)

    node.partitions.on_gained = on_gained
    app.loop.skip_if.append(lambda session, msg: node.bus.stale(msg.id))
    for channel in app.channels.values():
        channel.exclusive = node.singletons.hold
    app.triggers.cron.claim = lambda what: node.claim(f"cron:{what}", 86400)
    node.periodic.append(app.triggers.cron.resync)  # a job added or changed on another process
    app.triggers.heartbeat.claim = lambda what: node.claim(what, max(60.0, app.settings.heartbeat.interval_seconds * 2))
    app.status.add("fleet", node.status)


def _stop(app: "App", keys: list[str]) -> None:
    """The partition moved: its runs here stop (their writes would be refused); the new holder resumes them."""
    for key in keys:
        if app.loop.lanes.cancel_current(key):
            log.warning("fleet: stopped the run of session %s here: its partition moved to another worker", key)
