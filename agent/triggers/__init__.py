"""Triggers that wake the agent without a user message: cron jobs and the heartbeat.

Both are producers on the MessageBus, like a channel: they publish InboundMessages
(channel "cron" / "heartbeat") and their replies flow back through the bus.
"""

from .cron import CronService
from .cron_store import CronStore
from .jobs import CronError, Job
from .schedule import Schedule, ScheduleError
from .service import Triggers

__all__ = ["CronError", "CronService", "CronStore", "Job", "Schedule", "ScheduleError", "Triggers"]
