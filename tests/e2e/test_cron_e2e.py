"""Cron end to end: the real daemon process, its WebSocket, the real CLI, the fake model API
and the fake Telegram Bot API. Near-future times (about a second) instead of long sleeps."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import time
from typing import Any, Callable

import pytest

from clawgate.gateway.client import GatewayClient, GatewayError
from tests.fakes.anthropic_api import FakeAnthropic, last_user_text, text, tool_use
from tests.fakes.telegram_api import FakeTelegram
from tests.harness import ROOT, DaemonProcess, free_port
from tests.waiting import DEFAULT_TIMEOUT, wait_past, wait_until, wait_until_async


EVERY = 1.0  # seconds between runs of the repeating jobs here


async def until(client: GatewayClient, match: Callable[[dict[str, Any]], bool], timeout: float = DEFAULT_TIMEOUT,
                seen: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The first event frame that matches, within `timeout` seconds (every frame goes to `seen`)."""
    async def scan() -> dict[str, Any]:
        async for frame in client.events():
            if seen is not None:
                seen.append(frame)
            if match(frame):
                return frame
        raise AssertionError("the gateway closed the connection")
    return await asyncio.wait_for(scan(), timeout)


def final_in(session: str) -> Callable[[dict[str, Any]], bool]:
    return lambda f: f["event"] == "chat" and f["payload"]["session"] == session and f["payload"]["state"] != "delta"


async def runs(client: GatewayClient, job_id: str) -> list[dict[str, Any]]:
    return (await client.request("cron.runs", {"id": job_id}))["runs"]


async def wait_runs(client: GatewayClient, job_id: str, ok: Callable[[list[dict[str, Any]]], bool],
                    timeout: float = DEFAULT_TIMEOUT) -> list[dict[str, Any]]:
    async def matching() -> tuple[list[dict[str, Any]]] | None:
        found = await runs(client, job_id)
        return (found,) if ok(found) else None  # a tuple: an empty list that matches is still truthy
    (found,) = await wait_until_async(matching, f"the runs of {job_id} to match", timeout=timeout, interval=0.1)
    return found


def cli(daemon: DaemonProcess, *args: str):
    return asyncio.to_thread(daemon.cli, "cron", *args)


def one_line_error(result) -> str:
    assert result.stdout == "" and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    return result.stderr


# delivery ------------------------------------------------------------------------------------
async def test_a_job_fires_on_time_and_its_answer_reaches_the_gateway_session(daemon, fake_model: FakeAnthropic) -> None:
    fake_model.enqueue_for("stand-up", text("Stand-up starts in 5 minutes."))
    async with daemon.client(subscribe=["main"]) as client:
        job = (await client.request("cron.add", {"message": "Remind me of the stand-up", "at": "+1s",
                                                 "deliver": "gateway:main", "name": "stand-up"}))["job"]
        assert job["session"] == f"cron:{job['id']}" and job["deliver"] == "gateway:main"
        seen: list[dict[str, Any]] = []
        final = await until(client, final_in("main"), seen=seen)
        (done,) = await wait_runs(client, job["id"], lambda r: r and r[0]["status"] == "ok")
    assert final["payload"]["text"] == "Stand-up starts in 5 minutes."
    assert final["payload"]["runId"].startswith(f"cron:{job['id']}:")
    assert done["result"] == "Stand-up starts in 5 minutes." and done["endedAt"] >= done["startedAt"]
    start = next(f["payload"] for f in seen if f["event"] == "cron" and f["payload"]["action"] == "run_start")
    assert start["lateMs"] < 1000  # timer accuracy
    assert "Remind me of the stand-up" in last_user_text(fake_model.requests[-1])


@pytest.fixture
def telegram():
    with FakeTelegram() as fake:
        yield fake


async def test_a_job_added_with_the_cli_reaches_a_telegram_chat(daemon_factory, fake_model, telegram) -> None:
    daemon = daemon_factory({"TELEGRAM_BOT_TOKEN": telegram.token,
                             "CLAWGATE_CHANNELS__TELEGRAM__BASE_URL": telegram.base_url,
                             "CLAWGATE_CHANNELS__TELEGRAM__POLL_TIMEOUT_SECONDS": "1",
                             "CLAWGATE_CHANNELS__TELEGRAM__DM_POLICY": "open"})
    fake_model.enqueue_for("water the plants", text("Time to water the plants 🌱"))
    added = await cli(daemon, "add", "--at", "+1s", "--message", "Tell me to water the plants",
                      "--deliver", "telegram:4242")
    assert added.returncode == 0, added.stderr
    assert "delivers to telegram:4242" in added.stdout and "not running" not in added.stdout
    sent = await telegram.wait_sent_async(4242, 1, timeout=15)
    assert "Time to water the plants" in sent[-1]


async def test_the_cron_tool_schedules_a_reminder_back_to_the_asking_chat(daemon, fake_model) -> None:
    fake_model.enqueue_for("remind me to stretch",
                           tool_use("cron", {"action": "add", "message": "Remind the user to stretch", "at": "+1s"}),
                           text("Sure, I will remind you."))
    fake_model.enqueue_for("Remind the user to stretch", text("Time to stretch!"))
    async with daemon.client(subscribe=["desk"]) as client:
        await client.request("chat.send", {"session": "desk", "text": "remind me to stretch in a second"})
        first = await until(client, final_in("desk"))
        second = await until(client, final_in("desk"))
        (job,) = (await client.request("cron.list"))["jobs"]
    assert first["payload"]["text"] == "Sure, I will remind you."
    assert second["payload"]["text"] == "Time to stretch!" and second["payload"]["runId"].startswith("cron:")
    assert job["deliver"] == "gateway:desk" and job["state"] == "done"
    tool_result = fake_model.requests[1]["messages"][-1]["content"][0]
    assert tool_result["type"] == "tool_result" and f"scheduled job {job['id']}" in tool_result["content"]


# restarts and misfires -------------------------------------------------------------------------
async def test_at_jobs_due_while_the_daemon_was_down(daemon, fake_model) -> None:
    async with daemon.client() as client:
        kept = (await client.request("cron.add", {"message": "job within grace", "at": "+2s", "grace": "1h",
                                                  "deliver": "gateway:main"}))["job"]
        late = (await client.request("cron.add", {"message": "job outside grace", "at": "+2s", "grace": "1s"}))["job"]
    assert daemon.terminate() == 0
    await asyncio.sleep(max(0.0, kept["nextRunAt"] + 2.5 - time.time()))  # due, and > 1 s late
    assert fake_model.requests == []
    daemon.start()
    async with daemon.client() as client:
        (ran,) = await wait_runs(client, kept["id"], lambda r: r and r[0]["status"] == "ok")
        (missed,) = await runs(client, late["id"])
        jobs = {j["id"]: j for j in (await client.request("cron.list"))["jobs"]}
    assert ran["scheduledAt"] == pytest.approx(kept["nextRunAt"])
    assert missed["status"] == "missed" and "1s grace window" in missed["result"]
    assert jobs[kept["id"]]["state"] == "done" and jobs[late["id"]]["note"] == "missed its only run"
    assert len(fake_model.requests) == 1 and "job within grace" in last_user_text(fake_model.requests[0])
    armed_before = daemon.log_text().count("job(s) scheduled")
    daemon.restart()  # a crash now must not run the one-shot again: it is not even armed
    wait_until(lambda: daemon.log_text().count("job(s) scheduled") > armed_before, "the restarted daemon's cron start")
    assert [line for line in daemon.output if "job(s) scheduled" in line][-1].endswith("cron: 0 job(s) scheduled")
    async with daemon.client() as client:
        assert len(await runs(client, kept["id"])) == 1
    assert len(fake_model.requests) == 1


async def test_overlapping_runs_are_prevented(daemon, fake_model) -> None:
    fake_model.enqueue_for("slow job", text("finally done", delay=2.6))
    async with daemon.client() as client:
        job = (await client.request("cron.add", {"message": "slow job", "every": "1s"}))["job"]
        found = await wait_runs(client, job["id"], lambda r: any(x["status"] == "ok" for x in r))
        await client.request("cron.remove", {"id": job["id"]})
    # The job's first run got the slow reply. (Runs are listed newest first, and a later tick may
    # already have run and finished quickly before the job was removed.)
    slow = min((r for r in found if r["status"] == "ok"), key=lambda r: r["startedAt"])
    assert slow["endedAt"] - slow["startedAt"] >= 2.5, found
    # The ticks while the slow run went on started nothing: each was recorded as skipped. (A tick
    # after it ended, before the job was removed, may start a run of its own: that is no overlap.)
    during = [r for r in found if r is not slow and slow["startedAt"] <= r["startedAt"] < slow["endedAt"]]
    assert during and all(r["status"] == "skipped" for r in during), found


async def test_a_failing_job_backs_off_and_is_disabled_with_a_message(daemon_factory, fake_model) -> None:
    daemon = daemon_factory({"CLAWGATE_CRON__MAX_FAILURES": "3", "CLAWGATE_CRON__BACKOFF_SECONDS": "0.5"})
    fake_model.fail_next(400, times=3)
    async with daemon.client(subscribe=["ops"]) as client:
        job = (await client.request("cron.add", {"message": "flaky job", "every": f"{EVERY:g}s", "deliver": "gateway:ops"}))["job"]
        notice = await until(client, lambda f: final_in("ops")(f) and f["payload"]["kind"] == "notice"
                             and "disabled" in f["payload"]["text"], timeout=30)
        found = await runs(client, job["id"])
        (listed,) = (await client.request("cron.list"))["jobs"]
        wait_past(EVERY)  # the job's own interval passes again: a disabled job must not run
        later = await runs(client, job["id"])
        assert later == found, json.dumps({"found": found, "later": later, "listed": listed}, indent=1)  # disabled: nothing more
    assert "was disabled after 3 failed runs in a row" in notice["payload"]["text"]
    # A tick that came while a run was still going, or several folded into one after a stall (a busy
    # machine), is recorded as "skipped"; it is not a run and not a failure.
    started = [r for r in found if r["status"] != "skipped"]
    assert [r["status"] for r in started] == ["error"] * 3
    starts = sorted(r["startedAt"] for r in started)
    assert starts[2] - starts[1] >= 1.9  # second failure: 1 s backoff pushes past the next tick of the 1 s grid
    assert listed["enabled"] is False and listed["state"] == "disabled" and listed["failures"] == 3
    assert len(fake_model.requests) == 3


# management --------------------------------------------------------------------------------------
async def test_cli_without_a_daemon_then_the_daemon_picks_it_up(tmp_path, fake_model) -> None:
    proc = DaemonProcess(tmp_path / "home", anthropic_url=fake_model.base_url)
    proc.init()
    added = await cli(proc, "add", "--every", "1h", "--message", "hourly summary", "--name", "summary",
                      "--deliver", "gateway", "--json")
    assert added.returncode == 0, added.stderr
    job = json.loads(added.stdout)
    listed = await cli(proc, "list")
    assert listed.returncode == 0 and job["id"] in listed.stdout and "every 1h" in listed.stdout
    as_json = json.loads((await cli(proc, "list", "--json")).stdout)
    assert [j["id"] for j in as_json] == [job["id"]]
    ran = await cli(proc, "run", job["id"])
    assert ran.returncode == 0 and "queued run" in ran.stdout
    other = json.loads((await cli(proc, "add", "--at", "+1h", "--message", "x", "--json")).stdout)
    removed = await cli(proc, "remove", other["id"])
    assert removed.returncode == 0 and other["id"] in removed.stdout
    for args, words in ((("add", "--cron", "0 9 * *", "-m", "x"), "4 field(s)"),
                        (("add", "--cron", "0 9 * * mon", "--tz", "Mars/Base", "-m", "x"), "unknown time zone"),
                        (("add", "--at", "2001-01-01T09:00", "-m", "x"), "in the past"),
                        (("add", "--every", "5m", "-m", "x", "--deliver", "fax:1"), "invalid delivery target")):
        bad = await cli(proc, *args)
        assert bad.returncode == 2 and words in one_line_error(bad)
    missing = await cli(proc, "remove", "nope")
    assert missing.returncode == 1 and "no cron job 'nope'" in one_line_error(missing)
    # the daemon starts: the queued run runs, the job is armed
    fake_model.enqueue_for("hourly summary", text("summary: all quiet"))
    proc.start()
    try:
        async with proc.client() as client:
            (run,) = await wait_runs(client, job["id"], lambda r: r and r[0]["status"] == "ok")
            (live,) = (await client.request("cron.list"))["jobs"]
        assert run["result"] == "summary: all quiet" and live["nextRunAt"] == job["nextRunAt"]
    finally:
        proc.kill()


async def test_cli_and_methods_with_a_running_daemon(daemon, fake_model) -> None:
    fake_model.enqueue_for("ping the team", text("pinged"))
    added = await cli(daemon, "add", "--at", "+1s", "--message", "ping the team", "--json")
    assert added.returncode == 0, added.stderr
    job = json.loads(added.stdout)
    async with daemon.client() as client:
        await wait_runs(client, job["id"], lambda r: r and r[0]["status"] == "ok")  # armed at once, no restart
        with pytest.raises(GatewayError) as info:
            await client.request("cron.add", {"message": "x", "cron": "0 25 * * *"})
        assert info.value.code == "invalid_params" and "invalid cron expression" in info.value.message
        with pytest.raises(GatewayError) as info:
            await client.request("cron.run", {"id": "nope"})
        assert info.value.code == "not_found"
        every = (await client.request("cron.add", {"message": "ping the team", "every": 3600}))["job"]
    ran = await cli(daemon, "run", every["id"])
    assert ran.returncode == 0 and "started run" in ran.stdout
    shown = await cli(daemon, "runs", job["id"])
    assert shown.returncode == 0 and "ok" in shown.stdout and "pinged" in shown.stdout
    off = await cli(daemon, "disable", every["id"])
    assert off.returncode == 0 and "disabled" in off.stdout
    bad = await cli(daemon, "add", "--every", "soon", "-m", "x")
    assert bad.returncode == 2 and "invalid interval 'soon'" in one_line_error(bad)
    removed = await cli(daemon, "remove", job["id"])
    assert removed.returncode == 0
    # a running daemon the CLI cannot reach (wrong port) is not edited behind its back
    wrong = {**daemon.env, "CLAWGATE_GATEWAY__PORT": str(free_port())}
    blind = await asyncio.to_thread(subprocess.run, [sys.executable, "-m", "clawgate.gateway.cli", "cron", "add", "--every", "1h",
                                                     "-m", "x"], env=wrong, cwd=ROOT, capture_output=True, text=True)
    assert blind.returncode == 4 and "is running but not answering" in one_line_error(blind)
    db = sqlite3.connect(daemon.home / "state" / "clawgate.db")
    assert [r[0] for r in db.execute("SELECT id FROM cron_jobs")] == [every["id"]]
    db.close()
