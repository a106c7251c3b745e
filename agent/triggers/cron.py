"""The CronService: fires stored jobs onto the bus and keeps their run history honest.

The store owns each job's `next_run_at`; apscheduler's AsyncIOScheduler is the timer that
wakes us at that moment (a one-shot DateTrigger per job, re-armed after every fire), and
the Schedule (crontab arithmetic on cronsim, or an interval) says what comes next. Because the
due time is stored, one code path covers both a normal fire and a restart after downtime:

- every fire time passed since `next_run_at` is counted; the latest runs once if it is
  within the job's grace window, the others (or all) are recorded as missed and the
  delivery target is told — never silently dropped;
- the run's inbound id is `cron:<job>:<scheduled time>`, so a fire repeated after a crash
  is deduplicated by the inbox instead of running twice;
- a job whose previous run is still open (unanswered in the inbox) is not started again;
- a failed run backs the job off; `max_failures` in a row disable it, with a message.

@reboot jobs run once per daemon start: `start` makes the start time their due time. A start
after an unclean exit (a crash, SIGKILL) within the same machine boot continues the previous
start instead of counting as a new one, so a crash loop does not repeat them, and a run the
crash cut short keeps its id (`cron:<job>:<start time>`) and is deduplicated by the inbox. In a
fleet the start is the fleet's (`fleet_start`: its first process joining when none was alive), so
processes joining or restarting while the fleet runs do not repeat them.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Callable

from clawgate.agent.bus import InboundMessage, OutboundMessage

from .cron_store import OPEN, CronStore, Run
from .jobs import CronError, Job, build_schedule, new_job, resolve_deliver
from .schedule import ScheduleError, format_duration, format_time, iso_utc, parse_duration

if TYPE_CHECKING:
    from apscheduler.schedulers.asyncio import AsyncIOScheduler

    from clawgate.agent.core.events import EventHub
    from clawgate.config.schema import CronSettings
    from clawgate.agent.bus import MessageBus

log = logging.getLogger(__name__)
BOOT_ID = "/proc/sys/kernel/random/boot_id"  # Linux: a new value at every boot of the machine
OVERLAP_RETRY = 5.0      # a one-shot whose previous (manual) run is still going checks again this soon
LOST_AFTER = 60.0        # an unanswered run whose session lane is idle this long has been lost


class CronService:
    def __init__(self, store: CronStore, bus: "MessageBus", events: "EventHub", settings: "CronSettings", *,
                 result_of: Callable[[str, str], str] = lambda session, run_id: "",
                 busy: Callable[[str], bool] = lambda session: False,
                 clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.bus = bus
        self.events = events
        self.settings = settings
        self.result_of = result_of
        self.busy = busy
        self.clock = clock
        self.scheduler: "AsyncIOScheduler | None" = None
        self._closed = False
        # Once across a fleet: True for the one process that may start this (job, due time) run
        # (agent/fleet claims it in Redis); alone, always True.
        self.claim: Callable[[str], bool] = lambda what: True
        # ... and once its run is recorded, settled for good. A claim not settled runs out after
        # `claim_wait` seconds, so a due time whose process died (or failed) before recording it is
        # taken again: the others look again that soon instead of at the next due time.
        self.settle: Callable[[str], None] = lambda what: None
        self.claim_wait = 0.0
        # A fleet: @reboot jobs run once per start of the fleet (its first process joining), not per
        # process; set by the daemon's fleet wiring. Alone: None, this daemon's own start.
        self.fleet_start: Callable[[], float] | None = None

    # lifecycle ---------------------------------------------------------------------
    def start(self, scheduler: "AsyncIOScheduler") -> int:
        """Arm every enabled job at its stored due time (past ones fire at once and settle misfires)."""
        self.scheduler = scheduler
        started = self.fleet_start() if self.fleet_start is not None else self._daemon_start()
        for job in self.store.jobs():
            if job.enabled and job.plan.reboot and job.reboot_at != started:
                job.reboot_at, job.next_run_at = started, started
                self.store.save(job)
        jobs = [j for j in self.store.jobs() if j.enabled and j.next_run_at is not None]
        for job in jobs:
            self._arm(job)
        return len(jobs)

    def resync(self) -> int:
        """Arm the jobs as stored now (a fleet's processes share the store: one of them may have
        added, changed or removed a job); returns how many are armed."""
        jobs = {job.id: job for job in self.store.jobs() if job.enabled and job.next_run_at is not None}
        if self.scheduler is None or self._closed:
            return 0
        for scheduled in self.scheduler.get_jobs():
            if scheduled.id.startswith("cron:") and scheduled.id[5:] not in jobs:
                self._disarm(scheduled.id[5:])
        for job in jobs.values():
            current = self.scheduler.get_job(f"cron:{job.id}")
            if current is None or current.next_run_time is None or \
                    abs(current.next_run_time.timestamp() - float(job.next_run_at or 0)) > 0.001:
                self._arm(job)
        return len(jobs)

    def stop(self) -> None:
        self._closed = True
        if self.scheduler is not None:  # a clean stop: the next start is a new one for @reboot jobs
            mark = self.store.meta("daemon") or {}
            self.store.set_meta("daemon", {**mark, "clean": True})

    def _daemon_start(self) -> float:
        """This daemon start's time; after an unclean exit in the same boot, the previous start's."""
        boot = _boot_id()
        last = self.store.meta("daemon") or {}
        if boot and last.get("boot") == boot and last.get("clean") is False:
            started = float(last["started"])
            log.info("cron: restarted after an unclean exit; @reboot jobs are not run again")
        else:
            started = self.clock()
        self.store.set_meta("daemon", {"boot": boot, "started": started, "clean": False})
        return started

    # management (gateway methods, CLI, the agent's tool) ---------------------------
    def add(self, *, message: str, cron: str | None = None, tz: str | None = None, every: Any = None,
            at: Any = None, name: str | None = None, session: str | None = None, deliver: str | None = None,
            grace: Any = None, created_by: str = "", tainted: str = "", agent: str | None = None) -> Job:
        """`created_by`: "" for the owner, "<channel>:<user>" for a guest (whose runs get a guest's rights);
        `tainted`: the untrusted content the creating run had taken in (its runs start tainted)."""

        now = self.clock()
        zone_name = (tz or self.settings.timezone) if cron else tz
        schedule = build_schedule(cron=cron, tz=zone_name, every=every, at=at, now=now)
        try:
            grace_seconds = self.settings.grace_seconds if grace in (None, "") else parse_duration(grace, "grace window")
        except ScheduleError as exc:
            raise CronError(str(exc)) from None
        job = new_job(message=message, schedule=schedule, name=name, session=session, deliver=deliver,
                      grace_seconds=grace_seconds, now=now, created_by=created_by, tainted=tainted, agent=agent)
        if schedule.reboot and self.fleet_start is not None:  # not due before the fleet's next start
            job.reboot_at = self.fleet_start()
        self.store.save(job)
        self._arm(job)
        log.info("cron job %s added: %s, next run %s", job.id, schedule.describe(), format_time(job.next_run_at, schedule.tz))
        self._emit("added", job)
        return job

    def get(self, job_id: str) -> Job:
        job = self.store.get(job_id)
        if job is None:
            raise CronError(f"no cron job {job_id!r}; `clawgate cron list` shows the ids", "not_found")
        return job

    def jobs(self) -> list[Job]:
        return self.store.jobs()

    def runs(self, job_id: str, limit: int = 20) -> list[Run]:
        self.get(job_id)
        return self.store.runs(job_id, limit)

    def remove(self, job_id: str) -> Job:
        job = self.get(job_id)
        self.store.delete(job_id)
        self._disarm(job_id)
        self._emit("removed", job)
        return job

    def set_enabled(self, job_id: str, enabled: bool) -> Job:
        job = self.get(job_id)
        now = self.clock()
        if enabled:
            plan = job.plan
            if plan.kind == "at" and job.state == "done":
                raise CronError(f"cron job {job_id!r} was a one-shot and has already run; add a new job", "conflict")
            job.enabled, job.state, job.note, job.failures = True, "scheduled", "", 0
            job.next_run_at = plan.first_run(now) if plan.kind != "at" else max(job.next_run_at or plan.at, now)
        else:
            job.enabled, job.state, job.note = False, "disabled", "disabled by the user"
        self.store.save(job)
        self._arm(job)
        self._emit("enabled" if enabled else "disabled", job)
        return job

    def run_now(self, job_id: str) -> str:
        """Start a run at once (off schedule); with no daemon running it waits in the inbox."""
        job = self.get(job_id)
        now = self.clock()
        open_run = self._open_run(job, now)
        if open_run:
            raise CronError(f"cron job {job_id!r} is still running ({open_run}); wait for it to finish", "conflict")
        run_id = self._start(job, now, now, manual=True)
        self.store.save(job)
        return run_id

    # firing ------------------------------------------------------------------------
    async def _fire_async(self, job_id: str) -> None:
        try:
            self.fire(job_id)
        except Exception:
            log.exception("cron job %s: fire failed; it is re-armed for its next time", job_id)
            job = self.store.get(job_id)
            if job is not None:
                self._arm(job, when=self.clock() + max(self.settings.backoff_seconds, 1.0))

    def fire(self, job_id: str) -> str | None:
        """Settle a job that is due: run its latest due time (or record it missed) and re-arm."""
        job = self.store.get(job_id)
        if self._closed or job is None or not job.enabled or job.next_run_at is None:
            return None
        now = self.clock()
        if job.next_run_at > now + 0.001:
            self._arm(job)  # woken early; wait for the stored time
            return None
        plan = job.plan
        due = [job.next_run_at] if plan.kind == "at" or plan.reboot else plan.due_times(job.next_run_at, now)
        latest = due[-1]
        in_grace = now - latest <= job.grace_seconds
        claim = f"{job.id}:{latest}"
        if not self.claim(claim):  # a fleet: another process settles this due time
            log.info("cron job %s: the %s run is another process's", job.id, format_time(latest))
            later = [t for t in (plan.next_after(now), now + self.claim_wait if self.claim_wait else None) if t]
            self._arm(job, when=min(later) if later else None)
            return None
        earlier = due[:-1] if in_grace else due
        missed = [t for t in earlier if now - t > job.grace_seconds]
        folded = [t for t in earlier if now - t <= job.grace_seconds]
        if missed:
            self._record_missed(job, missed, now)
        if folded:
            # Times that came due while the timer could not fire (a stall, or a short restart) and are
            # still within the grace window: folded into this one run, not lost and not worth a notice.
            self._record_folded(job, folded, latest, now)
        run_id: str | None = None
        retry_at: float | None = None
        if in_grace:
            open_run = self._open_run(job, now)
            if open_run is None:
                run_id = self._start(job, latest, now)
            elif plan.kind == "at":
                retry_at = now + OVERLAP_RETRY
            else:
                self.store.record(Run(f"cron:{job.id}:{iso_utc(latest)}", job.id, latest, now, now, "skipped",
                                      f"previous run {open_run} was still running"))
                log.info("cron job %s: skipped the %s run, the previous one is still running", job.id, format_time(latest))
                self._emit("skipped", job, scheduledAt=latest, reason="previous run still running")
        if retry_at is None:
            job.next_run_at = plan.next_after(now)
            if job.next_run_at is None and not plan.reboot:
                job.state = "done"
                job.note = "ran once" if run_id else "missed its only run"
        self.store.save(job)
        if retry_at is None:  # recorded (a one-shot waiting for its previous run keeps its claim open)
            self.settle(claim)
        self._arm(job, when=retry_at)
        return run_id

    def _start(self, job: Job, scheduled: float, now: float, *, manual: bool = False) -> str:
        run_id = f"cron:{job.id}:{'manual:' if manual else ''}{iso_utc(scheduled)}"
        deliver = resolve_deliver(job.deliver, job.session)
        where = f"{deliver['channel']}:{deliver['chat_id']}" if deliver else "nowhere (kept in the job's history)"
        when = "run by hand" if manual else "scheduled " + format_time(scheduled, job.plan.tz)
        text = f"[cron job \"{job.name}\" ({job.id}) · {when} · your reply is delivered to {where}]\n{job.message}"
        msg = InboundMessage(channel="cron", chat_id=job.id, sender_id="cron", session_key=job.session, text=text,
                             id=run_id, received_at=now,
                             metadata={"mode": "normal", "deliver": deliver, "owner": not job.created_by, "user": job.created_by,
                                       **({"tainted": f"cron job {job.id}: {job.tainted}"} if job.tainted else {}),
                                       "cron": {"job": job.id, "scheduledAt": scheduled, "name": job.name,
                                                "schedule": job.plan.describe()}})
        fresh = self.bus.publish_inbound(msg)
        status = "running" if self.scheduler is not None else "queued"
        self.store.record(Run(run_id, job.id, scheduled, now, None, status, ""))
        job.last_run_id, job.last_status = run_id, status
        log.info("cron job %s: run %s %s", job.id, run_id, "started" if fresh else "was already accepted (restart)")
        self._emit("run_start", job, runId=run_id, scheduledAt=scheduled, lateMs=round((now - scheduled) * 1000, 1))
        return run_id

    def _open_run(self, job: Job, now: float) -> str | None:
        """The id of the job's unfinished previous run, if there is one."""
        if not job.last_run_id or not self.bus.is_unanswered(job.last_run_id):
            return None
        run = self.store.run(job.last_run_id)
        if run is not None and run.status in OPEN and self.scheduler is not None and not self.busy(job.session) \
                and now - run.started_at > LOST_AFTER:
            self.store.finish(job.last_run_id, "error", "the run ended without an answer (see the daemon log)", now)
            self.bus.settle(job.last_run_id)
            return None
        return job.last_run_id

    def _record_folded(self, job: Job, times: list[float], into: float, now: float) -> None:
        tz = job.plan.tz
        span = format_time(times[0], tz) + (f" and {len(times) - 1} more" if len(times) > 1 else "")
        why = f"folded into the run at {format_time(into, tz)}: {span} came due while the timer could not fire"
        self.store.record(Run(f"cron:{job.id}:folded:{iso_utc(times[0])}", job.id, times[-1], now, now, "skipped", why))
        log.info("cron job %s: %s", job.id, why)

    def _record_missed(self, job: Job, times: list[float], now: float) -> None:
        first, last = times[0], times[-1]
        tz = job.plan.tz
        span = format_time(first, tz)
        if len(times) > 1:
            span = f"{len(times)} runs from {span} to {format_time(last, tz)}"
        why = (f"missed {span}: clawgate was not running (or was stalled) then, and it is past the "
               f"{format_duration(job.grace_seconds)} grace window")
        self.store.record(Run(f"cron:{job.id}:missed:{iso_utc(first)}", job.id, last, now, now, "missed", why))
        job.last_status = "missed"
        log.warning("cron job %s %s", job.id, why)
        self._emit("missed", job, count=len(times), scheduledAt=last)
        self._notify(job, f"Cron job \"{job.name}\" ({job.id}) {why}.")

    # results -------------------------------------------------------------------------
    def on_event(self, event: dict[str, Any]) -> None:
        """EventHub subscriber: a run of ours ended; record it and apply success/failure rules."""
        run_id = event.get("run_id") or ""
        if event.get("type") != "run_end" or not run_id.startswith("cron:"):
            return
        job = self.store.get(run_id.split(":")[1])
        if job is None:
            return  # removed while it ran
        status = {"reply": "ok", "error": "error"}.get(event.get("kind", ""), "cancelled")
        result = self.result_of(event.get("session") or job.session, run_id)
        now = self.clock()
        if not self.store.finish(run_id, status, result, now):
            self.store.record(Run(run_id, job.id, None, now, now, status, result))
        if job.last_run_id == run_id:
            job.last_status = status
        if status == "ok":
            job.failures = 0
        elif status == "error":
            self._failed(job, result, now)
        self.store.save(job)
        self._arm(job)
        self._emit("run_end", job, runId=run_id, status=status, result=result[:200])

    def _failed(self, job: Job, result: str, now: float) -> None:
        job.failures += 1
        limit = self.settings.max_failures
        if job.failures >= limit:
            job.enabled, job.state = False, "disabled"
            job.note = f"disabled after {job.failures} failed runs in a row; last error: {result[:200]}"
            log.error("cron job %s %s", job.id, job.note)
            self._emit("disabled", job, reason=job.note)
            self._notify(job, f"Cron job \"{job.name}\" ({job.id}) was {job.note}. Fix the cause, then turn it back "
                              f"on with `clawgate cron enable {job.id}`.")
            return
        delay = min(self.settings.backoff_seconds * 2 ** (job.failures - 1), self.settings.backoff_max_seconds)
        earliest = now + delay
        if job.next_run_at is None:  # a one-shot: retry it after the backoff
            job.next_run_at, job.state, job.note = earliest, "scheduled", f"retrying after failure {job.failures}/{limit}"
        elif job.next_run_at < earliest:
            job.next_run_at = job.plan.first_at_or_after(earliest)
        log.warning("cron job %s failed (%d/%d in a row); next try %s", job.id, job.failures, limit,
                    format_time(job.next_run_at, job.plan.tz))

    # helpers -------------------------------------------------------------------------
    def _arm(self, job: Job, when: float | None = None) -> None:
        if self.scheduler is None or self._closed:
            return
        due = when if when is not None else job.next_run_at
        if not job.enabled or due is None:
            self._disarm(job.id)
            return
        from apscheduler.triggers.date import DateTrigger  # imported with the scheduler, after the ready line

        self.scheduler.add_job(self._fire_async, DateTrigger(datetime.fromtimestamp(due, timezone.utc)), args=[job.id],
                               id=f"cron:{job.id}", name=f"cron {job.name}", replace_existing=True,
                               misfire_grace_time=None, coalesce=True, max_instances=1)

    def _disarm(self, job_id: str) -> None:
        if self.scheduler is None:
            return
        from apscheduler.jobstores.base import JobLookupError

        try:
            self.scheduler.remove_job(f"cron:{job_id}")
        except JobLookupError:
            pass

    def _notify(self, job: Job, text: str) -> None:
        deliver = resolve_deliver(job.deliver, job.session)
        if deliver is None or self.scheduler is None:
            return
        self.bus.publish_outbound(OutboundMessage(channel=deliver["channel"], chat_id=deliver["chat_id"], text=text,
                                                  session_key=job.session, kind="notice",
                                                  metadata={"cron": {"job": job.id, "name": job.name,
                                                                     "schedule": job.plan.describe()}}))

    def _emit(self, action: str, job: Job, **fields: Any) -> None:
        self.events.emit("cron", action=action, job=job.id, name=job.name, enabled=job.enabled,
                         nextRunAt=job.next_run_at, **fields)


def _boot_id() -> str:
    """Which boot of the machine this is; "" where unknown (then every daemon start is a new one)."""
    try:
        with open(BOOT_ID, encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return ""
