"""The bus's message-path writes from coroutines, gathered into pipelines, against a real redis-server:
the same answers and the same fencing as the synchronous calls, in the order they were made."""

from __future__ import annotations

import asyncio
import uuid

from clawgate.agent.bus import InboundMessage, OutboundMessage
from clawgate.agent.fleet.keys import partition_of
from clawgate.agent.fleet.node import FleetNode
from clawgate.config.schema import FleetSettings
from tests.waiting import wait_until_async

SESSION = "telegram:7"


async def held(url: str, ttl: float = 30.0) -> tuple[FleetNode, int, str]:
    prefix = "u" + uuid.uuid4().hex[:8]
    a = FleetNode(FleetSettings(redis_url=url, prefix=prefix, node="a", partitions=4, lease_seconds=ttl), keep_days=1)
    await a.start()
    n = partition_of(SESSION, 4)
    await wait_until_async(lambda: a.partitions.lease_of(n) is not None, "a holding the partition")
    return a, n, prefix


async def done(a: FleetNode) -> None:
    await a.stop()
    a.close()


def inbound(i: int) -> InboundMessage:
    return InboundMessage(channel="telegram", chat_id="7", sender_id="7", session_key=SESSION, text=f"m{i}", id=f"in_b{i}")


async def test_concurrent_intake_is_gathered_and_kept_in_order_and_accepted_once(redis_server) -> None:
    a, n, prefix = await held(redis_server.url)
    try:
        results = await asyncio.gather(*(a.bus.publish_inbound_async(inbound(i)) for i in range(200)))
        assert results == [True] * 200
        assert a.bus.batch.round_trips < 200  # calls made while one pipeline was out went in the next
        assert await a.bus.publish_inbound_async(inbound(5)) is False  # the idempotency key: accepted once
        bodies = [fields["body"] for _, fields in a.sync.xrange(f"{prefix}:in:{n}")]
        assert [f'"m{i}"' in body for i, body in enumerate(bodies)] == [True] * 200  # in the order they were made
        taken = [(await asyncio.wait_for(a.bus.next_inbound(), 30)).id for _ in range(200)]
        assert taken == [f"in_b{i}" for i in range(200)]
    finally:
        await done(a)


async def test_attempts_and_answers_from_coroutines(redis_server) -> None:
    a, n, prefix = await held(redis_server.url)
    try:
        await a.bus.publish_inbound_async(inbound(1))
        await asyncio.wait_for(a.bus.next_inbound(), 30)
        assert await a.bus.begin_attempt_async("in_b1", 0) == 1
        assert await a.bus.begin_attempt_async("in_b1", 0) == 2  # no progress since: counted
        assert await a.bus.begin_attempt_async("in_b1", 3) == 1  # further along: the count starts again
        reply = OutboundMessage(channel="telegram", chat_id="7", text="once", session_key=SESSION, in_reply_to="in_b1")
        assert await a.bus.publish_outbound_async(reply, answers="in_b1") is True
        assert not a.bus.is_unanswered("in_b1") and a.bus.answered == 1
        assert a.bus.stale("in_b1")  # no longer in hand here
        again = OutboundMessage(channel="telegram", chat_id="7", text="twice", session_key=SESSION, in_reply_to="in_b1")
        assert await a.bus.publish_outbound_async(again, answers="in_b1") is False  # one answer per message
        out = await asyncio.wait_for(a.bus.next_outbound(), 30)
        assert out.id == reply.id and a.bus.deliverable(out.id)
        a.bus.mark_delivered(out.id)  # at once, synchronously: the window for a second send after a crash
        assert a.bus.delivery_status(out.id) == "delivered"
        assert a.bus.counts() == {"inboxOpen": 0, "outboxPending": 0}
    finally:
        await done(a)


async def test_a_stale_token_is_refused_inside_redis_on_the_gathered_path_too(redis_server) -> None:
    a, n, prefix = await held(redis_server.url)
    try:
        await a.bus.publish_inbound_async(inbound(2))
        await asyncio.wait_for(a.bus.next_inbound(), 30)
        a.sync.set(f"{prefix}:lease:p{n}", "someone-else|99")  # taken from under it; locally still "held"
        assert a.partitions.lease_of(n) is not None
        reply = OutboundMessage(channel="telegram", chat_id="7", text="late", session_key=SESSION, in_reply_to="in_b2")
        assert await a.bus.publish_outbound_async(reply, answers="in_b2") is False
        assert a.bus.delivery_status(reply.id) is None and a.bus.is_unanswered("in_b2")
        assert a.bus.refused == 1
    finally:
        for task in a._tasks:
            task.cancel()
        await asyncio.gather(*a._tasks, return_exceptions=True)
        await a.r.aclose()
        a.close()


async def test_an_answer_whose_run_was_cancelled_meanwhile_still_lands_and_is_counted(redis_server) -> None:
    a, n, prefix = await held(redis_server.url)
    try:
        await a.bus.publish_inbound_async(inbound(3))
        await asyncio.wait_for(a.bus.next_inbound(), 30)
        assert not a.bus.stale("in_b3")  # in hand here
        reply = OutboundMessage(channel="telegram", chat_id="7", text="ok", session_key=SESSION, in_reply_to="in_b3")
        task = asyncio.ensure_future(a.bus.publish_outbound_async(reply, answers="in_b3"))
        await asyncio.sleep(0)  # queued
        task.cancel()
        await wait_until_async(lambda: not a.bus.is_unanswered("in_b3"), "the answer landing")
        await wait_until_async(lambda: a.bus.answered == 1, "the answer counted by the bus")
        assert a.bus.stale("in_b3") and a.bus.delivery_status(reply.id) == "pending"
    finally:
        await done(a)


async def test_scripts_are_loaded_again_after_redis_forgot_them(redis_server) -> None:
    a, n, prefix = await held(redis_server.url)
    try:
        assert await a.bus.publish_inbound_async(inbound(4)) is True
        a.sync.script_flush()  # what a Redis restart does to the script cache
        assert await a.bus.publish_inbound_async(inbound(5)) is True
        assert await a.bus.publish_inbound_async(inbound(5)) is False
        assert a.bus.counts()["inboxOpen"] == 2
    finally:
        await done(a)


async def test_durable_waits_for_the_local_writes_the_promise_rests_on(redis_server, tmp_path) -> None:
    """A session log or task write marked for the group commit is on disk before the bus says durable:
    in a fleet as alone (the dispatcher and the channels await durable() before telling anyone)."""
    import threading

    from clawgate.agent.core.durability import Durability

    gate, flushed = threading.Event(), []

    def fsync(path: str) -> None:
        assert gate.wait(30), "the test never opened the gate"
        flushed.append(path)

    a, n, prefix = await held(redis_server.url)
    try:
        a.bus.local_durability = barrier = Durability(fsync=fsync)
        barrier.mark(tmp_path / "session.jsonl")
        waiting = asyncio.ensure_future(a.bus.durable())
        await asyncio.sleep(0)
        assert not waiting.done()  # held back by the disk
        gate.set()
        await asyncio.wait_for(waiting, 30)
        assert flushed == [str(tmp_path / "session.jsonl")]
    finally:
        await done(a)
