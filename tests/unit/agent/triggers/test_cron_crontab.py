"""Cron expressions mean what crontab(5) means: clawgate's fire times against the reference
library (cronsim, Debian cron's rules) over thousands of random expressions, zones and DST days.

The generator writes each expression twice: as a user would type it (macros, `?`, wrapped
ranges like `fri-sun`, names in any case) and as the plain fields it stands for, worked out
here independently. clawgate gets the first; cronsim, iterating once from the start, gets the
second. clawgate restarts its computation from every fire time (as the daemon does), so the
comparison also checks that restarting never repeats, skips or reorders a fire time.
"""

from __future__ import annotations

import random
from datetime import date, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from cronsim import CronSim, CronSimError

from clawgate.agent.triggers.schedule import Schedule, ScheduleError

SEED = 20261126
EXPRESSIONS = 2200
FIRES = 5
ZONES = ("UTC", "Europe/Berlin", "America/New_York", "Australia/Sydney", "Asia/Kolkata",
         "America/St_Johns", "Australia/Lord_Howe", "Europe/London", "America/Sao_Paulo")
BOUNDS = {0: (0, 59), 1: (0, 23), 2: (1, 31), 3: (1, 12), 4: (0, 6)}
DAY_NAMES = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
MONTH_NAMES = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
MACROS = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
          "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *"}  # crontab(5)


def dst_days(zone: ZoneInfo, years: range) -> list[date]:
    """Local dates on which the zone's UTC offset changes."""
    days = []
    day = datetime(years.start, 1, 1, 12, tzinfo=zone)
    while day.year < years.stop:
        nxt = day + timedelta(days=1)
        if nxt.utcoffset() != day.utcoffset():
            days.append(nxt.date())
        day = nxt
    return days


def name(rng: random.Random, field: int, value: int, seven: bool = False) -> str:
    """A value as typed: a number, or (month, day-of-week) sometimes a name in any case;
    `seven`: where Sunday may be written 7 (a single day, the end of a range)."""
    if field == 3 and rng.random() < 0.4:
        return rng.choice((str.lower, str.upper, str.title))(MONTH_NAMES[value - 1])
    if field == 4 and rng.random() < 0.4:
        return rng.choice((str.lower, str.upper, str.title))(DAY_NAMES[value % 7])
    if seven and field == 4 and value == 0 and rng.random() < 0.3:
        return "7"  # Sunday, the other way
    return str(value)


def term(rng: random.Random, field: int) -> tuple[str, str]:
    """One comma item of a field: (as typed, as plain cronsim fields)."""
    lo, hi = BOUNDS[field]
    roll = rng.random()
    if roll < 0.3:
        v = rng.randint(lo, hi)
        return name(rng, field, v, seven=True), str(v)
    if roll < 0.5:
        a, b = sorted(rng.sample(range(lo, hi + 1), 2))
        step = rng.choice((None, None, rng.randint(1, max(1, (hi - lo) // 2))))
        suffix = f"/{step}" if step else ""
        return f"{name(rng, field, a)}-{name(rng, field, b, seven=True)}{suffix}", f"{a}-{b}{suffix}"
    if roll < 0.7:
        # a range that wraps around the cycle: worked out here by walking the cycle
        b, a = sorted(rng.sample(range(lo, hi + 1), 2))
        step = rng.choice((None, None, rng.randint(1, 4)))
        cycle = [*range(a, hi + 1), *range(lo, b + 1)]
        values = cycle[:: step or 1]
        typed = f"{name(rng, field, a)}-{name(rng, field, b, seven=True)}" + (f"/{step}" if step else "")
        if field == 4 and b == 0 and rng.random() < 0.5:
            typed = f"{name(rng, field, a)}-sun" + (f"/{step}" if step else "")
        return typed, ",".join(str(v) for v in values)
    step = rng.randint(1, max(1, (hi - lo) // 2))
    if rng.random() < 0.5:
        return f"*/{step}", f"*/{step}"
    v = rng.randint(lo, hi)
    return f"{name(rng, field, v)}/{step}", f"{v}/{step}"


def field_pair(rng: random.Random, field: int) -> tuple[str, str]:
    roll = rng.random()
    if roll < (0.45 if field >= 2 else 0.2):
        if field in (2, 4) and rng.random() < 0.3:
            return "?", "*"
        return "*", "*"
    if field == 2 and roll < 0.55:
        special = rng.choice(("L", "LW", "l"))
        return special, special.upper()
    if field == 4 and roll < 0.55:
        day = rng.randint(0, 6)
        if rng.random() < 0.5:
            return f"{day}L", f"{day}L"
        nth = rng.randint(1, 5)
        return f"{DAY_NAMES[day]}#{nth}", f"{day}#{nth}"
    pairs = [term(rng, field) for _ in range(rng.choice((1, 1, 1, 2, 3)))]
    return ",".join(p[0] for p in pairs), ",".join(p[1] for p in pairs)


def expression(rng: random.Random) -> tuple[str, str]:
    if rng.random() < 0.06:
        macro = rng.choice(sorted(MACROS))
        return rng.choice((macro, macro.upper())), MACROS[macro]
    if rng.random() < 0.25:  # the common shape: a fixed time of day (the DST special case)
        minute, hour = str(rng.randint(0, 59)), str(rng.randint(0, 23))
        rest = [field_pair(rng, f) for f in (2, 3, 4)]
        return (" ".join([minute, hour, *(p[0] for p in rest)]), " ".join([minute, hour, *(p[1] for p in rest)]))
    pairs = [field_pair(rng, f) for f in range(5)]
    if rng.random() < 0.05:  # a mistake neither crontab nor the library accepts
        f = rng.randrange(5)
        bad = rng.choice((str(BOUNDS[f][1] + 2), "1-", "*/0", "x", "?" if f in (0, 1, 3) else "L5"))
        pairs[f] = (bad, bad)
    return " ".join(p[0] for p in pairs), " ".join(p[1] for p in pairs)


def start_time(rng: random.Random, zone: ZoneInfo, transitions: list[date]) -> float:
    if transitions and rng.random() < 0.6:  # on or just before a DST change
        day = rng.choice(transitions) - timedelta(days=rng.choice((0, 0, 1)))
        local = datetime(day.year, day.month, day.day, tzinfo=zone) + timedelta(seconds=rng.randint(0, 86399))
        return local.timestamp()
    return datetime(2025, 1, 1, tzinfo=timezone.utc).timestamp() + rng.uniform(0, 6 * 365 * 86400)


def reference(plain: str, zone: ZoneInfo, t: float, count: int) -> list[float] | None:
    """cronsim's fire times strictly after t, from one continuous iteration; None: it refuses the expression."""
    try:
        it = CronSim(plain, datetime.fromtimestamp(t, zone))
    except CronSimError:
        return None
    found: list[float] = []
    while len(found) < count:
        try:
            nxt = next(it).timestamp()
        except StopIteration:
            break
        if nxt > (found[-1] if found else t):
            found.append(nxt)
    return found


def test_next_fire_times_match_the_reference_library() -> None:
    rng = random.Random(SEED)
    zones = {z: ZoneInfo(z) for z in ZONES}
    transitions = {z: dst_days(info, range(2025, 2031)) for z, info in zones.items()}
    compared = refused = 0
    features = {"macro": 0, "?": 0, "wrap": 0, "L": 0, "#": 0, "or": 0, "dst day": 0}
    while compared < EXPRESSIONS:
        typed, plain = expression(rng)
        zone_name = rng.choice(ZONES)
        zone = zones[zone_name]
        t = start_time(rng, zone, transitions[zone_name])
        expected = reference(plain, zone, t, FIRES)
        if expected is None:
            with pytest.raises(ScheduleError) as info:
                Schedule.cron(typed, zone_name)
            assert "\n" not in str(info.value) and "invalid cron expression" in str(info.value)
            refused += 1
            continue
        plan = Schedule.cron(typed, zone_name)
        got: list[float] = []
        at = t
        while len(got) < FIRES and (nxt := plan.next_after(at)) is not None:
            got.append(nxt)
            at = nxt
        shown = [datetime.fromtimestamp(x, zone).isoformat() for x in got]
        assert got == expected, (typed, plain, zone_name, datetime.fromtimestamp(t, zone).isoformat(), shown)
        compared += 1
        fields = plain.split(" ")
        features["macro"] += typed.startswith("@")
        features["?"] += "?" in typed
        features["wrap"] += any(f != p and "," in p and "-" in f for f, p in zip(typed.split(" "), fields))
        features["L"] += "L" in plain
        features["#"] += "#" in plain
        features["or"] += not (fields[2].startswith("*") or fields[4].startswith("*"))
        features["dst day"] += datetime.fromtimestamp(t, zone).date() in transitions[zone_name] or \
            (datetime.fromtimestamp(t, zone).date() + timedelta(days=1)) in transitions[zone_name]
    assert compared == EXPRESSIONS and refused > 0
    assert all(count >= 20 for count in features.values()), features  # every feature was really exercised


@pytest.mark.parametrize("zone_name", ["Europe/Berlin", "America/New_York", "Australia/Sydney", "Australia/Lord_Howe"])
def test_a_daily_job_fires_exactly_once_on_every_day_around_dst_changes(zone_name: str) -> None:
    # crontab's rule for a fixed time of day: once on the day clocks go back (not twice), and on
    # the day they go forward a time that does not exist runs at the first one that does (not skipped)
    zone = ZoneInfo(zone_name)
    for change in dst_days(zone, range(2026, 2027)):
        first = datetime(change.year, change.month, change.day, tzinfo=zone) - timedelta(days=2)
        for hour in range(24):
            for minute in (0, 30, 59):
                plan = Schedule.cron(f"{minute} {hour} * * *", zone_name)
                t, days = first.timestamp() - 1, []
                for _ in range(5):
                    t = plan.next_after(t)
                    days.append(datetime.fromtimestamp(t, zone).date())
                expected = [first.date() + timedelta(days=k) for k in range(5)]
                assert days == expected, (zone_name, change, hour, minute, days)


def test_hourly_jobs_follow_real_time_across_dst() -> None:
    # jobs that run every hour are scheduled normally: 25 runs on the autumn day, 23 in spring
    zone = ZoneInfo("Europe/Berlin")
    plan = Schedule.cron("@hourly", "Europe/Berlin")
    for day, runs in ((date(2026, 10, 25), 25), (date(2026, 3, 29), 23)):
        start = datetime(day.year, day.month, day.day, tzinfo=zone).timestamp() - 1
        end = datetime.combine(day + timedelta(days=1), datetime.min.time(), zone).timestamp()
        fired = plan.due_times(plan.next_after(start), end - 1)
        assert len(fired) == runs and len(set(fired)) == runs


def test_day_of_month_or_day_of_week() -> None:
    # both restricted: either matches (crontab(5)); one of them '*' or '?': only the other counts
    utc = timezone.utc
    t = datetime(2026, 11, 26, 12, tzinfo=utc).timestamp()  # a Thursday
    def days(expr: str) -> list[str]:
        plan, at, out = Schedule.cron(expr, "UTC"), t, []
        for _ in range(4):
            at = plan.next_after(at)
            out.append(datetime.fromtimestamp(at, utc).strftime("%a %d %b"))
        return out
    assert days("0 9 1 * mon") == ["Mon 30 Nov", "Tue 01 Dec", "Mon 07 Dec", "Mon 14 Dec"]
    assert days("0 9 ? * mon") == ["Mon 30 Nov", "Mon 07 Dec", "Mon 14 Dec", "Mon 21 Dec"]
    assert days("0 9 1 * ?") == ["Tue 01 Dec", "Fri 01 Jan", "Mon 01 Feb", "Mon 01 Mar"]
    assert days("0 9 L * *") == ["Mon 30 Nov", "Thu 31 Dec", "Sun 31 Jan", "Sun 28 Feb"]
    assert days("0 9 * * fri#1") == ["Fri 04 Dec", "Fri 01 Jan", "Fri 05 Feb", "Fri 05 Mar"]
    assert days("@monthly") == ["Tue 01 Dec", "Fri 01 Jan", "Mon 01 Feb", "Mon 01 Mar"]
