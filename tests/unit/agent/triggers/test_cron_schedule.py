"""Schedules: parsing, time zones and the one-line errors, with fixed clocks (no waiting)."""

from __future__ import annotations

from datetime import datetime, timezone
from zoneinfo import ZoneInfo

import pytest

from clawgate.agent.triggers.jobs import CronError, build_schedule, parse_deliver, resolve_deliver
from clawgate.agent.triggers.schedule import Schedule, ScheduleError, parse_duration


def utc(*args: int) -> float:
    return datetime(*args, tzinfo=timezone.utc).timestamp()


def test_timezoned_cron_computes_the_right_next_run_across_dst() -> None:
    # Friday 2025-03-07 10:00 in New York (EST, UTC-5): 09:00 has passed, so the next weekday
    # run is Monday 03-10 09:00 — after the DST switch on 03-09, i.e. 13:00 UTC, not 14:00.
    plan = Schedule.cron("0 9 * * mon-fri", "America/New_York")
    nxt = plan.next_after(utc(2025, 3, 7, 15, 0))
    assert nxt == utc(2025, 3, 10, 13, 0)
    assert datetime.fromtimestamp(nxt, ZoneInfo("America/New_York")).hour == 9
    # the same expression in Tokyo fires at 00:00 UTC
    assert Schedule.cron("0 9 * * mon-fri", "Asia/Tokyo").next_after(utc(2025, 3, 7, 15, 0)) == utc(2025, 3, 10, 0, 0)


def test_next_after_is_strictly_after_a_fire_time() -> None:
    plan = Schedule.cron("*/15 * * * *", "UTC")
    t = utc(2025, 1, 1, 12, 15)
    assert plan.next_after(t) == utc(2025, 1, 1, 12, 30)
    assert plan.due_times(t, utc(2025, 1, 1, 13, 0)) == [t, utc(2025, 1, 1, 12, 30), utc(2025, 1, 1, 12, 45),
                                                         utc(2025, 1, 1, 13, 0)]


@pytest.mark.parametrize("field, names", [
    ("1-5", "Mon Tue Wed Thu Fri"), ("0", "Sun"), ("7", "Sun"), ("0,6", "Sat Sun"), ("*/2", "Tue Thu Sat Sun"),
    ("sun-sat", "Mon Tue Wed Thu Fri Sat Sun"), ("MON", "Mon"), ("mon-fri/2", "Mon Wed Fri"),
    ("*", "Mon Tue Wed Thu Fri Sat Sun"), ("fri-sun", "Fri Sat Sun"), ("sat-mon", "Sat Sun Mon"),
    ("5-1/2", "Fri Sun"), ("?", "Mon Tue Wed Thu Fri Sat Sun"), ("monday-wednesday", "Mon Tue Wed"),
])
def test_day_of_week_is_read_the_crontab_way(field: str, names: str) -> None:
    # 0 and 7 are Sunday; a range that ends before it starts wraps around the week
    plan = Schedule.cron(f"0 9 * * {field}", "UTC")
    t, days = utc(2025, 3, 2, 12, 0), set()  # a Sunday
    for _ in range(14):
        t = plan.next_after(t)
        days.add(datetime.fromtimestamp(t, timezone.utc).strftime("%a"))
    order = "Mon Tue Wed Thu Fri Sat Sun".split()
    assert sorted(days, key=order.index) == sorted(names.split(), key=order.index)


def test_sunday_zero_really_fires_on_sunday() -> None:
    nxt = Schedule.cron("0 9 * * 0", "UTC").next_after(utc(2025, 3, 5, 0, 0))  # a Wednesday
    assert datetime.fromtimestamp(nxt, timezone.utc).strftime("%A %H:%M") == "Sunday 09:00"


def test_every_keeps_its_phase_from_the_anchor() -> None:
    plan = Schedule.every("1h30m", anchor=1000.0)
    assert plan.seconds == 5400
    assert plan.next_after(1000.0) == 6400.0
    assert plan.next_after(7000.0) == 11800.0
    assert plan.first_run(1000.0) == 6400.0


def test_at_forms() -> None:
    now = utc(2025, 6, 1, 12, 0)
    assert Schedule.once("+20m", now=now).at == now + 1200
    assert Schedule.once("2025-06-01T14:30", "Europe/Berlin", now=now).at == utc(2025, 6, 1, 12, 30)
    assert Schedule.once("2025-06-01T14:30+00:00", "Europe/Berlin", now=now).at == utc(2025, 6, 1, 14, 30)
    # HH:MM is the next such time in the zone: 09:00 Berlin has passed today, so tomorrow
    assert Schedule.once("09:00", "Europe/Berlin", now=now).at == utc(2025, 6, 2, 7, 0)
    assert Schedule.once("15:00", "Europe/Berlin", now=now).at == utc(2025, 6, 1, 13, 0)
    assert Schedule.once("+5m", now=now).next_after(now + 300) is None


@pytest.mark.parametrize("call, words", [
    (lambda: Schedule.cron("0 9 * *"), "4 field(s)"),
    (lambda: Schedule.cron("61 * * * *"), "bad minute field '61'; use 0-59"),
    (lambda: Schedule.cron("0 9 * * funday"), "day-of-week"),
    (lambda: Schedule.cron("0 9 31 2 *"), "bad day-of-month field '31'"),
    (lambda: Schedule.cron("0 ? * * *"), "only for day-of-month or day-of-week"),
    (lambda: Schedule.cron("@fortnightly"), "unknown macro; use one of @yearly"),
    (lambda: Schedule.cron("0 9 * * mon#6"), "bad day-of-week field 'mon#6'"),
    (lambda: Schedule.cron("*/0 * * * *"), "bad minute field"),
    (lambda: Schedule.cron("0 9 * * *", "Mars/Olympus"), "unknown time zone 'Mars/Olympus'"),
    (lambda: Schedule.once("2001-01-01T00:00"), "in the past"),
    (lambda: Schedule.once("tomorrowish"), "ISO-8601"),
    (lambda: Schedule.once("25:00"), "HH:MM"),
    (lambda: Schedule.every("0.5s"), "too short"),
    (lambda: Schedule.every("5 parsecs"), "write it like"),
])
def test_invalid_input_is_one_line_naming_the_fix(call, words: str) -> None:
    with pytest.raises(ScheduleError) as info:
        call()
    message = str(info.value)
    assert words in message and "\n" not in message
    assert any(hint in message for hint in ("e.g.", "use", "give", "write", "minimum"))


def test_durations() -> None:
    assert parse_duration("90s") == 90
    assert parse_duration("1h 30m") == 5400
    assert parse_duration("2d") == 172800
    assert parse_duration(42) == 42
    assert parse_duration("1.5h") == 5400


def test_build_schedule_needs_exactly_one_kind() -> None:
    with pytest.raises(CronError, match="exactly one schedule"):
        build_schedule()
    with pytest.raises(CronError, match=r"got cron, every"):
        build_schedule(cron="* * * * *", every="5m")
    with pytest.raises(CronError, match="no time zone"):
        build_schedule(every="5m", tz="Europe/Berlin")
    with pytest.raises(CronError, match="unknown time zone"):
        build_schedule(at="+5m", tz="Nowhere/Land")


def test_delivery_targets() -> None:
    assert parse_deliver("telegram:4242") == "telegram:4242"
    assert parse_deliver("Telegram:-100123") == "telegram:-100123"
    assert parse_deliver("gateway") == "gateway"
    assert parse_deliver("gateway:main") == "gateway:main"
    assert parse_deliver("none") is None and parse_deliver(None) is None
    assert resolve_deliver("gateway", "cron:abc") == {"channel": "gateway", "chat_id": "cron:abc"}
    assert resolve_deliver("telegram:7", "cron:abc") == {"channel": "telegram", "chat_id": "7"}
    assert parse_deliver("Slack:D0OWNER001") == "slack:D0OWNER001"  # an installed channel (entry point)
    assert resolve_deliver("slack:C0GENERAL1", "cron:abc") == {"channel": "slack", "chat_id": "C0GENERAL1"}
    assert parse_deliver("Discord:1575362664320860259") == "discord:1575362664320860259"
    for bad in ("telegarm:1", "telegram:", "telegram:abc def", "gateway:has space", "slack:", "slack:a b",
                "discord:", "discord:a b", "nochannel:x"):
        with pytest.raises(CronError) as info:
            parse_deliver(bad)
        assert "<channel>:<chat id> (telegram:<chat_id>, slack:<channel id>, ...), gateway[:<session>] or none" in info.value.message


def test_a_plugin_channels_chats_are_delivery_targets(tmp_path, monkeypatch) -> None:
    """A chat channel installed as a plugin (an entry point in the clawgate.channels group) is a valid target."""
    from clawgate.agent.triggers import jobs

    info = tmp_path / "clawgate_echochat-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: clawgate-echochat\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text("[clawgate.channels]\nechochat = clawgate_echochat:EchoChatAdapter\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    jobs.known_channels.cache_clear()
    try:
        assert parse_deliver("echochat:dm-u1") == "echochat:dm-u1"
        assert parse_deliver("EchoChat:!room:matrix.org") == "echochat:!room:matrix.org"
        assert resolve_deliver("echochat:dm-u1", "cron:x") == {"channel": "echochat", "chat_id": "dm-u1"}
        for bad in ("echochat:", "echochat:has space"):
            with pytest.raises(CronError, match="give echochat:<chat id>"):
                parse_deliver(bad)
        # every installed channel is listed, the plugin among them (the built-ins grow: email, matrix, ...)
        with pytest.raises(CronError, match=r"unknown channel 'fax' \(installed: (\w+, )*echochat, (\w+, )*gateway, (\w+, )*telegram(, \w+)*\)"):
            parse_deliver("fax:1")
    finally:
        monkeypatch.undo()
        jobs.known_channels.cache_clear()
