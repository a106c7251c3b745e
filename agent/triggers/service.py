"""Triggers: one AsyncIOScheduler driving the cron jobs and the heartbeat.

The composition root builds the CronService and the Heartbeat (each with exactly what it
needs: the bus to publish on, the event hub, the session logs, the task store) and hands them
here; this only owns the timer: started last (right after the ready line: apscheduler and what
it imports, multiprocessing among them, are about a twentieth of a start), stopped first.
"""

from __future__ import annotations

import logging
from datetime import timezone
from typing import TYPE_CHECKING

from clawgate.config.entry_point_scan import one_entry_point_scan
from clawgate.config.schema import CronSettings, HeartbeatSettings

from .cron import CronService
from .heartbeat import Heartbeat

if TYPE_CHECKING:
    from apscheduler.schedulers.asyncio import AsyncIOScheduler

log = logging.getLogger(__name__)
# apscheduler logs every job execution at INFO; the heartbeat would flood the log with them.
logging.getLogger("apscheduler").setLevel(logging.WARNING)


class Triggers:
    def __init__(self, *, cron: CronService, heartbeat: Heartbeat, cron_settings: CronSettings,
                 heartbeat_settings: HeartbeatSettings) -> None:
        self.cron = cron
        self.heartbeat = heartbeat
        self.cron_settings = cron_settings
        self.heartbeat_settings = heartbeat_settings
        self.scheduler: "AsyncIOScheduler | None" = None

    def start(self) -> None:
        """Start the timer; due and overdue cron jobs fire right after (misfires settle there)."""
        # apscheduler looks up its plugins when imported: answered from the scan the start made
        with one_entry_point_scan():
            from apscheduler.schedulers.asyncio import AsyncIOScheduler
            from apscheduler.triggers.interval import IntervalTrigger

        self.scheduler = AsyncIOScheduler(timezone=timezone.utc)
        self.scheduler.start()
        if self.cron_settings.enabled:
            armed = self.cron.start(self.scheduler)
            log.info("cron: %d job(s) scheduled", armed)
        beat = self.heartbeat_settings
        if beat.enabled:  # an interval counts elapsed time: in UTC, so a start never looks up the local zone (tzlocal)
            every = IntervalTrigger(seconds=beat.interval_seconds, timezone=timezone.utc)
            self.scheduler.add_job(self.heartbeat.tick_async, every,
                                   id="heartbeat", name="heartbeat", max_instances=1, coalesce=True,
                                   misfire_grace_time=None)
            log.info("heartbeat every %gs%s", beat.interval_seconds,
                     f", active {beat.active_hours} ({beat.timezone or 'local time'})" if beat.active_hours else "")

    def stop(self) -> None:
        """Stop firing before anything else shuts down, so no trigger publishes into a closing bus."""
        self.cron.stop()
        if self.scheduler is not None and self.scheduler.running:
            self.scheduler.shutdown(wait=False)
