"""Schedules: parse what a user typed into a Schedule, and compute its fire times.

Three kinds: a crontab expression with an optional IANA zone, an `every` interval anchored
at the job's creation (so its phase survives restarts), and a one-shot `at` time. The
arithmetic comes from apscheduler's triggers (cron fields, zones, DST); this module only
validates input and turns every mistake into one line that names the fix.

Day-of-week numbers are read the standard crontab way (0 and 7 are Sunday) and rewritten
as names, because apscheduler 3 counts 0 as Monday; docs and examples use names.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from apscheduler.triggers.cron import CronTrigger
from tzlocal import get_localzone

Kind = Literal["cron", "every", "at"]
MIN_EVERY = 1.0
MAX_DUE = 10_000  # fire times counted when a long outage is recorded as missed
CRON_HINT = "use 5 fields 'minute hour day month day-of-week', e.g. '0 9 * * mon-fri'"
DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")  # crontab order: 0 = Sunday
APS_DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")  # apscheduler 3 order: 0 = Monday
_UNITS = {
    "s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1,
    "m": 60, "min": 60, "mins": 60, "minute": 60, "minutes": 60,
    "h": 3600, "hr": 3600, "hrs": 3600, "hour": 3600, "hours": 3600,
    "d": 86400, "day": 86400, "days": 86400, "w": 604800, "week": 604800, "weeks": 604800,
}
_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([a-z]*)")


class ScheduleError(ValueError):
    """Invalid schedule input; the message is one line fit to show the user."""


def zone(name: str | None) -> Any:
    """The tzinfo for an IANA name; None means the host's local zone."""
    if not name:
        return get_localzone()
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ScheduleError(f"unknown time zone {name!r}; use an IANA name like Europe/Berlin or America/New_York") from None


def parse_duration(text: str | float | int, what: str = "duration") -> float:
    """'90s', '5m', '1h30m', '2d', '1.5h' or a plain number of seconds."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        seconds = float(text)
    else:
        raw = str(text).strip().lower()
        try:
            seconds = float(raw)
        except ValueError:
            seconds, pos = 0.0, 0
            squeezed = raw.replace(" ", "")
            for match in _PART.finditer(squeezed):
                if match.start() != pos or match.group(2) not in _UNITS:
                    raise ScheduleError(f"invalid {what} {text!r}; write it like 90s, 5m, 1h30m or 2d") from None
                seconds += float(match.group(1)) * _UNITS[match.group(2)]
                pos = match.end()
            if pos != len(squeezed) or not squeezed:
                raise ScheduleError(f"invalid {what} {text!r}; write it like 90s, 5m, 1h30m or 2d") from None
    if not math.isfinite(seconds) or seconds < 0:
        raise ScheduleError(f"invalid {what} {text!r}; it must be a positive length of time like 5m")
    return seconds


def _dow_names(field: str) -> str:
    """Rewrite a crontab day-of-week field as a list of day names, read the crontab way (0/7 = Sunday)."""
    if field in ("*", "?"):
        return "*"
    days: set[int] = set()
    for item in field.split(","):
        rng, _, step_text = item.partition("/")
        step = int(step_text) if step_text.isdigit() and int(step_text) > 0 else None
        if step_text and step is None:
            raise ScheduleError(f"invalid day-of-week {field!r}: bad step {step_text!r}; {CRON_HINT}")
        if rng == "*":
            lo, hi = 0, 6
        else:
            a, _, b = rng.partition("-")
            lo = _day(a, field)
            hi = _day(b, field) if b else (6 if step else lo)
            if hi == 0 and b.strip() == "7":
                hi = 7
            if lo > hi:
                raise ScheduleError(f"invalid day-of-week range {rng!r}; write it low-high, e.g. mon-fri")
        days.update(d % 7 for d in range(lo, hi + 1, step or 1))
    return _compress(sorted(APS_DAYS.index(DAYS[d]) for d in days))


def _compress(indexes: list[int]) -> str:
    """Day indexes in apscheduler's order (0 = Monday) as 'mon-fri,sun'."""
    parts: list[str] = []
    i = 0
    while i < len(indexes):
        j = i
        while j + 1 < len(indexes) and indexes[j + 1] == indexes[j] + 1:
            j += 1
        if j - i >= 2:
            parts.append(f"{APS_DAYS[indexes[i]]}-{APS_DAYS[indexes[j]]}")
        else:
            parts.extend(APS_DAYS[k] for k in indexes[i:j + 1])
        i = j + 1
    return ",".join(parts)


def _day(token: str, field: str) -> int:
    token = token.strip().lower()
    if token.isdigit() and 0 <= int(token) <= 7:
        return 0 if int(token) == 7 else int(token)
    if token[:3] in DAYS and len(token) >= 3:
        return DAYS.index(token[:3])
    raise ScheduleError(f"invalid day-of-week {field!r}; use names sun..sat (or numbers 0-7, 0 and 7 = Sunday)")


@dataclass(frozen=True)
class Schedule:
    kind: Kind
    expr: str = ""           # cron
    tz: str | None = None    # cron and at: the zone it was written in (None = host's)
    seconds: float = 0.0     # every
    anchor: float = 0.0      # every: fire times are anchor + k*seconds, k >= 1
    at: float = 0.0          # at: epoch seconds

    # construction --------------------------------------------------------------
    @classmethod
    def cron(cls, expr: str, tz: str | None = None) -> "Schedule":
        expr = " ".join(str(expr).split())
        fields = expr.split(" ")
        if len(fields) != 5:
            raise ScheduleError(f"invalid cron expression {expr!r}: {len(fields)} field(s); {CRON_HINT}")
        fields[4] = _dow_names(fields[4])
        schedule = cls("cron", expr=" ".join(fields), tz=tz or None)
        schedule._cron_trigger()  # validate now, not at the first run
        return schedule

    @classmethod
    def every(cls, interval: str | float | int, anchor: float | None = None) -> "Schedule":
        seconds = parse_duration(interval, "interval")
        if seconds < MIN_EVERY:
            raise ScheduleError(f"interval {interval!r} is too short; the minimum is {MIN_EVERY:g}s")
        return cls("every", seconds=seconds, anchor=time.time() if anchor is None else anchor)

    @classmethod
    def once(cls, when: str | float, tz: str | None = None, now: float | None = None) -> "Schedule":
        """An ISO-8601 time ('2026-03-01T09:00', with or without offset), 'HH:MM' (next one) or '+20m'."""
        now = time.time() if now is None else now
        tzinfo = zone(tz)
        if isinstance(when, (int, float)) and not isinstance(when, bool):
            at = float(when)
        else:
            text = str(when).strip()
            if text.startswith("+") or text.lower().startswith("in "):
                at = now + parse_duration(text.lstrip("+").removeprefix("in ").strip(), "delay")
            elif re.fullmatch(r"\d{1,2}:\d{2}", text):
                hh, mm = (int(p) for p in text.split(":"))
                if hh > 23 or mm > 59:
                    raise ScheduleError(f"invalid time {text!r}; use HH:MM between 00:00 and 23:59")
                local = datetime.fromtimestamp(now, tzinfo)
                target = local.replace(hour=hh, minute=mm, second=0, microsecond=0)
                if target.timestamp() <= now:
                    target = (local + timedelta(days=1)).replace(hour=hh, minute=mm, second=0, microsecond=0)
                at = target.timestamp()
            else:
                try:
                    parsed = datetime.fromisoformat(text)
                except ValueError:
                    raise ScheduleError(f"invalid time {text!r}; use ISO-8601 like 2026-03-01T09:00 "
                                        "(optionally with +01:00), HH:MM, or +20m") from None
                at = (parsed if parsed.tzinfo else parsed.replace(tzinfo=tzinfo)).timestamp()
        if at <= now:
            shown = datetime.fromtimestamp(at, tzinfo).isoformat(timespec="seconds")
            raise ScheduleError(f"time {shown} is in the past; give a future time")
        return cls("at", at=at, tz=tz or None)

    def to_dict(self) -> dict[str, Any]:
        if self.kind == "cron":
            return {"kind": "cron", "expr": self.expr, "tz": self.tz}
        if self.kind == "every":
            return {"kind": "every", "seconds": self.seconds, "anchor": self.anchor}
        return {"kind": "at", "at": self.at, "tz": self.tz}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Schedule":
        kind = data.get("kind")
        if kind == "cron":
            return cls("cron", expr=data["expr"], tz=data.get("tz"))
        if kind == "every":
            return cls("every", seconds=float(data["seconds"]), anchor=float(data["anchor"]))
        if kind == "at":
            return cls("at", at=float(data["at"]), tz=data.get("tz"))
        raise ScheduleError(f"unknown schedule kind {kind!r}")

    # arithmetic ----------------------------------------------------------------
    def _cron_trigger(self) -> CronTrigger:
        try:
            return CronTrigger.from_crontab(self.expr, timezone=zone(self.tz))
        except ScheduleError:
            raise
        except (ValueError, TypeError) as exc:
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise ScheduleError(f"invalid cron expression {self.expr!r}: {reason}; {CRON_HINT}") from None

    def first_run(self, now: float) -> float | None:
        """When a new (or re-enabled) job first fires."""
        return self.at if self.kind == "at" else self.next_after(now)

    def next_after(self, t: float) -> float | None:
        """The first fire time strictly after `t`; None when there is none (a one-shot)."""
        if self.kind == "at":
            return None
        if self.kind == "every":
            k = max(1, math.floor((t - self.anchor) / self.seconds) + 1)
            return self.anchor + k * self.seconds
        trigger = self._cron_trigger()
        after = datetime.fromtimestamp(t, timezone.utc) + timedelta(microseconds=1)
        nxt = trigger.get_next_fire_time(None, after.astimezone(trigger.timezone))
        return nxt.timestamp() if nxt else None

    def first_at_or_after(self, t: float) -> float | None:
        """The first fire time >= t (used to push a failing job back by its backoff)."""
        return self.next_after(t - 1e-3) if self.kind != "at" else t

    def due_times(self, start: float, now: float) -> list[float]:
        """Fire times from `start` (a due time) up to `now`, at most MAX_DUE of them."""
        if start > now:
            return []
        times = [start]
        nxt = self.next_after(start)
        while nxt is not None and nxt <= now and len(times) < MAX_DUE:
            times.append(nxt)
            nxt = self.next_after(nxt)
        return times

    def describe(self) -> str:
        if self.kind == "cron":
            return f"cron '{self.expr}' ({self.tz or 'local time'})"
        if self.kind == "every":
            return f"every {format_duration(self.seconds)}"
        return f"at {format_time(self.at, self.tz)}"


def format_duration(seconds: float) -> str:
    if seconds < 60 or seconds % 60:
        return f"{seconds:g}s"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def format_time(t: float | None, tz: str | None = None) -> str:
    if t is None:
        return "-"
    try:
        tzinfo = zone(tz)
    except ScheduleError:
        tzinfo = timezone.utc
    return datetime.fromtimestamp(t, tzinfo).isoformat(timespec="seconds")


def iso_utc(t: float) -> str:
    """A compact, stable UTC stamp for run ids (millisecond precision)."""
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y%m%dT%H%M%S.%f")[:-3] + "Z"
