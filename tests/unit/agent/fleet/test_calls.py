"""Forwarded platform calls against a real redis-server: run once on the holder, answered to the caller,
and never run after the caller gave up; a holder gone mid-call is reported as unconfirmed."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import redis.asyncio as aioredis

from clawgate.agent.fleet.calls import Calls
from clawgate.agent.fleet.keys import Keys
from tests.waiting import wait_until_async

NAME = "discord:abc123"


def calls(url: str, prefix: str, node: str, *, wait: float = 10.0, ttl: float = 3.0) -> Calls:
    return Calls(aioredis.Redis.from_url(url, decode_responses=True), Keys(prefix), node, ttl, wait=wait)


async def hold(c: Calls, node: str) -> None:
    """Stand in for the singleton lease the holder would have taken."""
    await c.r.set(c.keys.lease(f"s:{NAME}"), f"{node}|1", ex=60)


async def test_a_call_runs_on_the_holder_and_its_answer_comes_back(redis_server) -> None:
    prefix = "c" + uuid.uuid4().hex[:8]
    holder, caller = calls(redis_server.url, prefix, "a"), calls(redis_server.url, prefix, "b")
    await hold(holder, "a")
    ran: list[tuple[str, dict[str, Any]]] = []

    async def execute(op: str, args: dict[str, Any]) -> dict[str, Any]:
        ran.append((op, args))
        if args.get("text") == "too long":
            return {"error": "delivery", "message": "400 too long", "permanent": True, "retry_after": None}
        return {"ok": f"msg-{len(ran)}"}

    serving = asyncio.create_task(holder.serve(NAME, execute))
    try:
        assert await caller.holder(NAME) == "a"
        assert await caller.call(NAME, "send_text", {"text": "hi"}) == {"ok": "msg-1"}
        refused = await caller.call(NAME, "send_text", {"text": "too long"})
        assert refused["error"] == "delivery" and refused["permanent"] is True
        assert ran == [("send_text", {"text": "hi"}), ("send_text", {"text": "too long"})]
        assert (caller.forwarded, holder.served) == (2, 2)
    finally:
        serving.cancel()
        await asyncio.gather(serving, return_exceptions=True)


async def test_a_call_left_waiting_by_a_dead_holder_is_run_by_the_next_one(redis_server) -> None:
    prefix = "c" + uuid.uuid4().hex[:8]
    caller, successor = calls(redis_server.url, prefix, "b"), calls(redis_server.url, prefix, "c")
    pending = asyncio.create_task(caller.call(NAME, "typing", {"target": "x"}))  # nobody serves yet
    await wait_until_async(lambda: caller.r.llen(f"{prefix}:calls:{NAME}"), "the call queued")

    async def execute(op: str, args: dict[str, Any]) -> dict[str, Any]:
        return {"ok": None}

    await hold(successor, "c")
    serving = asyncio.create_task(successor.serve(NAME, execute))
    try:
        assert await asyncio.wait_for(pending, 30) == {"ok": None}
    finally:
        serving.cancel()
        await asyncio.gather(serving, return_exceptions=True)


async def test_a_call_nobody_took_in_time_fails_retryably_and_is_never_run_later(redis_server) -> None:
    prefix = "c" + uuid.uuid4().hex[:8]
    caller, late = calls(redis_server.url, prefix, "b", wait=1.0), calls(redis_server.url, prefix, "c")
    answer = await caller.call(NAME, "send_text", {"text": "hi"})
    assert answer["error"] == "delivery" and answer["permanent"] is False
    assert "no process holding the discord:abc123 connection took it" in answer["message"]
    # the request may still sit where a holder would find it (pushed back by hand): the claim stops it
    request = await late.r.lpush(f"{prefix}:calls:{NAME}", '{"id": "x1", "op": "send_text", "args": {}, "from": "b"}')
    assert request == 1
    await late.r.set(f"{prefix}:call:x1", "gave-up")
    ran: list[str] = []

    async def execute(op: str, args: dict[str, Any]) -> dict[str, Any]:
        ran.append(op)
        return {"ok": "sent"}

    serving = asyncio.create_task(late.serve(NAME, execute))
    try:
        # a call after it is answered only once the stale one was read (FIFO) and refused by its claim
        fresh = calls(redis_server.url, prefix, "d")
        assert await asyncio.wait_for(fresh.call(NAME, "typing", {}), 30) == {"ok": "sent"}
        assert await late.r.llen(f"{prefix}:answers:b") == 0  # nothing ran, nothing answered
        assert ran == ["typing"] and late.served == 1
    finally:
        serving.cancel()
        await asyncio.gather(serving, return_exceptions=True)


async def test_a_holder_that_loses_the_connection_mid_call_leaves_it_unconfirmed(redis_server) -> None:
    prefix = "c" + uuid.uuid4().hex[:8]
    holder, caller = calls(redis_server.url, prefix, "a", ttl=3.0), calls(redis_server.url, prefix, "b", wait=2.0)
    await hold(holder, "a")
    started = asyncio.Event()

    async def execute(op: str, args: dict[str, Any]) -> dict[str, Any]:
        started.set()
        await asyncio.Event().wait()  # the platform never answers; the holder then dies
        return {"ok": "never"}

    serving = asyncio.create_task(holder.serve(NAME, execute))
    pending = asyncio.create_task(caller.call(NAME, "send_text", {"text": "hi"}))
    await asyncio.wait_for(started.wait(), 30)
    await holder.r.delete(holder.keys.lease(f"s:{NAME}"))  # its lease is gone (killed, expired)
    answer = await asyncio.wait_for(pending, 60)
    assert answer["error"] == "unconfirmed" and "a, which stopped holding" in answer["message"]
    serving.cancel()
    await asyncio.gather(serving, return_exceptions=True)
