"""The heartbeat: keep unfinished work moving without anyone writing, at zero cost when idle.

Every interval it reads HEARTBEAT.md and the task states. Nothing actionable (no line that
is not blank, a heading or a comment, and no in-progress task) means no message and so no
model call at all. Otherwise it publishes one heartbeat turn (prompt mode "heartbeat") into
each owning session that is not busy, delivered to that session's last real chat. A reply
that only says HEARTBEAT_OK is suppressed by a reply filter; a task that makes no progress
over several beats is left alone until it changes, so a stuck task cannot burn tokens.

The decisions (`actionable_lines`, `ActiveHours`, `is_ack`) are pure functions so tests
drive them without clocks or files.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

from clawgate.agent.bus import InboundMessage
from clawgate.config.agents import agent_id_of
from clawgate.config.loader import ConfigError
from clawgate.workspace.fdpath import locate, read_all

from .jobs import CronError, parse_deliver, resolve_deliver
from .schedule import iso_utc, zone

if TYPE_CHECKING:
    from clawgate.agent.core.events import EventHub
    from clawgate.agent.session import SessionManager
    from clawgate.agent.tasks.store import Task, TaskStore
    from clawgate.config.schema import HeartbeatSettings
    from clawgate.agent.bus import MessageBus

log = logging.getLogger(__name__)
ACK = "HEARTBEAT_OK"
LAST = "last"
LAST_CHAT_LOOKS = 20  # sessions read (most recent first) looking for the owner's last chat
PROMPT = (
    "[heartbeat] A scheduled check-in; nobody wrote. Continue the unfinished work below, one step at a "
    "time, and record progress in the task as you verify it. If there is nothing to do right now, "
    f"reply exactly {ACK} and nothing else."
)


def actionable_lines(text: str | None) -> list[str]:
    """Lines of HEARTBEAT.md that ask for something: not blank, headings, comments or empty bullets."""
    lines: list[str] = []
    in_comment = False
    for raw in (text or "").splitlines():
        line = raw.strip()
        if in_comment:
            if "-->" in line:
                in_comment = False
                line = line.split("-->", 1)[1].strip()
            else:
                continue
        while "<!--" in line:
            before, _, after = line.partition("<!--")
            if "-->" in after:
                line = (before + after.split("-->", 1)[1]).strip()
            else:
                line, in_comment = before.strip(), True
        if not line or line.startswith("#") or re.fullmatch(r"[-*+]\s*(\[[ xX]?\])?|[-*_=]{3,}", line):
            continue
        lines.append(line)
    return lines


def is_ack(text: str) -> bool:
    """True when a reply only acknowledges (HEARTBEAT_OK, maybe in markdown or with a full stop)."""
    return re.sub(r"[\s*`~.!:]", "", text or "").strip("_").upper() == ACK


@dataclass(frozen=True)
class ActiveHours:
    """A daily window like 08:00-22:00 in a zone; it may wrap midnight (22:00-06:00)."""

    start: int  # minutes after midnight
    end: int
    tz: str | None = None

    @classmethod
    def parse(cls, spec: str | None, tz: str | None = None) -> "ActiveHours | None":
        if not spec:
            return None
        match = re.fullmatch(r"\s*(\d{1,2}):(\d{2})\s*-\s*(\d{1,2}):(\d{2})\s*", spec)
        if not match:
            raise ValueError(f"invalid active hours {spec!r}; write them like 08:00-22:00")
        h1, m1, h2, m2 = (int(g) for g in match.groups())
        if h1 > 23 or m1 > 59 or h2 > 24 or m2 > 59 or (h2 == 24 and m2):
            raise ValueError(f"invalid active hours {spec!r}; hours are 00-24 and minutes 00-59")
        zone(tz)  # validate the zone now
        return cls(h1 * 60 + m1, h2 * 60 + m2, tz)

    def contains(self, now: float) -> bool:
        local = datetime.fromtimestamp(now, zone(self.tz))
        minute = local.hour * 60 + local.minute
        if self.start == self.end:
            return True
        if self.start < self.end:
            return self.start <= minute < self.end
        return minute >= self.start or minute < self.end


@dataclass
class _Progress:
    mark: tuple[Any, ...]
    beats: int = 0


def progress_mark(task: "Task") -> tuple[Any, ...]:
    """What changes when a task really moves (not `updated_at`: turn counting saves it too)."""
    return (task.status, len(task.steps), tuple(s.status for s in task.steps), len(task.notes), task.result)


class Heartbeat:
    def __init__(self, settings: "HeartbeatSettings", *, workspace: Path, tasks: "TaskStore",
                 sessions: "SessionManager", bus: "MessageBus", events: "EventHub",
                 busy: Callable[[str], bool], clock: Callable[[], float] = time.time,
                 agents: Mapping[str, Path] | None = None,
                 agent_deliver: Mapping[str, tuple[str, str]] | None = None) -> None:
        """`agents`: every other agent's heartbeat session (`agent:<id>:heartbeat`) and its workspace, whose
        HEARTBEAT.md drives that session's beats as the default agent's drives `settings.session`'s.
        `agent_deliver`: an agent's heartbeat session -> (the setting's name, its `heartbeat_deliver`): where
        that session's replies go ("last": the chat the agent's owner last talked to it from)."""
        self.settings = settings
        self.workspace = workspace
        self.checklists: dict[str, Path] = {settings.session: workspace, **(agents or {})}
        self.tasks = tasks
        self.sessions = sessions
        self.bus = bus
        self.events = events
        self.busy = busy
        self.clock = clock
        self.hours = ActiveHours.parse(settings.active_hours, settings.timezone)
        # "last": the session's last chat; otherwise a fixed target (or "none") for the heartbeat session.
        self._fixed = settings.deliver != "last"
        try:
            self._deliver = parse_deliver(settings.deliver) if self._fixed else None
        except CronError as exc:  # a channel that is not installed, or a chat id it cannot have
            raise ConfigError(f"heartbeat.deliver: {exc}") from None
        self._agent_deliver: dict[str, str | None] = {}
        for session, (setting, target) in (agent_deliver or {}).items():
            try:
                self._agent_deliver[session] = LAST if target.strip().lower() == LAST else parse_deliver(target)
            except CronError as exc:
                raise ConfigError(f"{setting}: {exc}") from None
        self._progress: dict[str, _Progress] = {}
        self._last_beat: dict[str, str] = {}
        self.ticks = 0
        self.published = 0
        # Once across a fleet: True for the one process that runs this tick (agent/fleet claims it
        # in Redis); alone, always True.
        self.claim: Callable[[str], bool] = lambda what: True

    # one tick --------------------------------------------------------------------
    async def tick_async(self) -> None:
        try:
            self.tick()
        except Exception:
            log.exception("heartbeat tick failed; the next one runs on schedule")

    def tick(self) -> dict[str, Any]:
        """Decide and publish; returns what happened (also emitted as a `heartbeat` event)."""
        self.ticks += 1
        now = self.clock()
        if not self.claim(f"heartbeat:{int(now // self.settings.interval_seconds)}"):
            return {"status": "skipped", "reason": "another process of the fleet ran this tick"}
        if self.hours is not None and not self.hours.contains(now):
            return self._emit({"status": "skipped", "reason": "outside active hours"})
        checklists = {session: lines for session, root in self.checklists.items()
                      if (lines := actionable_lines(self._read_heartbeat_file(root)))}
        working = [t for t in self.tasks.all() if t.status == "in_progress"]
        if not checklists and not working:
            return self._emit({"status": "idle"})
        owners: dict[str, list["Task"]] = {}
        for task in working:
            owners.setdefault(task.session_key, []).append(task)
        for session in checklists:
            owners.setdefault(session, [])
        sent: list[str] = []
        skipped: dict[str, str] = {}
        for session, tasks in owners.items():
            checklist = checklists.get(session, [])
            reason = self._skip_reason(session, tasks, checklist)
            if reason:
                skipped[session] = reason
                continue
            self._publish(session, tasks, checklist, now)
            sent.append(session)
        return self._emit({"status": "active" if sent else "skipped", "sent": sent, "skipped": skipped})

    def _skip_reason(self, session: str, tasks: list["Task"], checklist: list[str]) -> str | None:
        if self.busy(session):
            return "session busy"
        previous = self._last_beat.get(session)
        if previous and self.bus.is_unanswered(previous):
            return "previous heartbeat not answered yet"
        limit = self.settings.max_beats_without_progress
        if not checklist and limit and all(self._stalled(task, limit) for task in tasks):
            return f"no task progress after {limit} heartbeat(s); waiting for a change or a message"
        return None

    def _stalled(self, task: "Task", limit: int) -> bool:
        seen = self._progress.get(task.id)
        return seen is not None and seen.mark == progress_mark(task) and seen.beats >= limit

    def _publish(self, session: str, tasks: list["Task"], checklist: list[str], now: float) -> None:
        parts = [PROMPT]
        if tasks:
            parts.append("In-progress tasks:\n" + "\n".join(f"- {t.status_line()}" for t in tasks))
        if checklist:
            parts.append("HEARTBEAT.md asks:\n" + "\n".join(f"- {line}" for line in checklist))
        deliver = self._target(session)
        owner = self.sessions.exists(session) and self.sessions.get(session).acts_for_owner()
        metadata: dict[str, Any] = {"mode": "heartbeat", "deliver": deliver, "owner": owner,
                                    "heartbeat": {"tasks": [t.id for t in tasks]}}
        if self.settings.model:  # a cheaper model for every agent's beats (else each agent's own)
            metadata["model"] = self.settings.model
        msg = InboundMessage(channel="heartbeat", chat_id=session, sender_id="heartbeat", session_key=session,
                             text="\n\n".join(parts), id=f"hb:{session}:{iso_utc(now)}", received_at=now, metadata=metadata)
        if self.bus.publish_inbound(msg):
            self.published += 1
            self._last_beat[session] = msg.id
            for task in tasks:
                seen = self._progress.get(task.id)
                if seen is None or seen.mark != progress_mark(task):
                    seen = self._progress[task.id] = _Progress(progress_mark(task))
                seen.beats += 1
            log.info("heartbeat: continuing %d task(s)%s in session %s", len(tasks),
                     " and HEARTBEAT.md" if checklist else "", session)

    def _target(self, session: str) -> dict[str, str] | None:
        """Where a heartbeat reply goes: an agent's heartbeat session's by its `heartbeat_deliver`; the default
        agent's by `heartbeat.deliver`; else (a task's session, "last") the session's last chat."""
        if session in self._agent_deliver:
            target = self._agent_deliver[session]
            return self._owners_last_chat(session) if target == LAST else resolve_deliver(target, session)
        if session == self.settings.session and self._fixed:
            return resolve_deliver(self._deliver, session)
        origin = self.sessions.get(session).last_origin() if self.sessions.exists(session) else None
        return dict(origin) if origin else None  # a copy: the message must not share the session's record

    def _owners_last_chat(self, beat_session: str) -> dict[str, str] | None:
        """The chat the owner of a heartbeat session's agent last talked to it from: the agent's most recently
        written session whose last person heard from is the owner and was in a chat. Never a guest's chat: the
        news of the owner's checklist is the owner's. None (history only) until the owner has talked to it."""
        agent = agent_id_of(beat_session)
        recent = sorted((s for s in self.sessions.summaries()
                         if s["key"] != beat_session and not s["key"].startswith("sub-")
                         and agent_id_of(s["key"]) == agent), key=lambda s: s["updatedAt"], reverse=True)
        for summary in recent[:LAST_CHAT_LOOKS]:
            other = self.sessions.get(summary["key"])
            if other.acts_for_owner() and (origin := other.last_origin()):
                return dict(origin)  # a copy: the message must not share the session's record
        return None

    def _read_heartbeat_file(self, root: Path) -> str:
        """An agent's HEARTBEAT.md through its workspace's folder descriptors: a link out reads as empty, and a
        FIFO planted under that name cannot block the event loop (workspace/fdpath.py)."""
        try:
            with locate(root, "HEARTBEAT.md") as loc:
                return read_all(loc).decode("utf-8")
        except (OSError, ValueError):
            return ""

    # the reply ---------------------------------------------------------------------
    def reply_filter(self, msg: InboundMessage, text: str, kind: str) -> bool:
        """Loop reply filter: a heartbeat's bare HEARTBEAT_OK (or its error) reaches nobody."""
        if msg.metadata.get("mode") != "heartbeat":
            return True
        if kind == "error":
            log.warning("heartbeat turn in %s failed: %s", msg.session_key, text[:200])
            self._emit({"status": "error", "target": msg.session_key, "runId": msg.id, "error": text[:200]})
            return False
        if is_ack(text):
            self._emit({"status": "acknowledged", "target": msg.session_key, "runId": msg.id})
            return False
        self._emit({"status": "delivered", "target": msg.session_key, "runId": msg.id})
        return True

    def _emit(self, payload: dict[str, Any]) -> dict[str, Any]:
        self.events.emit("heartbeat", **payload)
        return payload

