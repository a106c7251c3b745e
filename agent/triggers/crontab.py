"""Crontab expressions with crontab(5)'s meaning; cronsim does the arithmetic.

cronsim (https://github.com/cuu508/cronsim) follows Debian's cron, the reference for
crontab(5): day-of-month and day-of-week are ORed when both are restricted (neither starts
with `*`), `L`, `LW`, `5L` and `mon#2` are understood, and daylight saving changes are
handled the way cron does (see `next_fire`). It does not read the `@` macros, `?` or ranges
that wrap around (`fri-sun`, `22-2`), which crontab generators hand out; this module
rewrites those into the plain expression they stand for before cronsim sees them, and turns
cronsim's terse errors into one line naming the field and its allowed values.
"""

from __future__ import annotations

from datetime import datetime, tzinfo
from functools import lru_cache


CRON_HINT = "use 5 fields 'minute hour day month day-of-week', e.g. '0 9 * * mon-fri', or a macro like @daily"
REBOOT = "@reboot"
# crontab(5): the macros and the five fields each one stands for
MACROS = {
    "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
}
FIELDS = ("minute", "hour", "day-of-month", "month", "day-of-week")
_ALLOWED = {
    "minute": "0-59", "hour": "0-23", "day-of-month": "1-31, L or LW", "month": "1-12 or jan-dec",
    "day-of-week": "0-7 or sun-sat (0 and 7 = Sunday), 5L = last Friday, mon#2 = second Monday",
}
_BOUNDS = {"minute": (0, 59), "hour": (0, 23), "day-of-month": (1, 31), "month": (1, 12), "day-of-week": (0, 7)}
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_FULL = {**{d: d[:3] for d in ("sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday")},
         **{m: m[:3] for m in ("january", "february", "march", "april", "june", "july", "august", "september",
                              "october", "november", "december")}}
_CRONSIM_FIELD = {"Bad minute": "minute", "Bad hour": "hour", "Bad day-of-month": "day-of-month",
                  "Bad month": "month", "Bad day-of-week": "day-of-week"}
_EPOCH = datetime(2000, 1, 1)


class CrontabError(ValueError):
    """The expression is not crontab syntax; the message is one line that names the fix."""


def _value(token: str, field: str) -> int | None:
    """A plain field value (a number or a name) as a number; None for anything else."""
    if token.isdigit():
        return int(token)
    if field == "day-of-week" and token in _DAYS:
        return _DAYS.index(token)
    if field == "month" and token in _MONTHS:
        return _MONTHS.index(token) + 1
    return None


def _unwrap(item: str, field: str) -> str:
    """`fri-sun`, `22-2/2`: a range whose end comes before its start wraps around the field's cycle."""
    rng, slash, step_text = item.partition("/")
    start, dash, end = rng.partition("-")
    lo, hi = _value(start, field), _value(end, field) if dash else None
    if lo is None or hi is None or hi >= lo:
        return item
    if slash and not (step_text.isdigit() and int(step_text) > 0):
        return item  # cronsim names the bad step
    low, high = _BOUNDS[field]
    if field == "day-of-week":
        low, high = 0, 6
        lo %= 7  # 7 is Sunday too: 7-4 is sun-thu
    if not (low <= lo <= high and low <= hi <= high):
        return item  # out of range: cronsim says so
    values = [*range(lo, hi + 1)] if lo <= hi else [*range(lo, high + 1), *range(low, hi + 1)]
    return ",".join(str(v) for v in values[:: int(step_text) if slash else 1])


def _field(text: str, field: str) -> str:
    if text == "?":
        if field not in ("day-of-month", "day-of-week"):
            raise CrontabError(f"invalid cron expression: '?' is only for day-of-month or day-of-week "
                               f"(it means any day); use * in the {field} field")
        return "*"
    items = []
    for item in text.split(","):
        for full, short in _FULL.items():
            item = item.replace(full, short)
        items.append(_unwrap(item, field))
    return ",".join(items)


@lru_cache(maxsize=512)
def canonical(expr: str) -> str:
    """The five fields cronsim reads for what the user wrote (a macro, `?`, wrapped ranges, full names).

    Raises CrontabError (one line) when it is not an expression crontab or cronsim accepts."""
    text = " ".join(expr.lower().split())
    if text.startswith("@"):
        if text == REBOOT:
            raise CrontabError("@reboot has no fire times; it runs once when the daemon starts")
        if text not in MACROS:
            raise CrontabError(f"invalid cron expression {expr!r}: unknown macro; use one of "
                               f"{', '.join(MACROS)} or @reboot")
        return MACROS[text]
    fields = text.split(" ") if text else []
    if len(fields) != 5:
        raise CrontabError(f"invalid cron expression {expr!r}: {len(fields)} field(s); {CRON_HINT}")
    try:
        result = " ".join(_field(f, name) for f, name in zip(fields, FIELDS))
    except CrontabError as exc:
        raise CrontabError(str(exc).replace("invalid cron expression:", f"invalid cron expression {expr!r}:")) from None
    from cronsim import CronSim, CronSimError  # by the first cron expression read, not at the daemon's start

    try:
        CronSim(result, _EPOCH)
    except CronSimError as exc:
        field = _CRONSIM_FIELD.get(str(exc))
        if field is None:
            raise CrontabError(f"invalid cron expression {expr!r}: {exc}; {CRON_HINT}") from None
        shown = fields[FIELDS.index(field)]
        raise CrontabError(f"invalid cron expression {expr!r}: bad {field} field {shown!r}; "
                           f"use {_ALLOWED[field]}") from None
    return result


def next_fire(expr: str, zone: tzinfo, t: float) -> float | None:
    """The first fire time strictly after epoch `t` in `zone`; None if there is none within 50 years.

    Daylight saving, as Debian's cron (and so cronsim) does it: a job at a fixed time of day
    (minute and hour not `*`-based) runs once on the day clocks go back, at the first of the
    repeated times, and on the day they go forward a time that does not exist runs at the first
    minute that does (02:30 -> 03:00). Jobs that run every hour or more often follow real time:
    they fire in both passes of a repeated hour and not in a skipped one."""
    fields = canonical(expr)
    from cronsim import CronSim

    it = CronSim(fields, datetime.fromtimestamp(t, zone))
    # Started inside a repeated hour's second pass, a fixed-time job can be given the first pass,
    # which lies before `t`: step on (at most a few times) to the first one after it.
    for _ in range(8):
        try:
            nxt = next(it).timestamp()
        except StopIteration:
            return None
        if nxt > t:
            return nxt
    return None
