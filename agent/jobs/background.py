"""Background jobs: slow work that runs off the session's lane and reports back into the conversation.

Why: a session's lane is strictly serial, so a tool call that takes minutes (a test suite, a
build) would keep the person from chatting and the heartbeat from running. A tool may instead
hand its already-running work here and return at once ("running in the background as job bg-3").

A job's life, each step recorded before the next (docs/background.md):
1. `adopt`: the work (an asyncio task the tool started, after its approval) gets an id, an entry in
   the durable index (background_index.py) and a `bg_job_start` event record in the session log;
   `bg_job_start` goes to the EventHub (gateway clients, Telegram's progress display).
2. It ends, fails, times out or is cancelled: a `bg_job_end` event record with its result, the
   index entry marked ended, `bg_job_end` on the hub. If the session is idle, a wake-up message
   goes on the bus, acting for the same person with the same rights (a guest's job wakes a guest
   turn), delivered where the job was started.
3. Before the session's next model call (`inject`, a ContextBuilder injector), the result is
   appended as a note to the latest user message: new content after the tool call's own result,
   so every tool_use keeps its one tool_result. The index entry is then dropped.

A restart finds the index: a job still marked running is reported to its session as interrupted
(outcome unknown, never re-run: it may have side effects), its leftover process killed; an ended
job whose result never reached the conversation is woken again. A wake-up whose result another run
already delivered is skipped without a model call (`skip_wake`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from .background_index import Entry, Index, kill_leftover
from ..bus import InboundMessage, Intake
from ..context.shared_view import opening_record, person_at, run_person
from ..core.errors import WriteRefused
from ..session import LLM_KINDS, Session, SessionManager
from ..tools.handoff import JobLimit, ProcessInfo

if TYPE_CHECKING:
    from clawgate.config.schema import BackgroundSettings

    from ..core.audit import AuditLog
    from ..core.events import EventHub

log = logging.getLogger(__name__)
CHANNEL = "background"  # the channel name of wake-up messages
RESULT_CAP = 64_000  # as for a foreground tool result
# Channels that are triggers, not people: a job started from one has nobody to deliver to by itself.
_NOT_PEOPLE = ("heartbeat", "recovery", "cron", CHANNEL)
INTERRUPTED = ("the daemon {how} while it ran, so its outcome is unknown. It was NOT re-run because it may have "
               "side effects: check its effects (files, output) before running it again.")


@dataclass
class Job:
    entry: Entry
    task: "asyncio.Task[str]"
    process: ProcessInfo | None
    clock_start: float  # monotonic, for durations


class BackgroundJobs:
    def __init__(self, settings: "BackgroundSettings", *, index_path: Path, sessions: SessionManager,
                 events: "EventHub", busy: Callable[[str], bool], audit: "AuditLog | None" = None,
                 fsync: bool = True) -> None:
        self.settings = settings
        self.sessions = sessions
        self.events = events
        self.busy = busy
        self.audit = audit
        self.intake: "Intake | None" = None  # the bus, set by the composition root before start
        self.index = Index.load(index_path, fsync=fsync)
        self._running: dict[str, Job] = {}
        self._woken: set[str] = set()  # jobs whose wake-up is queued in this process

    # room ----------------------------------------------------------------------------------
    def refusal(self, session_key: str) -> str | None:
        """Why another job cannot start now (one line naming the cap), or None."""
        mine = [j.entry.id for j in self._running.values() if j.entry.session == session_key]
        if len(mine) >= self.settings.max_per_session:
            return (f"this chat already runs {len(mine)} background jobs ({', '.join(mine)}), the limit of "
                    "background.max_per_session")
        if len(self._running) >= self.settings.max_jobs:
            return f"{len(self._running)} background jobs are running, the limit of background.max_jobs"
        return None

    # start -----------------------------------------------------------------------------------
    def adopt(self, task: "asyncio.Task[str]", *, session_key: str, kind: str, summary: str, sender_id: str,
              owner: bool, deliver: dict[str, str] | None, process: ProcessInfo | None = None,
              user: str = "") -> Entry:
        """Take over running work; raises JobLimit when the caps are reached (the caller still owns
        the task then). The start is in the index and the session log before this returns."""
        if (refusal := self.refusal(session_key)) is not None:
            raise JobLimit(refusal)
        if deliver is not None and deliver.get("channel") in _NOT_PEOPLE:
            deliver = None
        entry = Entry(id=self.index.new_id(), session=session_key, kind=kind, summary=summary[:300], sender=sender_id,
                      owner=owner, deliver=deliver, started=time.time(), user=user,
                      pid=process.pid if process else None, pid_start=process.start if process else None)
        self.index.jobs[entry.id] = entry
        self.index.save()
        self._append(session_key, "bg_job_start", job=entry.id, tool=kind, summary=entry.summary)
        job = Job(entry, task, process, time.monotonic())
        self._running[entry.id] = job
        task.add_done_callback(lambda t, job_id=entry.id: self._ended(job_id, t))
        self.events.emit("bg_job_start", session=session_key, job=entry.id, tool=kind, summary=entry.summary)
        return entry

    # end -------------------------------------------------------------------------------------
    def _ended(self, job_id: str, task: "asyncio.Task[str]") -> None:
        job = self._running.get(job_id)
        if job is None:
            return  # already finished by cancel_session or close
        if task.cancelled():
            self._finish(job, "cancelled", "was cancelled; its process was killed. What it did until then stays done.")
            return
        exc = task.exception()
        if exc is None:
            status = "done"
            if job.process is not None and job.process.timed_out:
                status = "timed_out"
            self._finish(job, status, "ended:\n" + task.result(), wake=True)
        else:
            render = getattr(exc, "render", None)
            text = render() if callable(render) else f"error: {type(exc).__name__}: {exc}"
            if not callable(render):
                log.error("background job %s failed", job_id, exc_info=exc)
            self._finish(job, "error", "failed:\n" + text, wake=True)

    def _finish(self, job: Job, status: str, what: str, *, wake: bool = False) -> None:
        """Record the end (session log, then index), tell the hub, wake an idle session."""
        entry = job.entry
        self._running.pop(entry.id, None)
        duration = time.monotonic() - job.clock_start
        text = f"[runtime] Background job {entry.id} ({entry.summary}) {what}"
        if len(text) > RESULT_CAP:
            text = text[:RESULT_CAP] + f"\n[… truncated {len(text) - RESULT_CAP} characters]"
        exit_code = job.process.exit_code if job.process else None
        self._append(entry.session, "bg_job_end", job=entry.id, status=status, exit=exit_code,
                     duration_ms=round(duration * 1000), text=text)
        entry.state = "ended"
        self.index.save()
        if self.audit is not None:
            self.audit.record(user=entry.sender, session=entry.session, tool=f"{entry.kind} (background {entry.id})",
                              args={"summary": entry.summary}, status=status, duration_ms=duration * 1000)
        self.events.emit("bg_job_end", session=entry.session, job=entry.id, tool=entry.kind, summary=entry.summary,
                         status=status, exit=exit_code, duration_ms=round(duration * 1000))
        if wake and not self.busy(entry.session):
            self._wake(entry)

    # the conversation --------------------------------------------------------------------------
    def inject(self, session: Session) -> None:
        """ContextBuilder injector: ended jobs' results join the latest user message (never between
        a tool_use and its tool_result), each once, before the session's next model call."""
        # A job's result joins only a run of the person who started it (a conversation several people share:
        # context/shared_view.py); another person's run leaves it for the wake-up after that run.
        person = run_person(session)
        ended = [e for e in self.index.jobs.values() if e.session == session.key and e.state == "ended"
                 and job_person(session, e.id) == person]
        if not ended or _last_llm_kind(session) not in ("user", "tool_results", "note"):
            return
        for entry in sorted(ended, key=lambda e: e.started):
            if not _noted(session, entry.id):
                end = _end_record(session, entry.id)
                text = end["text"] if end else f"[runtime] Background job {entry.id} ({entry.summary}) ended; its result was lost."
                session.append("note", durable=True, text=text, job=entry.id)
            self.index.drop(entry.id)
        self.index.save()

    def skip_wake(self, session: Session, msg: InboundMessage) -> bool:
        """Loop gate: a wake-up whose job result already reached the conversation needs no turn."""
        if msg.channel != CHANNEL or msg.id in session.inbound_seqs:
            return False
        entry = self.index.jobs.get(str(msg.metadata.get("bg_job")))
        return entry is None or entry.state != "ended" or entry.session != session.key

    async def after_run(self, session: Session, msg: InboundMessage) -> None:
        """A result that arrived during a run's last model call must not wait for the next message."""
        for entry in list(self.index.jobs.values()):
            if entry.session == session.key and entry.state == "ended" and not entry.quiet:
                self._wake(entry)

    def _wake(self, entry: Entry) -> None:
        if self.intake is None or entry.id in self._woken:
            return
        self._woken.add(entry.id)
        # the run that tells the result is the starter's: their workspace, their view of the conversation;
        # kept on the entry at adoption ("" is the owner, or an entry from before it was kept: read the log)
        person: str | None = entry.user or None
        if person is None:
            try:
                person = job_user(self.sessions.get(entry.session), entry.id)
            except Exception:
                log.exception("could not read session %s to find whose job %s is", entry.session, entry.id)
        self.intake.publish_inbound(InboundMessage(
            id=f"bg:{entry.id}:{int(entry.started * 1000)}", channel=CHANNEL, chat_id=entry.session,
            sender_id=entry.sender, session_key=entry.session,
            text=(f"[clawgate] Background job {entry.id} ({entry.summary}) has ended; its result is attached "
                  "below. Tell the user briefly what came of it, and go on if the work needs a next step."),
            # the result it reads is a program's output (untrusted data): the run starts tainted; "user":
            # the person whose run started the job, so the wake-up acts (and is stopped) as theirs even
            # when someone else spoke last in a shared conversation
            metadata={"deliver": entry.deliver, "owner": entry.owner, "bg_job": entry.id,
                      **({"user": person} if person is not None else {}),
                      "tainted": f"background job {entry.id} result ({entry.summary[:60]})"},
        ))

    # control ---------------------------------------------------------------------------------
    def running(self, session_key: str | None = None) -> list[dict[str, Any]]:
        """Running jobs for status displays (oldest first)."""
        now = time.monotonic()
        return [{"id": j.entry.id, "session": j.entry.session, "tool": j.entry.kind, "summary": j.entry.summary,
                 "runningSeconds": round(now - j.clock_start, 1)}
                for j in sorted(self._running.values(), key=lambda j: j.clock_start)
                if session_key is None or j.entry.session == session_key]

    def cancel_session(self, session_key: str, why: str, *, forget: bool = False,
                       user: str | None = None) -> list[str]:
        """Cancel the session's running jobs (`why`: "by /stop", …); their end is recorded at once,
        their processes are killed as their tasks unwind. The model is told at its next call, but
        nobody is woken: the person asked for it. `forget`: the conversation is being archived, so
        nothing of this session is left to tell. `user`: only the jobs this person's runs started (a
        guest's /stop in a shared conversation); None: all of them. Returns the ids."""
        cancelled = [job for job in self._running.values() if job.entry.session == session_key
                     and (user is None or job.entry.person() == user)]
        for job in cancelled:
            job.entry.quiet = True
            self._finish(job, "cancelled", f"was cancelled {why}; its process was killed. "
                                           "What it did until then stays done.")
            job.task.cancel()
        if forget:
            for entry in [e for e in self.index.jobs.values() if e.session == session_key]:
                self.index.drop(entry.id)
            self.index.save()
        return [job.entry.id for job in cancelled]

    # restart and shutdown -----------------------------------------------------------------------
    def recover(self, include: Callable[[str], bool] = lambda session: True) -> list[str]:
        """On start: report jobs a crash interrupted, wake sessions with undelivered results.
        `include`: the sessions to recover (a fleet's worker: those of a partition it just took)."""
        self.index.take(include)
        reported: list[str] = []
        dropped = False
        for entry in [e for e in self.index.jobs.values() if include(e.session)]:
            if entry.id in self._running:
                continue  # running here (a partition taken back): nothing was interrupted
            if entry.state == "running":
                how = "stopped or crashed"
                if kill_leftover(entry):
                    how += " (its process was still running after the restart and was stopped)"
                text = f"[runtime] Background job {entry.id} ({entry.summary}) was interrupted: " + \
                    INTERRUPTED.format(how=how)
                self._append(entry.session, "bg_job_end", job=entry.id, status="interrupted", exit=None, text=text)
                entry.state = "ended"
                self.events.emit("bg_job_end", session=entry.session, job=entry.id, tool=entry.kind,
                                 summary=entry.summary, status="interrupted", exit=None, duration_ms=None)
                reported.append(entry.id)
            elif self.sessions.exists(entry.session) and _noted(self.sessions.get(entry.session), entry.id):
                self.index.drop(entry.id)  # delivered just before the crash; only the index lagged
                dropped = True
                continue
            if not entry.quiet:
                self._wake(entry)
        if reported or dropped or self.index.shared:  # unchanged: no write (and no fsync) at every start
            self.index.save()
        return reported

    def release(self, include: Callable[[str], bool]) -> list[str]:
        """These sessions' work moved to another process (a fleet's partition was lost): stop their
        jobs here without recording anything (this process may no longer write for them); the next
        holder finds them in the index and reports them as interrupted. Returns the ids."""
        stopped = [job for job in self._running.values() if include(job.entry.session)]
        for job in stopped:
            self._running.pop(job.entry.id, None)
            job.task.cancel()  # kills its process as the task unwinds
        for entry in self.index.release(include):
            self._woken.discard(entry.id)
        return [job.entry.id for job in stopped]

    async def close(self) -> None:
        """At shutdown: kill the jobs, record them as interrupted; the next start wakes their sessions."""
        jobs = list(self._running.values())
        for job in jobs:
            self._finish(job, "interrupted", "was interrupted: " + INTERRUPTED.format(how="was stopped"))
            job.task.cancel()
        await asyncio.gather(*(job.task for job in jobs), return_exceptions=True)

    # helpers ---------------------------------------------------------------------------------
    def _append(self, key: str, name: str, **fields: Any) -> None:
        try:
            self.sessions.get(key).append("event", durable=True, name=name, **fields)
        except WriteRefused as exc:  # a fleet worker that lost the session: its new holder records it
            log.warning("%s not recorded: %s", name, exc)
        except Exception:
            log.exception("could not record %s in session %s", name, key)


def _last_llm_kind(session: Session) -> str | None:
    for record in reversed(session.records):  # stops at the newest conversation record
        if record["kind"] in LLM_KINDS:
            return str(record["kind"])
    return None


def _job_start(session: Session, job_id: str) -> int | None:
    for index in range(len(session.records) - 1, -1, -1):
        record = session.records[index]
        if record["kind"] == "event" and record.get("name") == "bg_job_start" and record.get("job") == job_id:
            return index
    return None


def job_person(session: Session, job_id: str) -> str | None:
    """Whose run started the job: the person of the run its bg_job_start record sits in."""
    index = _job_start(session, job_id)
    return run_person(session) if index is None else person_at(session, index)  # no start in the log: as before


def job_user(session: Session, job_id: str) -> str | None:
    """The workspace key the starting run recorded (None: not recorded; the wake's run then decides as before)."""
    index = _job_start(session, job_id)
    opening = None if index is None else opening_record(session, index)
    user = None if opening is None else opening.get("user")
    return user if isinstance(user, str) else None


def _noted(session: Session, job_id: str) -> bool:
    return any(r["kind"] == "note" and r.get("job") == job_id for r in reversed(session.records))


def _end_record(session: Session, job_id: str) -> dict[str, Any] | None:
    for record in reversed(session.records):
        if record["kind"] == "event" and record.get("name") == "bg_job_end" and record.get("job") == job_id:
            return record
    return None
