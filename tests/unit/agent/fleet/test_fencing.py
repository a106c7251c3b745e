"""Fencing against a real redis-server: a worker whose partition lease moved on writes nothing."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from clawgate.agent.bus import InboundMessage, OutboundMessage
from clawgate.agent.fleet.bus import Fenced
from clawgate.agent.fleet.keys import partition_of
from clawgate.agent.fleet.node import FleetNode
from clawgate.config.schema import FleetSettings
from tests.waiting import wait_until_async

SESSION = "telegram:99"


def node(url: str, prefix: str, name: str, ttl: float = 1.0) -> FleetNode:
    return FleetNode(FleetSettings(redis_url=url, prefix=prefix, node=name, partitions=4, lease_seconds=ttl), keep_days=1)


async def test_a_worker_whose_lease_moved_cannot_answer_or_write_the_session(redis_server) -> None:
    prefix = "u" + uuid.uuid4().hex[:8]
    a = node(redis_server.url, prefix, "a")
    await a.start()
    n = partition_of(SESSION, 4)
    await wait_until_async(lambda: a.partitions.lease_of(n) is not None, "a holding the partition")
    msg = InboundMessage(channel="telegram", chat_id="99", sender_id="99", session_key=SESSION, text="hi", id="in_f1")
    assert a.bus.publish_inbound(msg) is True
    assert a.bus.publish_inbound(msg) is False  # the idempotency key: accepted once
    got = await asyncio.wait_for(a.bus.next_inbound(), 30)
    assert got.id == "in_f1"
    a.guard(SESSION)  # held: the session log may be written
    # a stalls: its lease loop stops (as under SIGSTOP) and the lease runs out; b takes the partition
    for task in a._tasks:
        task.cancel()
    b = node(redis_server.url, prefix, "b")
    await b.start()
    await wait_until_async(lambda: b.partitions.lease_of(n) is not None, "b taking the partition over")
    with pytest.raises(Fenced, match="no longer holds partition"):
        a.guard(SESSION)
    reply = OutboundMessage(channel="telegram", chat_id="99", text="late", session_key=SESSION, in_reply_to="in_f1")
    assert a.bus.publish_outbound(reply, answers="in_f1") is False
    assert a.bus.delivery_status(reply.id) is None  # nothing queued
    assert a.bus.is_unanswered("in_f1")
    assert a.bus.refused == 1
    # b finds the message a never answered, and answers it
    again = await asyncio.wait_for(b.bus.next_inbound(), 30)
    assert again.id == "in_f1"
    ok = OutboundMessage(channel="telegram", chat_id="99", text="once", session_key=SESSION, in_reply_to="in_f1")
    assert b.bus.publish_outbound(ok, answers="in_f1") is True
    assert not b.bus.is_unanswered("in_f1")
    assert b.bus.delivery_status(ok.id) == "pending"
    out = await asyncio.wait_for(b.bus.next_outbound(), 30)
    assert out.id == ok.id
    b.bus.mark_delivered(ok.id)
    assert b.bus.delivery_status(ok.id) == "delivered"
    assert b.bus.counts() == {"inboxOpen": 0, "outboxPending": 0}
    await b.stop()
    b.close()
    await a.r.aclose()
    a.close()


async def test_the_stale_token_is_refused_inside_redis_even_when_the_local_deadline_has_not_passed(redis_server) -> None:
    """The Lua check itself: the worker still believes it holds the lease, Redis says otherwise."""
    prefix = "u" + uuid.uuid4().hex[:8]
    a = node(redis_server.url, prefix, "a", ttl=30.0)
    await a.start()
    n = partition_of(SESSION, 4)
    await wait_until_async(lambda: a.partitions.lease_of(n) is not None, "a holding the partition")
    a.bus.publish_inbound(InboundMessage(channel="t", chat_id="1", sender_id="1", session_key=SESSION, text="x", id="in_f2"))
    await asyncio.wait_for(a.bus.next_inbound(), 30)
    # the lease is taken from under it (what an expiry plus another worker's ACQUIRE leaves behind)
    a.sync.set(f"{prefix}:lease:p{n}", "someone-else|99")
    assert a.partitions.lease_of(n) is not None  # locally still "held"
    reply = OutboundMessage(channel="t", chat_id="1", text="dup", session_key=SESSION)
    assert a.bus.publish_outbound(reply, answers="in_f2") is False
    assert a.bus.delivery_status(reply.id) is None and a.bus.is_unanswered("in_f2")
    for task in a._tasks:
        task.cancel()
    await a.r.aclose()
    a.close()
