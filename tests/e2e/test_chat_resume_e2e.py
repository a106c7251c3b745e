"""Gateway replies survive a reconnect: numbered per session, kept undelivered until a client of
the session has them, and handed over again to a client that resumes (docs/protocol.md)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from clawgate.gateway.client import GatewayClient, GatewayError
from tests.fakes.anthropic_api import text
from tests.harness import ROOT, DaemonProcess
from tests.waiting import wait_until_async


def _outbox(home: Path, run_id: str) -> list[str]:
    """The delivery status of every reply to `run_id`."""
    with sqlite3.connect(f"file:{home / 'state/clawgate.db'}?mode=ro", uri=True) as db:
        rows = db.execute("SELECT body, status FROM outbox").fetchall()
    return [status for body, status in rows if json.loads(body)["in_reply_to"] == run_id]


def _client(daemon: DaemonProcess, **kwargs: Any) -> GatewayClient:
    return GatewayClient(daemon.url, daemon.client_token, open_timeout=60, **kwargs)


def _gated(fake_model, answer: str) -> threading.Event:
    """The model answers `answer` only once the returned gate is set (for messages naming 'gated')."""
    gate = threading.Event()

    def respond(body: dict[str, Any]):
        if "gated" in json.dumps(body["messages"][-1]):
            gate.wait(120)
        return text(answer if "gated" in json.dumps(body["messages"][-1]) else "pong")

    fake_model.responder = respond
    return gate


async def _no_other_client(daemon: DaemonProcess) -> None:
    """Wait until the daemon has seen every earlier client go (a close it has not read yet would
    still count as a listener)."""
    async with _client(daemon, events=["tick"]) as probe:
        async def alone() -> bool:
            return (await probe.request("status"))["clients"] == 1
        await wait_until_async(alone, "every earlier client to be gone", interval=0.05)


async def _finals(client: GatewayClient, run_id: str) -> list[dict[str, Any]]:
    """The final chat events of `run_id` received so far, after one more round trip (anything the
    daemon queued before answering it has arrived by then)."""
    await client.request("status")
    return [f["payload"] for f in client._events
            if f["event"] == "chat" and f["payload"].get("runId") == run_id and f["payload"]["state"] != "delta"]


async def _next_final(client: GatewayClient, run_id: str) -> dict[str, Any]:
    async def read() -> dict[str, Any]:
        async for frame in client.events():
            if frame["event"] == "chat" and frame["payload"].get("runId") == run_id and frame["payload"]["state"] != "delta":
                client._events.append(frame)  # kept for _finals
                return frame["payload"]
        raise AssertionError("connection closed before the reply")
    return await asyncio.wait_for(read(), 60)


async def test_a_reply_made_while_no_client_listens_waits_and_is_resumed_once(daemon, fake_model):
    gate = _gated(fake_model, "the gated answer")
    async with _client(daemon) as client:
        ack = await client.request("chat.send", {"session": "r", "text": "gated question"})
    run_id, seen = ack["runId"], ack["seq"]
    assert seen == 0  # the session has no reply yet
    await _no_other_client(daemon)
    gate.set()  # the answer is made while no client of session r is connected

    await wait_until_async(lambda: _outbox(daemon.home, run_id) == ["pending"], "the reply in the outbox")
    async with _client(daemon, subscribe=["other"]) as other:  # a client of another session is no client of r
        await other.chat("ping", session="other")
    assert _outbox(daemon.home, run_id) == ["pending"]  # still undelivered: nobody of session r has it

    daemon.kill()  # the undelivered reply is durable: a restart keeps it pending
    daemon.start()
    await wait_until_async(lambda: _outbox(daemon.home, run_id) == ["pending"], "the reply pending after the restart")

    async with _client(daemon, resume={"r": seen}) as client:
        final = await _next_final(client, run_id)
        assert final["text"] == "the gated answer" and final["seq"] == 1 and final["session"] == "r"
        assert len(await _finals(client, run_id)) == 1  # exactly once
        await wait_until_async(lambda: _outbox(daemon.home, run_id) == ["delivered"], "the reply marked delivered")

    # Resuming from the number just seen hands nothing over again; from before it, the reply again.
    async with _client(daemon, resume={"r": 1}) as client:
        assert await _finals(client, run_id) == []
    async with _client(daemon, resume={"r": 0}) as client:
        assert [f["seq"] for f in await _finals(client, run_id)] == [1]


async def test_a_client_that_missed_a_live_reply_resumes_it(daemon, fake_model):
    gate = _gated(fake_model, "answer two")
    async with _client(daemon, subscribe=["s"]) as watcher:
        async with _client(daemon) as sender:
            ack = await sender.request("chat.send", {"session": "s", "text": "gated two"})
        gate.set()
        live = await _next_final(watcher, ack["runId"])  # delivered live to the watcher
    await wait_until_async(lambda: _outbox(daemon.home, ack["runId"]) == ["delivered"], "delivery")
    async with _client(daemon, resume={"s": ack["seq"]}) as sender:  # the sender was away: it catches up
        assert [f["text"] for f in await _finals(sender, ack["runId"])] == ["answer two"]
    assert live["seq"] == ack["seq"] + 1


async def test_a_bad_resume_is_one_clear_error(daemon):
    with pytest.raises(GatewayError) as caught:
        async with _client(daemon, resume={"main": "twelve"}):
            pass
    assert caught.value.code == "invalid_params" and "resume: must map session keys" in caught.value.message


async def test_clawgate_chat_gets_its_answer_across_a_daemon_restart(daemon, fake_model):
    gate = _gated(fake_model, "the answer after the restart")
    chat = subprocess.Popen([sys.executable, "-m", "clawgate.gateway.cli", "chat", "--session", "c", "-m", "gated, and wait"],
                            env=daemon.env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        await wait_until_async(lambda: len(fake_model.requests) >= 1, "the question to reach the model")
        daemon.kill()  # the chat's connection drops while it waits for the answer
        daemon.start()
        gate.set()  # the replayed message is answered by the restarted daemon
        out, err = await asyncio.to_thread(chat.communicate, timeout=120)
    finally:
        if chat.poll() is None:
            chat.kill()
    assert chat.returncode == 0, err
    assert out == "the answer after the restart\n"  # once
    assert "reconnecting" in err
