"""The heartbeat end to end: the real daemon with a fast interval, requests counted on the fake
Messages API. Idle costs zero requests; an in-progress task is continued; HEARTBEAT_OK is not
delivered; a busy session is skipped."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import time
from typing import Any, Callable

from clawgate.gateway.client import GatewayClient
from tests.fakes.anthropic_api import FakeAnthropic, last_user_text, text, tool_use
from tests.harness import DaemonProcess
from tests.waiting import DEFAULT_TIMEOUT

PLAN = tool_use("task", {"action": "plan", "goal": "Write the report", "steps": ["outline", "draft"]})


def fast(interval: float, **extra: str) -> dict[str, str]:
    env = {"CLAWGATE_HEARTBEAT__INTERVAL_SECONDS": str(interval)}
    env.update({f"CLAWGATE_HEARTBEAT__{k.upper()}": v for k, v in extra.items()})
    return env


async def collect(client: GatewayClient, seconds: float, stop: Callable[[dict[str, Any]], bool] | None = None,
                  ) -> list[dict[str, Any]]:
    """Every event frame for `seconds` (or until `stop` matches one)."""
    frames: list[dict[str, Any]] = []

    async def scan() -> None:
        async for frame in client.events():
            frames.append(frame)
            if stop and stop(frame):
                return
    try:
        await asyncio.wait_for(scan(), seconds)
    except asyncio.TimeoutError:
        if stop:
            raise AssertionError(f"no matching event within {seconds}s; saw {[f['event'] for f in frames][-20:]}") from None
    return frames


def beats(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [f["payload"] for f in frames if f["event"] == "heartbeat"]


def heartbeat_requests(fake: FakeAnthropic) -> list[dict[str, Any]]:
    return [r for r in fake.requests if "[heartbeat]" in last_user_text(r)]


async def test_idle_heartbeat_makes_no_model_request(daemon_factory, fake_model: FakeAnthropic) -> None:
    daemon = daemon_factory(fast(0.1))
    idle: list[dict[str, Any]] = []

    def fifteenth_idle_beat(frame: dict[str, Any]) -> bool:
        idle.extend(beats([frame]))
        return sum(b["status"] == "idle" for b in idle) >= 15
    async with daemon.client(subscribe="*") as client:
        await collect(client, DEFAULT_TIMEOUT, stop=fifteenth_idle_beat)  # many intervals passed …
    assert fake_model.requests == []  # … and not one model call


def heartbeat_outbox(daemon: DaemonProcess) -> list[dict[str, Any]]:
    db = sqlite3.connect(daemon.home / "state" / "clawgate.db")
    try:
        bodies = [json.loads(b) for (b,) in db.execute("SELECT body FROM outbox")]
    finally:
        db.close()
    return [b for b in bodies if (b.get("in_reply_to") or "").startswith("hb:")]


async def test_an_in_progress_task_is_continued_and_acks_are_not_delivered(daemon_factory, fake_model) -> None:
    daemon = daemon_factory(fast(0.3, model="claude-haiku-test"))
    fake_model.enqueue_for("write the report", PLAN, text("Planned; I will keep going."))
    fake_model.enqueue_for("[heartbeat]",
                           tool_use("task", {"action": "complete", "step": 1, "verification": "outline.md has 5 sections"}),
                           text("Outline done and checked; drafting next."))
    fake_model.responder = lambda body: text("HEARTBEAT_OK")  # every later beat only acknowledges
    async with daemon.client(subscribe=["work"]) as client:
        await client.request("chat.send", {"session": "work", "text": "please write the report"})
        frames = await collect(client, 15, stop=lambda f: f["event"] == "chat" and f["payload"]["state"] == "final"
                               and f["payload"]["runId"].startswith("hb:"))
        later = await collect(client, DEFAULT_TIMEOUT, stop=lambda f: f["event"] == "heartbeat"
                              and "no task progress" in f["payload"].get("skipped", {}).get("work", ""))
    continued = frames[-1]["payload"]
    assert continued["session"] == "work" and continued["text"] == "Outline done and checked; drafting next."
    assert continued["from"] == {"kind": "heartbeat"}  # clients label it as the heartbeat's
    hb = heartbeat_requests(fake_model)
    assert hb[0]["model"] == "claude-haiku-test" and fake_model.requests[0]["model"] != "claude-haiku-test"
    assert "Write the report" in last_user_text(hb[0])  # the task state is in the heartbeat turn
    (task_file,) = (daemon.home / "state" / "tasks").glob("t_*.json")
    task = json.loads(task_file.read_text())
    assert task["status"] == "in_progress" and task["steps"][0]["status"] == "done"
    # later beats answered HEARTBEAT_OK: acknowledged, never delivered
    finals = [f["payload"]["text"] for f in frames + later if f["event"] == "chat" and f["payload"]["state"] == "final"]
    assert "HEARTBEAT_OK" not in finals
    assert any(b["status"] == "acknowledged" for b in beats(later))
    assert [b["text"] for b in heartbeat_outbox(daemon)] == ["Outline done and checked; drafting next."]
    # a task that stops moving is left alone: 3 beats without progress (the default), then skipped
    on_heartbeat_model = [r for r in fake_model.requests if r["model"] == "claude-haiku-test"]
    assert len(on_heartbeat_model) == 2 + 3  # the working beat (tool call + answer), then 3 acks


async def test_a_busy_session_is_skipped(daemon_factory, fake_model) -> None:
    daemon = daemon_factory(fast(0.2))
    # the plan is made, then the answer takes 2 s: an in-progress task in a busy session. A heartbeat
    # request that reaches the model before that answer has left it came while the session was busy.
    answered = threading.Event()
    while_busy: list[dict[str, Any]] = []

    def respond(body: dict[str, Any]) -> Any:
        if "[heartbeat]" in last_user_text(body):
            if not answered.is_set():
                while_busy.append(body)
            return text("HEARTBEAT_OK")
        time.sleep(2.0)  # the run's answer (after the plan's tool result): the session stays busy meanwhile
        answered.set()
        return text("Planned.")

    fake_model.enqueue_for("write the report", PLAN)
    fake_model.responder = respond
    async with daemon.client(subscribe=["work"]) as client:
        await client.request("chat.send", {"session": "work", "text": "please write the report"})
        frames = await collect(client, 15, stop=lambda f: f["event"] == "chat" and f["payload"]["state"] == "final")
        after = await collect(client, 10, stop=lambda f: f["event"] == "heartbeat" and f["payload"]["status"] == "acknowledged")
    skipped = [b for b in beats(frames) if b.get("skipped", {}).get("work") == "session busy"]
    assert len(skipped) >= 5
    assert not while_busy and heartbeat_requests(fake_model)  # none while busy, one after
    assert frames[-1]["payload"]["text"] == "Planned."
    # the heartbeat turn ran once the session was free, and its HEARTBEAT_OK reached nobody
    assert not [f for f in after if f["event"] == "chat" and f["payload"]["state"] == "final"]
