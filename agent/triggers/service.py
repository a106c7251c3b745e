"""Triggers: one AsyncIOScheduler driving the cron jobs and the heartbeat, plugged into the daemon.

The daemon only builds this, starts it last and stops it first. Everything it needs from
the rest of the system it takes through existing seams: the bus (publish), the event hub
(`run_end` → cron run history), the loop's reply filters (HEARTBEAT_OK), the session logs
(a run's short result) and the task store (what is in progress).
"""

from __future__ import annotations

import logging
from datetime import timezone
from functools import partial
from typing import TYPE_CHECKING

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.interval import IntervalTrigger

from .cron import CronService
from .cron_store import CronStore
from .heartbeat import Heartbeat

if TYPE_CHECKING:
    from agent.session import SessionManager
    from gateway.daemon import Daemon

log = logging.getLogger(__name__)
# apscheduler logs every job execution at INFO; the heartbeat would flood the log with them.
logging.getLogger("apscheduler").setLevel(logging.WARNING)


def run_result(sessions: "SessionManager", session_key: str, run_id: str) -> str:
    """The short result of a run, read from its session log: the final text or the error."""
    if not sessions.exists(session_key):
        return ""
    for record in reversed(sessions.get(session_key).records):
        if record.get("run_id") == run_id:
            if record["kind"] == "assistant":
                text = "".join(b.get("text", "") for b in record["content"] if b.get("type") == "text").strip()
                if text:
                    return text
            elif record["kind"] == "event" and record.get("error"):
                return str(record["error"])
            elif record["kind"] == "event" and record.get("name") == "cancelled":
                return "stopped by the user"
        if record.get("kind") == "user" and record.get("inbound_id") == run_id:
            break
    return ""


class Triggers:
    def __init__(self, daemon: "Daemon") -> None:
        settings = daemon.settings
        self.settings = settings
        self.store = CronStore(daemon.store.db, history=settings.cron.history)
        self.cron = CronService(self.store, daemon.bus, daemon.events, settings.cron,
                                result_of=partial(run_result, daemon.sessions), busy=daemon.agent.busy)
        self.heartbeat = Heartbeat(settings.heartbeat, workspace=daemon.workspace.root, tasks=daemon.tasks,
                                   sessions=daemon.sessions, bus=daemon.bus, events=daemon.events,
                                   busy=daemon.agent.busy)
        daemon.events.subscribe(self.cron.on_event)
        daemon.agent.reply_filters.append(self.heartbeat.reply_filter)
        self.scheduler = AsyncIOScheduler(timezone=timezone.utc)

    def start(self) -> None:
        """Start the timer; due and overdue cron jobs fire right after (misfires settle there)."""
        self.scheduler.start()
        if self.settings.cron.enabled:
            armed = self.cron.start(self.scheduler)
            log.info("cron: %d job(s) scheduled", armed)
        beat = self.settings.heartbeat
        if beat.enabled:
            self.scheduler.add_job(self.heartbeat.tick_async, IntervalTrigger(seconds=beat.interval_seconds),
                                   id="heartbeat", name="heartbeat", max_instances=1, coalesce=True,
                                   misfire_grace_time=None)
            log.info("heartbeat every %gs%s", beat.interval_seconds,
                     f", active {beat.active_hours} ({beat.timezone or 'local time'})" if beat.active_hours else "")

    def stop(self) -> None:
        """Stop firing before anything else shuts down, so no trigger publishes into a closing bus."""
        self.cron.stop()
        if self.scheduler.running:
            self.scheduler.shutdown(wait=False)
