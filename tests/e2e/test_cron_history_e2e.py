"""A cron job's answer delivered to gateway:main is part of main's history, through the real daemon:
labelled with its job, read by every client that connects later, numbered so `resume` neither
loses nor repeats it, still there exactly once after kill -9 and restart, and in the model's view
of main so the agent can refer to it."""

from __future__ import annotations

import asyncio
from typing import Any

from clawgate.gateway.client import GatewayClient
from tests.fakes.anthropic_api import FakeAnthropic, text
from tests.harness import DaemonProcess
from tests.waiting import DEFAULT_TIMEOUT, wait_until, wait_until_async

ANSWER = "Stand-up moved to 10:30."


async def _history(daemon: DaemonProcess, **client: Any) -> list[dict[str, Any]]:
    async with daemon.client(**client) as c:
        return (await c.request("chat.history", {"session": "main"}))["messages"]


def _delivered(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in messages if m.get("from")]


async def _job_delivering_to_main(daemon: DaemonProcess) -> dict[str, Any]:
    async with daemon.client() as client:  # not subscribed to main: nobody watches it
        return (await client.request("cron.add", {"message": "Check the stand-up time", "at": "+1s",
                                                  "deliver": "gateway:main", "name": "stand-up"}))["job"]


async def _wait_for_delivered(daemon: DaemonProcess) -> list[dict[str, Any]]:
    async def found() -> list[dict[str, Any]] | None:
        return _delivered(await _history(daemon)) or None
    return await wait_until_async(found, "the cron answer in main's history", timeout=DEFAULT_TIMEOUT, interval=0.2)


async def test_a_cron_answer_delivered_with_no_client_open_is_in_main_history_for_every_client(
        daemon: DaemonProcess, fake_model: FakeAnthropic) -> None:
    fake_model.enqueue_for("stand-up time", text(ANSWER))
    job = await _job_delivering_to_main(daemon)
    (first,) = await _wait_for_delivered(daemon)
    assert first["text"] == ANSWER and first["role"] == "assistant"
    assert first["from"] == {"kind": "cron", "job": job["id"], "name": "stand-up", "schedule": first["from"]["schedule"]}
    assert first["seq"] >= 1 and first["runId"].startswith(f"cron:{job['id']}:")
    # A second client, connecting after the first one left, sees the same entry once.
    assert _delivered(await _history(daemon)) == [first]

    # Numbered like a live reply: resuming before it hands it over once; resuming at it hands over nothing.
    async with _resuming(daemon, {"main": first["seq"] - 1}) as client:
        frame = await asyncio.wait_for(_next_chat(client), DEFAULT_TIMEOUT)
        assert frame["seq"] == first["seq"] and frame["text"] == ANSWER and frame["from"]["kind"] == "cron"
        # A message sent now is answered after it (the next number): the cron reply is not sent again.
        fake_model.enqueue_for("what did the stand-up job say", text("It said the stand-up moved to 10:30."))
        ack = await client.request("chat.send", {"session": "main", "text": "what did the stand-up job say?"})
        answer = await asyncio.wait_for(_next_chat(client), DEFAULT_TIMEOUT)
        assert answer["runId"] == ack["runId"] and answer["seq"] > first["seq"]

    # The agent in main saw the job's answer, labelled, before the person's question.
    request = fake_model.requests[-1]
    seen = "\n".join(block.get("text", "") for message in request["messages"] for block in message["content"]
                     if isinstance(message["content"], list))
    assert 'cron job "stand-up"' in seen and ANSWER in seen
    assert seen.index(ANSWER) < seen.index("what did the stand-up job say?")

    # In time order among main's messages, and once.
    history = await _history(daemon)
    texts = [m["text"] for m in history if m["role"] in ("user", "assistant")]
    assert texts == [ANSWER, "what did the stand-up job say?", "It said the stand-up moved to 10:30."]


async def test_the_delivered_answer_survives_kill_9_exactly_once(daemon: DaemonProcess,
                                                                 fake_model: FakeAnthropic) -> None:
    fake_model.enqueue_for("stand-up time", text(ANSWER))
    await _job_delivering_to_main(daemon)
    # A client receives it live (the daemon counts it delivered), then the daemon dies without warning.
    async with daemon.client(subscribe=["main"]) as client:
        live = await asyncio.wait_for(_next_chat(client), DEFAULT_TIMEOUT)
    assert live["text"] == ANSWER
    (before,) = await _wait_for_delivered(daemon)
    daemon.restart()  # SIGKILL, then start again
    after = await _history(daemon)
    assert _delivered(after) == [before]
    assert before["seq"] == live["seq"]
    # Nothing is handed over again to a client that resumes after it: its next reply is the answer to its message.
    fake_model.enqueue_for("anything else", text("Nothing else."))
    async with _resuming(daemon, {"main": live["seq"]}) as client:
        ack = await client.request("chat.send", {"session": "main", "text": "anything else?"})
        answer = await asyncio.wait_for(_next_chat(client), DEFAULT_TIMEOUT)
        assert answer["runId"] == ack["runId"] and answer["seq"] == live["seq"] + 1
    assert len([r for r in fake_model.requests if "stand-up time" in str(r)]) == 1


async def test_an_answer_waiting_for_a_client_at_kill_9_is_kept_once_after_restart(
        daemon: DaemonProcess, fake_model: FakeAnthropic) -> None:
    fake_model.enqueue_for("stand-up time", text(ANSWER))
    await _job_delivering_to_main(daemon)
    log = daemon.home / "state/sessions/main.jsonl"
    wait_until(lambda: log.exists() and '"kind":"delivered"' in log.read_text(),
               "the cron answer kept in main's log while it waits for a client of main")
    daemon.restart()  # SIGKILL before any client had it: the delivery is sent again after the restart
    async with daemon.client(subscribe=["main"]) as client:
        frame = await asyncio.wait_for(_next_chat(client), DEFAULT_TIMEOUT)
        (kept,) = _delivered((await client.request("chat.history", {"session": "main"}))["messages"])
    assert frame["text"] == kept["text"] == ANSWER and frame["seq"] == kept["seq"]
    assert log.read_text().count('"kind":"delivered"') == 1


def _resuming(daemon: DaemonProcess, seen: dict[str, int]) -> GatewayClient:
    """A client of main that reconnects having seen main's replies up to `seen`."""
    return GatewayClient(daemon.url, daemon.client_token, subscribe=["main"], resume=seen, open_timeout=60)


async def _next_chat(client: GatewayClient) -> dict[str, Any]:
    async for frame in client.events():
        if frame["event"] == "chat" and frame["payload"]["session"] == "main" and frame["payload"]["state"] != "delta":
            return frame["payload"]
    raise AssertionError("the gateway closed the connection")
