"""Triggers: one AsyncIOScheduler driving the cron jobs and the heartbeat.

The composition root builds the CronService and the Heartbeat (each with exactly what it
needs: the bus to publish on, the event hub, the session logs, the task store) and hands them
here; this only owns the timer: started last, stopped first.
"""

from __future__ import annotations

import logging
from datetime import timezone

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.interval import IntervalTrigger

from clawgate.config.schema import CronSettings, HeartbeatSettings

from .cron import CronService
from .heartbeat import Heartbeat

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
        self.scheduler = AsyncIOScheduler(timezone=timezone.utc)

    def start(self) -> None:
        """Start the timer; due and overdue cron jobs fire right after (misfires settle there)."""
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
        if self.scheduler.running:
            self.scheduler.shutdown(wait=False)
