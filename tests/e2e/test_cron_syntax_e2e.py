"""crontab(5) syntax through the real interfaces: the `clawgate cron` CLI (offline and with
a running daemon) and @reboot jobs across clean restarts and a SIGKILL."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import datetime, timedelta
from typing import Any, Callable
from zoneinfo import ZoneInfo

from clawgate.gateway.client import GatewayClient
from tests.harness import DaemonProcess
from tests.waiting import wait_until_async


def cli(daemon: DaemonProcess, *args: str):
    return asyncio.to_thread(daemon.cli, "cron", *args)


def first_match(after: float, zone: ZoneInfo, hour: int, minute: int, day_ok: Callable[[datetime], bool]) -> float:
    """Worked out by walking the calendar: the first local hour:minute after `after` on a day that is ok."""
    day = datetime.fromtimestamp(after, zone).date()
    for k in range(400):
        d = day + timedelta(days=k)
        at = datetime(d.year, d.month, d.day, hour, minute, tzinfo=zone)
        if day_ok(at) and at.timestamp() > after:
            return at.timestamp()
    raise AssertionError("no day matched")


async def add(proc: DaemonProcess, *args: str) -> dict[str, Any]:
    before = time.time()
    result = await cli(proc, "add", *args, "--json")
    assert result.returncode == 0, result.stderr
    job = json.loads(result.stdout)
    job["_window"] = (before, time.time())
    return job


def next_of(job: dict[str, Any], compute: Callable[[float], float]) -> None:
    """The job's next run is what the calendar says, for a 'now' inside the CLI call."""
    lo, hi = job["_window"]
    assert job["nextRunAt"] in (compute(lo), compute(hi)), (job["nextRun"], job["describe"])


async def test_the_or_rule_and_macros_through_the_offline_cli(tmp_path) -> None:
    proc = DaemonProcess(tmp_path / "home", anthropic_url=None)
    proc.init()
    utc, ny = ZoneInfo("UTC"), ZoneInfo("America/New_York")
    # day-of-month 1 OR Monday, not "a Monday that is the 1st"
    either = await add(proc, "--cron", "0 9 1 * mon", "--tz", "UTC", "-m", "first or monday")
    next_of(either, lambda now: first_match(now, utc, 9, 0, lambda d: d.day == 1 or d.weekday() == 0))
    assert first_match(either["_window"][0], utc, 9, 0, lambda d: d.day == 1 or d.weekday() == 0) \
        - either["_window"][0] <= 7 * 86400  # within a week, never months away
    weekly = await add(proc, "--cron", "@weekly", "--tz", "America/New_York", "-m", "weekly review")
    next_of(weekly, lambda now: first_match(now, ny, 0, 0, lambda d: d.weekday() == 6))
    weekend = await add(proc, "--cron", "30 8 ? * fri-sun", "--tz", "UTC", "-m", "weekend")
    next_of(weekend, lambda now: first_match(now, utc, 8, 30, lambda d: d.weekday() in (4, 5, 6)))
    last = await add(proc, "--cron", "0 18 L * *", "--tz", "UTC", "-m", "month end")
    next_of(last, lambda now: first_match(now, utc, 18, 0, lambda d: (d + timedelta(days=1)).day == 1))
    listed = await cli(proc, "list")
    assert listed.returncode == 0 and "cron '@weekly' (America/New_York)" in listed.stdout
    for expr, words in (("0 9 * * funday", "bad day-of-week field 'funday'"), ("@fortnightly", "unknown macro"),
                        ("0 9 * *", "4 field(s)")):
        bad = await cli(proc, "add", "--cron", expr, "-m", "x")
        assert bad.returncode == 2 and bad.stdout == "" and "Traceback" not in bad.stderr
        assert bad.stderr.count("\n") == 1 and words in bad.stderr, bad.stderr


async def runs(client: GatewayClient, job_id: str) -> list[dict[str, Any]]:
    return (await client.request("cron.runs", {"id": job_id}))["runs"]


async def wait_runs(proc: DaemonProcess, job_id: str, ok: Callable[[list[dict[str, Any]]], bool],
                    timeout: float = 60.0) -> list[dict[str, Any]]:
    async with proc.client() as client:
        async def matching() -> tuple[list[dict[str, Any]]] | None:
            found = await runs(client, job_id)
            return (found,) if ok(found) else None  # a tuple: an empty list that matches is still truthy
        (found,) = await wait_until_async(matching, f"the runs of {job_id} to match", timeout=timeout, interval=0.1,
                                          describe=lambda: proc.log_text()[-3000:])
    return found


def finished(count: int) -> Callable[[list[dict[str, Any]]], bool]:
    return lambda r: len(r) == count and all(x["status"] == "ok" for x in r)


async def test_reboot_runs_once_per_daemon_start_and_not_again_after_a_crash(daemon_factory, fake_model) -> None:
    proc = daemon_factory()
    job = await add(proc, "--cron", "@reboot", "-m", "say that you are up", "--name", "boot")
    assert job["nextRunAt"] is None and job["describe"].startswith("@reboot")
    proc.terminate()
    proc.start()  # a clean restart: a new start, the job runs once
    first = await wait_runs(proc, job["id"], finished(1))
    assert first[0]["scheduledAt"] is not None
    proc.kill()  # a crash; the restart continues the same start
    proc.start()
    marker = await add(proc, "--at", "+1s", "-m", "a later one-shot")
    await wait_runs(proc, marker["id"], finished(1))  # the daemon has been firing jobs for a while
    assert await wait_runs(proc, job["id"], lambda r: True) == first
    assert "@reboot jobs are not run again" in proc.log_text()
    proc.terminate()
    proc.start()  # clean stop, new start: runs again
    second = await wait_runs(proc, job["id"], finished(2))
    assert second[0]["scheduledAt"] > first[0]["scheduledAt"]
    async with proc.client() as client:
        (live,) = [j for j in (await client.request("cron.list"))["jobs"] if j["id"] == job["id"]]
    assert live["state"] == "scheduled" and live["enabled"] and live["nextRunAt"] is None
