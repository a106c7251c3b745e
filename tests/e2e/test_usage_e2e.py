"""Token usage in the real daemon: per turn in the trace and the session log, per day and per
session in `status`, the `usage` method and `clawgate status` / `clawgate usage`, kept across a
SIGKILL (after the batch was saved) and a graceful restart (saved on the way down)."""

from __future__ import annotations

import asyncio
import json
import sqlite3

import pytest

from clawgate.gateway.client import GatewayError
from tests.fakes.anthropic_api import FakeAnthropic, text
from tests.waiting import wait_until

DEADLINE = 60.0


def saved_calls(home) -> int:
    db = sqlite3.connect(f"file:{home / 'state/clawgate.db'}?mode=ro", uri=True, timeout=10)
    try:
        return int(db.execute("SELECT COALESCE(SUM(calls), 0) FROM usage").fetchone()[0])
    except sqlite3.OperationalError:  # the table is not there yet
        return 0
    finally:
        db.close()


def wait_saved(home, calls: int) -> None:
    wait_until(lambda: saved_calls(home) >= calls, f"usage of {calls} calls to be saved", timeout=DEADLINE, interval=0.1)


async def test_usage_per_day_and_session_survives_a_kill_and_shows_in_clawgate_status(daemon_factory,
                                                                                     fake_model: FakeAnthropic):
    daemon = daemon_factory({"CLAWGATE_STATE__USAGE_FLUSH_SECONDS": "0.3"})
    fake_model.enqueue(text("one", input_tokens=1200, output_tokens=30),
                       text("two", input_tokens=800, output_tokens=20),
                       text("three", input_tokens=500, output_tokens=5))
    async with daemon.client() as client:
        await asyncio.wait_for(client.chat("first", session="alpha"), DEADLINE)
        await asyncio.wait_for(client.chat("second", session="alpha"), DEADLINE)
        await asyncio.wait_for(client.chat("third", session="beta"), DEADLINE)
        before = (await client.request("status"))["usage"]
    assert before["today"]["calls"] == 3 and before["today"]["input_tokens"] == 2500
    assert before["today"]["output_tokens"] == 55 and before["sinceStart"] == before["today"]
    assert [(s["session"], s["input_tokens"]) for s in before["topSessions"]] == [("alpha", 2000), ("beta", 500)]

    # per turn: each turn_end trace line and each assistant record of the session log has the usage
    trace = [json.loads(line) for line in (daemon.home / "state/traces/alpha.jsonl").read_text().splitlines()]
    assert [e["usage"]["input_tokens"] for e in trace if e["type"] == "turn_end"] == [1200, 800]
    log = [json.loads(line) for line in (daemon.home / "state/sessions/alpha.jsonl").read_text().splitlines()]
    assert [r["usage"]["output_tokens"] for r in log if r.get("kind") == "assistant"] == [30, 20]

    wait_saved(daemon.home, 3)
    daemon.restart()  # SIGKILL, then start again
    async with daemon.client() as client:
        after = (await client.request("status"))["usage"]
        report = await client.request("usage", {"session": "alpha", "days": 3})
        with pytest.raises(GatewayError) as bad:
            await client.request("usage", {"session": "a\x00b", "days": 3})
        assert bad.value.code == "invalid_params"
        with pytest.raises(GatewayError) as bad:
            await client.request("usage", {"days": 100000})
        assert bad.value.code == "invalid_params"
    assert after["today"] == before["today"] and after["total"] == before["total"]
    assert after["sinceStart"]["calls"] == 0
    assert report["session"]["total"]["input_tokens"] == 2000 and report["session"]["today"]["calls"] == 2
    assert report["days"][0]["day"] == after["day"] and report["days"][0]["calls"] == 3

    shown = daemon.cli("status")
    assert shown.returncode == 0, shown.stderr
    assert f"today ({after['day']}): 2,500 in, 55 out, 0 cache read, 0 cache write (3 calls)" in shown.stdout
    assert "total: 2,500 in, 55 out" in shown.stdout and "top session alpha: 2,000 in" in shown.stdout
    listed = daemon.cli("usage", "--session", "beta")
    assert listed.returncode == 0, listed.stderr
    assert "session beta total: 500 in, 5 out" in listed.stdout and "by day:" in listed.stdout
    as_json = json.loads(daemon.cli("usage", "--json").stdout)
    assert as_json["total"]["inputTokens"] == 2500


async def test_a_graceful_stop_saves_usage_not_yet_written_and_offline_usage_reads_it(daemon_factory,
                                                                                    fake_model: FakeAnthropic):
    daemon = daemon_factory({"CLAWGATE_STATE__USAGE_FLUSH_SECONDS": "3600"})  # only the shutdown writes
    fake_model.enqueue(text("hi", input_tokens=70, output_tokens=3))
    async with daemon.client() as client:
        await asyncio.wait_for(client.chat("hello"), DEADLINE)
    assert saved_calls(daemon.home) == 0
    assert daemon.terminate() == 0
    assert saved_calls(daemon.home) == 1
    offline = daemon.cli("usage", "--json")  # no daemon: read from the state file
    assert offline.returncode == 0, offline.stderr
    assert json.loads(offline.stdout)["today"]["inputTokens"] == 70
    daemon.start()
    async with daemon.client() as client:
        assert (await client.request("status"))["usage"]["total"]["input_tokens"] == 70
