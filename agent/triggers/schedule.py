"""Schedules: parse what a user typed into a Schedule, and compute its fire times.

Three kinds: a crontab expression (or macro, or @reboot) with an optional IANA zone, an
`every` interval anchored at the job's creation (so its phase survives restarts), and a
one-shot `at` time. Cron expressions mean what crontab(5) says (crontab.py, on cronsim);
this module validates input and turns every mistake into one line that names the fix.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from tzlocal import get_localzone

from .crontab import REBOOT, CrontabError, canonical, next_fire

Kind = Literal["cron", "every", "at"]
MIN_EVERY = 1.0
MAX_DUE = 10_000  # fire times counted when a long outage is recorded as missed
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
        """A crontab expression or macro; @reboot runs once at each daemon start (see CronService)."""
        expr = " ".join(str(expr).split())
        zone(tz)  # an unknown zone is named before anything else
        if expr.lower() == REBOOT:
            return cls("cron", expr=REBOOT, tz=tz or None)
        try:
            canonical(expr)  # validate now, not at the first run
        except CrontabError as exc:
            raise ScheduleError(str(exc)) from None
        return cls("cron", expr=expr, tz=tz or None)

    @property
    def reboot(self) -> bool:
        """An @reboot job: no fire times of its own; the daemon's start is its one due time."""
        return self.kind == "cron" and self.expr == REBOOT

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
        if self.reboot:
            return None
        try:
            return next_fire(self.expr, zone(self.tz), t)
        except CrontabError as exc:  # a stored expression this version reads differently
            raise ScheduleError(str(exc)) from None

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
        if self.reboot:
            return "@reboot (once at each daemon start)"
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
