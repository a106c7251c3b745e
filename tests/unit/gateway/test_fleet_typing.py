"""A kit's typing check in a fleet: answered without a round trip on the event loop, from readings of
the fleet's open messages taken in the background (a real redis-server)."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace

import redis.asyncio as aioredis

from clawgate.agent.fleet.keys import Keys
from clawgate.gateway.fleet import OpenInFleet
from tests.fleet_support import redis_server  # noqa: F401  (fixture)
from tests.harness import free_port
from tests.waiting import wait_until_async

KEY = "discord:42"


async def test_open_until_answered_and_open_again_for_the_next_message(redis_server) -> None:  # noqa: F811
    keys = Keys("t" + uuid.uuid4().hex[:8])
    r = aioredis.Redis.from_url(redis_server.url, decode_responses=True)
    check = OpenInFleet(SimpleNamespace(r=r, keys=keys))  # type: ignore[arg-type]
    try:
        await r.sadd(keys.open_set(KEY), "in_1")
        check.taken_in(KEY)
        assert check(KEY) is True  # just taken in: open until read
        await wait_until_async(lambda: check.known.get(KEY) is True, "the first reading")
        await r.srem(keys.open_set(KEY), "in_1")  # answered (by whichever process ran the turn)
        check(KEY)
        await wait_until_async(lambda: check(KEY) is False, "the answer seen")
        check.taken_in(KEY)  # the next message: the old reading says nothing about it
        assert check(KEY) is True
    finally:
        await r.aclose()


async def test_a_redis_that_is_away_never_holds_up_the_check() -> None:
    keys = Keys("t")
    r = aioredis.Redis.from_url(f"redis://127.0.0.1:{free_port()}/0", socket_connect_timeout=5)
    check = OpenInFleet(SimpleNamespace(r=r, keys=keys))  # type: ignore[arg-type]
    try:
        check.taken_in(KEY)
        answers = [check(KEY) for _ in range(1000)]  # synchronous: nothing here can wait on Redis
        assert answers == [True] * 1000 and list(check._reading) == [KEY]  # one reading in flight, not a thousand
        await wait_until_async(lambda: check(KEY) is False, "the failed reading counted as answered")
    finally:
        await r.aclose()
