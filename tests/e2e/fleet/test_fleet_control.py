"""A WebSocket client on one process, the run on another: it sees the run's events and its reply,
answers its approval and stops it."""

from __future__ import annotations

import asyncio
from typing import Any, Callable

import redis

from clawgate.agent.fleet.keys import partition_of
from tests.fakes.anthropic_api import FakeAnthropic, text, tool_use
from tests.fleet_support import PARTITIONS, Fleet
from tests.harness import DaemonProcess
from tests.waiting import DEFAULT_TIMEOUT, wait_until, wait_until_async


def remote_session(fleet: Fleet, here: DaemonProcess, name: str) -> str:
    """A session whose partition another process holds."""
    r = redis.Redis.from_url(fleet.redis_url, decode_responses=True)
    for i in range(1000):
        key = f"{name}-{i}"
        holder = fleet.holder(r, partition_of(key, PARTITIONS))
        if holder is not None and holder != here.node:  # type: ignore[attr-defined]
            return key
    raise AssertionError("every partition is held by the client's own process")


async def until(client: Any, seen: list[dict[str, Any]], match: Callable[[dict[str, Any]], bool], what: str,
                timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
    """The first event frame that matches (every frame read is kept in `seen`)."""
    async def scan() -> dict[str, Any]:
        async for frame in client.events():
            seen.append(frame)
            if match(frame):
                return frame
        raise AssertionError(f"the connection closed while waiting for {what}")

    try:
        return await asyncio.wait_for(scan(), timeout)
    except asyncio.TimeoutError:
        raise AssertionError(f"timed out after {timeout:g} s waiting for {what}; saw {[f['event'] for f in seen]}") from None


def test_a_client_on_one_process_follows_approves_and_stops_a_run_on_another(
        fleet_factory, fake_model: FakeAnthropic) -> None:
    fleet: Fleet = fleet_factory()
    procs = [fleet.add() for _ in range(3)]
    r = fleet.spread(3)
    here = procs[0]
    session = remote_session(fleet, here, "gateway-remote")
    fake_model.enqueue(tool_use("exec", {"argv": ["cat", "/etc/hostname"]}), text("approved and done"),
                       text("never sent", delay=30.0))

    async def scenario() -> None:
        seen: list[dict[str, Any]] = []
        async with here.client() as client:
            ack = await client.request("chat.send", {"session": session, "text": "read the host name"})
            # the approval the run on the other worker asks for reaches this client, and its answer goes back
            requested = await until(client, seen, lambda f: f["event"] == "approval"
                                    and f["payload"].get("state") == "requested", "the relayed approval request")
            await client.request("approvals.resolve", {"id": requested["payload"]["id"], "approve": True})
            final = await until(client, seen, lambda f: f["event"] == "chat" and f["payload"].get("runId") == ack["runId"]
                                and f["payload"].get("state") == "final", "the relayed final reply")
            assert final["payload"]["text"] == "approved and done"
            agent = [f["payload"] for f in seen + client._events if f["event"] == "agent"]
            assert any(p.get("stream") == "tool_end" and p.get("tool") == "exec" for p in agent), agent
            # a run on the other worker, stopped from here
            ack2 = await client.request("chat.send", {"session": session, "text": "take your time"})
            await wait_until_async(lambda: len(fake_model.requests) >= 3, "the slow model call on its way")
            stopped = await client.request("chat.stop", {"session": session})
            assert stopped["stopped"] is True
            final2 = await until(client, seen, lambda f: f["event"] == "chat" and f["payload"].get("runId") == ack2["runId"]
                                 and f["payload"].get("state") in ("final", "error"), "the stopped run's reply")
            assert final2["payload"]["text"] == "Stopped."

    asyncio.run(scenario())
