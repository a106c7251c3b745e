"""Pending approvals are listed fleet-wide: `approvals.list` on any process shows the approvals a run
on any worker waits for (the web page's approvals panel uses the same method), and answering one
from there lets the run go on where it runs."""

from __future__ import annotations

import asyncio
from typing import Any

import redis

from clawgate.agent.fleet.keys import partition_of
from tests.e2e.fleet.test_fleet_control import remote_session, until
from tests.fakes.anthropic_api import FakeAnthropic, text, tool_use
from tests.fleet_support import PARTITIONS, Fleet
from tests.waiting import wait_until, wait_until_async


def test_an_approval_asked_on_one_worker_is_listed_and_answered_on_another(fleet_factory,
                                                                           fake_model: FakeAnthropic) -> None:
    fleet: Fleet = fleet_factory()
    procs = [fleet.add() for _ in range(3)]
    r = fleet.spread(3)
    here = procs[0]
    session = remote_session(fleet, here, "approve-remote")
    worker = fleet.by_node(str(fleet.holder(r, partition_of(session, PARTITIONS))))  # where the run will be
    fake_model.enqueue(tool_use("exec", {"argv": ["cat", "/etc/hostname"]}), text("approved and done"))

    async def scenario() -> None:
        seen: list[dict[str, Any]] = []
        async with worker.client() as watcher:
            # the run starts through the worker's own client; the client on `here` never saw the request
            ack = await watcher.request("chat.send", {"session": session, "text": "read the host name"})
            await until(watcher, seen, lambda f: f["event"] == "approval" and f["payload"].get("state") == "requested",
                        "the approval request on the worker")
            async with here.client() as client:
                pending = (await client.request("approvals.list"))["pending"]
                assert [p["session_key"] for p in pending] == [session], pending
                assert pending[0]["tool"] == "exec"
                await client.request("approvals.resolve", {"id": pending[0]["id"], "approve": True})
                final = await until(watcher, seen, lambda f: f["event"] == "chat"
                                    and f["payload"].get("runId") == ack["runId"]
                                    and f["payload"].get("state") == "final", "the run's final reply")
                assert final["payload"]["text"] == "approved and done"  # the run went on, on the worker
                # answered: removed from the fleet's list, so no process lists it any more
                await wait_until_async(lambda: r.hlen(f"{fleet.prefix}:approvals") == 0, "the approval unlisted")
                assert await client.request("approvals.list") == {"pending": []}
                # a run stopped while it waits: its approval leaves the list too
                fake_model.enqueue(tool_use("exec", {"argv": ["cat", "/etc/hostname"]}), text("never sent"))
                await watcher.request("chat.send", {"session": session, "text": "read it again"})
                await wait_until_async(lambda: r.hlen(f"{fleet.prefix}:approvals") == 1, "the second approval listed")
                assert [p["session_key"] for p in (await client.request("approvals.list"))["pending"]] == [session]
                assert (await client.request("chat.stop", {"session": session}))["stopped"] is True
                await wait_until_async(lambda: r.hlen(f"{fleet.prefix}:approvals") == 0, "the stopped run's approval unlisted")
                assert await client.request("approvals.list") == {"pending": []}

    asyncio.run(scenario())
