"""A cron job and its delivery target: what is stored, what is shown, what is checked.

Validation lives here so the CLI (with or without a running daemon), the gateway methods
and the agent's `cron` tool accept exactly the same input and say the same one line when
it is wrong.
"""

from __future__ import annotations

import functools
import re
import time
import uuid
from dataclasses import asdict, dataclass, field
from importlib.metadata import entry_points
from typing import Any

from clawgate.agent.core.errors import DomainError
from clawgate.agent.session import InvalidSessionKey, check_session_key
from clawgate.config.access import ACCOUNT_NAME, ACCOUNT_NAME_RULE, DEFAULT_ACCOUNT, split_channel_name
from clawgate.config.agents import AGENT_PREFIX, agent_id_of, agent_of_key

from .schedule import Schedule, ScheduleError, format_time

KNOWN_CHANNELS = ("telegram", "gateway")
CHANNEL_GROUP = "clawgate.channels"  # the chat channels' entry points (channels/kit/registry.py)
DELIVER_HINT = "use <channel>:<chat id> (telegram:<chat_id>, slack:<channel id>, ...), gateway[:<session>] or none"
_SESSION = re.compile(r"^[\w.:@/-]{1,200}$")
_CHAT = re.compile(r"^[\w.:@!+=/-]{1,200}$")  # another channel's chat id: Discord, Slack, Matrix rooms, addresses


@functools.cache
def known_channels() -> frozenset[str]:
    """The built-ins and every installed chat channel, by name: read from the installed distributions'
    entry points (nothing is imported), so a plugin channel's chats can receive cron results."""
    return frozenset({*KNOWN_CHANNELS, *(ep.name for ep in entry_points(group=CHANNEL_GROUP))})


class CronError(DomainError):
    """A user-fixable problem with a job request (bad expression, zone, time, unknown id)."""

    def __init__(self, message: str, code: str = "invalid_params") -> None:
        super().__init__(message)
        self.code = code


def parse_deliver(target: str | None) -> str | None:
    """Normalise a delivery target; None means 'deliver nowhere' (history only)."""
    if target is None:
        return None
    text = str(target).strip()
    if text.lower() in ("", "none", "no", "off"):
        return None
    named, sep, chat = text.partition(":")
    named, chat = named.strip().lower(), chat.strip()
    channel, account = split_channel_name(named)  # an account of a channel: telegram.work:<chat id>
    if channel not in known_channels():
        raise CronError(f"invalid delivery target {target!r}: unknown channel {channel!r} (installed: "
                        f"{', '.join(sorted(known_channels()))}); {DELIVER_HINT}")
    if named != channel and (channel == "gateway" or account == DEFAULT_ACCOUNT or not ACCOUNT_NAME.match(account)):
        raise CronError(f"invalid delivery target {target!r}: {named!r} names no account of {channel} (an account "
                        f"is <channel>.<account>, its name {ACCOUNT_NAME_RULE}); {DELIVER_HINT}")
    if channel == "gateway":
        if sep and not _SESSION.match(chat):
            raise CronError(f"invalid delivery target {target!r}: bad session name; {DELIVER_HINT}")
        return f"gateway:{chat}" if chat else "gateway"
    if channel == "matrix":  # a room id: !opaque:server, or !opaque alone (room version 12 on)
        if not re.fullmatch(r"![^\s:/]{1,255}(:[A-Za-z0-9.\-]{1,255}(:\d{1,5})?)?", chat):
            raise CronError(f"invalid delivery target {target!r}: a Matrix room id looks like "
                            f"!abc123:example.org; {DELIVER_HINT}")
        return f"{named}:{chat}"
    if channel != "telegram":
        if not _CHAT.match(chat):
            raise CronError(f"invalid delivery target {target!r}: give {channel}:<chat id>; {DELIVER_HINT}")
        return f"{named}:{chat}"
    if not re.fullmatch(r"-?\d{1,20}|@\w{3,64}", chat):
        raise CronError(f"invalid delivery target {target!r}: a Telegram chat id is a number (or @channel); {DELIVER_HINT}")
    return f"{named}:{chat}"


def resolve_deliver(target: str | None, session: str) -> dict[str, str] | None:
    """The loop's `deliver` metadata for a stored target: where the reply goes."""
    if target is None:
        return None
    channel, _, chat = target.partition(":")
    return {"channel": channel, "chat_id": chat or session}


def check_session(session: str) -> str:
    """A job's session: the cron naming rule, then the rule every session key obeys."""
    if not _SESSION.match(session):
        raise CronError(f"invalid session {session[:80]!r}; use letters, digits and . : @ / - _ (at most 200)")
    try:
        return check_session_key(session)
    except InvalidSessionKey as exc:
        raise CronError(f"invalid session: {exc.message}") from None


@dataclass
class Job:
    name: str
    message: str
    schedule: dict[str, Any]
    session: str = ""
    deliver: str | None = None
    grace_seconds: float = 3600.0
    enabled: bool = True
    id: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    created_at: float = field(default_factory=time.time)
    updated_at: float = field(default_factory=time.time)
    next_run_at: float | None = None
    failures: int = 0            # consecutive failed runs
    last_run_id: str | None = None
    last_status: str | None = None
    state: str = "scheduled"     # scheduled | done (a one-shot that ran) | disabled
    note: str = ""               # why it is disabled or done
    created_by: str = ""         # "" the owner (CLI, gateway, the owner's chats); else "<channel>:<user>", a guest
    reboot_at: float | None = None  # @reboot: the daemon start it was last due for (see CronService.start)
    # Untrusted content the creating run had taken in ("" none): the job's runs start tainted (agent/trust/taint.py).
    tainted: str = ""

    def __post_init__(self) -> None:
        if not self.session:
            self.session = f"cron:{self.id}"

    @property
    def plan(self) -> Schedule:
        return Schedule.from_dict(self.schedule)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Job":
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})

    def public(self) -> dict[str, Any]:
        """What clients see: the stored job plus readable schedule and times."""
        plan = self.plan
        return {
            "id": self.id, "name": self.name, "message": self.message, "schedule": self.schedule,
            "agent": agent_id_of(self.session),  # whose job it is (None: the default agent's); its session says
            "describe": plan.describe(), "session": self.session, "deliver": self.deliver or "none",
            "enabled": self.enabled, "state": self.state, "note": self.note,
            "graceSeconds": self.grace_seconds, "nextRunAt": self.next_run_at,
            "nextRun": format_time(self.next_run_at, plan.tz) if self.next_run_at else None,
            "failures": self.failures, "lastRunId": self.last_run_id, "lastStatus": self.last_status,
            "createdAt": self.created_at, "createdBy": self.created_by or "owner", "tainted": self.tainted or None,
        }


def build_schedule(*, cron: str | None = None, tz: str | None = None, every: str | float | None = None,
                   at: str | float | None = None, now: float | None = None) -> Schedule:
    """Exactly one of cron / every / at; --tz only with cron or at."""
    given = [name for name, value in (("cron", cron), ("every", every), ("at", at)) if value not in (None, "")]
    if len(given) != 1:
        raise CronError("give exactly one schedule: --cron EXPR [--tz ZONE], --every DURATION or --at TIME"
                        + (f" (got {', '.join(given)})" if given else ""))
    now = time.time() if now is None else now
    try:
        if cron:
            return Schedule.cron(cron, tz)
        if tz:
            Schedule.cron("0 0 * * *", tz)  # validate the zone
        if every is not None and every != "":
            if tz:
                raise CronError("--tz applies to --cron and --at only; an interval has no time zone")
            return Schedule.every(every, anchor=now)
        assert at is not None
        return Schedule.once(at, tz, now=now)
    except ScheduleError as exc:
        raise CronError(str(exc)) from None


def new_job(*, message: str, schedule: Schedule, name: str | None = None, session: str | None = None,
            deliver: str | None = None, grace_seconds: float, now: float | None = None, created_by: str = "",
            tainted: str = "", agent: str | None = None) -> Job:
    """`agent`: the agent (other than the default) whose session the job runs in; its key carries it."""
    message = (message or "").strip()
    if not message:
        raise CronError("a job needs a message (the task text); give --message TEXT")
    if len(message) > 20_000:
        raise CronError("the message is longer than 20000 characters; shorten it or point to a workspace file")
    if grace_seconds < 0:
        raise CronError("the grace window cannot be negative; give e.g. --grace 1h")
    now = time.time() if now is None else now
    job = Job(name=(name or message.splitlines()[0])[:80].strip() or "job", message=message,
              schedule=schedule.to_dict(), deliver=parse_deliver(deliver), grace_seconds=grace_seconds,
              created_at=now, updated_at=now, created_by=created_by, tainted=tainted)
    if session:
        job.session = check_session(session.strip())
    if agent and agent_of_key(job.session)[0] is None:
        job.session = check_session(f"{AGENT_PREFIX}{agent}:{job.session}")
    job.next_run_at = schedule.first_run(now)
    return job
