"""Leases with fencing tokens: which worker holds which partition, and who runs each singleton.

A lease is a key `lease:<name>` = "<node>|<token>" with a TTL, renewed every third of it. The
token comes from INCR on `fence:<name>`, so each new holder's token is larger than every earlier
one. Writes for a partition carry the holder's lease value and are done by Lua scripts that
compare it with the key atomically (bus.py): a worker that was paused past its lease writes
nothing. Locally a lease counts as held only until `SAFETY` of its TTL after the renewal was
sent (monotonic clock, which keeps running while the process is stopped), so a worker that wakes
from SIGSTOP refuses its own session-log writes before it has even talked to Redis again.

Partitions are spread evenly: each worker aims at ceil(P / live workers); one that holds more
(a worker joined) releases partitions it is not working on; one that holds fewer takes free ones
(a worker left or died: its leases expire after the TTL).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
import zlib
from dataclasses import dataclass
from typing import Awaitable, Callable

import redis
import redis.asyncio as aioredis

from .keys import Keys, partition_lease

log = logging.getLogger("clawgate.fleet")
SAFETY = 0.8  # a lease is trusted locally for this share of its TTL after the renewal was sent

ACQUIRE = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local token = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], ARGV[1] .. '|' .. token, 'PX', ARGV[2])
return token
"""
RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
"""
RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


@dataclass
class Lease:
    name: str
    token: int
    deadline: float  # monotonic

    def value(self, node: str) -> str:
        return f"{node}|{self.token}"

    @property
    def valid(self) -> bool:
        return time.monotonic() < self.deadline


class LeaseClient:
    """The three lease operations, shared by partitions and singletons."""

    def __init__(self, r: "aioredis.Redis", keys: Keys, node: str, ttl: float) -> None:
        self.r, self.keys, self.node, self.ttl = r, keys, node, ttl
        self.ttl_ms = max(1, int(ttl * 1000))
        self._acquire = r.register_script(ACQUIRE)
        self._renew = r.register_script(RENEW)
        self._release = r.register_script(RELEASE)

    async def acquire(self, name: str) -> Lease | None:
        start = time.monotonic()
        token = int(await self._acquire(keys=[self.keys.lease(name), self.keys.fence(name)], args=[self.node, self.ttl_ms]))
        return Lease(name, token, start + self.ttl * SAFETY) if token else None

    async def renew(self, leases: list[Lease]) -> list[Lease]:
        """Renew in one round trip; returns the leases that are gone (expired or taken)."""
        if not leases:
            return []
        start = time.monotonic()
        async with self.r.pipeline(transaction=False) as pipe:
            for lease in leases:
                await self._renew(keys=[self.keys.lease(lease.name)], args=[lease.value(self.node), self.ttl_ms], client=pipe)
            results = await pipe.execute()
        lost = []
        for lease, ok in zip(leases, results):
            if ok and start < lease.deadline:
                lease.deadline = start + self.ttl * SAFETY
            else:
                lost.append(lease)
        return lost

    async def release(self, lease: Lease) -> None:
        lease.deadline = 0.0
        await self._release(keys=[self.keys.lease(lease.name)], args=[lease.value(self.node)])


class Partitions:
    """This worker's partitions. `on_gained(n, lease)` / `on_lost(n)` tell the bus; `busy(n)` says
    whether local work of partition n is still running (such a partition is not given away)."""

    def __init__(self, leases: LeaseClient, partitions: int, *, on_gained: Callable[[int, Lease], None],
                 on_lost: Callable[[int], None], busy: Callable[[int], bool]) -> None:
        self.leases = leases
        self.count = partitions
        self.held: dict[int, Lease] = {}
        self.draining: set[int] = set()
        self.on_gained, self.on_lost, self.busy = on_gained, on_lost, busy
        # work of partition n here that outlasts a turn (a background job): such partitions are handed over last
        self.lasting: Callable[[int], bool] = lambda n: False
        self.live_nodes: list[str] = []
        self._offset = zlib.crc32(leases.node.encode()) % partitions

    def lease_of(self, n: int) -> Lease | None:
        lease = self.held.get(n)
        return lease if lease is not None and lease.valid else None

    def reading(self) -> list[int]:
        """Partitions whose streams this worker reads: held, valid, not being handed over."""
        return sorted(n for n, lease in self.held.items() if lease.valid and n not in self.draining)

    async def run(self, register: Callable[[], Awaitable[list[str]]]) -> None:
        """Renew, rebalance, repeat every third of the TTL; a Redis outage is waited out."""
        delay = self.leases.ttl / 3
        failures = 0
        while True:
            try:
                await self.tick(await register())
                failures = 0
            except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
                failures += 1
                self._expire_local()
                (log.warning if failures == 1 else log.debug)("fleet: Redis unreachable (%s); retrying", exc)
            await asyncio.sleep(delay)

    def expire(self, n: int) -> None:
        """A write found partition n's lease run out here: give it up now, even if a renewal sent
        before the stall would still find it ours in Redis (it then expires there; the next holder,
        maybe this worker again, claims its unfinished entries)."""
        lease = self.held.get(n)
        if lease is not None and not lease.valid:
            self._lose(n, "its lease ran out here before it was renewed (the process stalled)")

    def _expire_local(self) -> None:
        """Leases past their local deadline are gone, whether Redis said so or not."""
        for n, lease in list(self.held.items()):
            if not lease.valid:
                self._lose(n, "its lease ran out before it could be renewed")

    async def tick(self, live: list[str]) -> None:
        self.live_nodes = live
        for lease in await self.leases.renew(list(self.held.values())):
            n = int(lease.name[1:])
            self._lose(n, "the lease expired or another worker took it")
        target = math.ceil(self.count / max(1, len(live)))
        if len(self.held) > target:
            await self._hand_over(len(self.held) - target)
        elif len(self.held) < target:
            await self._take(target - len(self.held))

    def _lose(self, n: int, why: str) -> None:
        if self.held.pop(n, None) is not None:
            self.draining.discard(n)
            log.warning("fleet: lost partition %d (%s); its writes from this worker are refused from now on", n, why)
            self.on_lost(n)

    async def _hand_over(self, extra: int) -> None:
        """Stop reading `extra` partitions; release those with no local work left."""
        while len(self.draining) < extra:  # long work last: a draining partition is not read until it is idle
            candidates = sorted((n for n in self.held if n not in self.draining), key=lambda n: (self.lasting(n), -n))
            if not candidates:
                break
            self.draining.add(candidates[0])
        for n in sorted(self.draining):
            if not self.busy(n):
                lease = self.held.pop(n)
                self.draining.discard(n)
                self.on_lost(n)
                await self.leases.release(lease)
                log.info("fleet: handed partition %d over (rebalancing for %d workers)", n, len(self.live_nodes))

    async def _take(self, wanted: int) -> None:
        names = [self.leases.keys.lease(partition_lease(n)) for n in range(self.count)]
        current = await self.leases.r.mget(names)
        order = [(self._offset + i) % self.count for i in range(self.count)]
        for n in order:
            if wanted <= 0:
                break
            if current[n] is not None or n in self.held:
                continue
            lease = await self.leases.acquire(partition_lease(n))
            if lease is None:
                continue
            self.held[n] = lease
            wanted -= 1
            log.info("fleet: took partition %d (fencing token %d)", n, lease.token)
            self.on_gained(n, lease)

    async def release_all(self) -> None:
        """At shutdown, after local work stopped: the next holder need not wait out the TTL."""
        for n, lease in list(self.held.items()):
            self.held.pop(n, None)
            try:
                await self.leases.release(lease)
            except (redis.ConnectionError, redis.TimeoutError, OSError):
                return


class Singletons:
    """One connection per bot across the fleet (a Telegram long-poller, a Discord gateway, a Slack
    socket): `hold(name, body)` runs `body` only while this process holds the lease `s:<name>`,
    cancels it when the lease is lost, and keeps trying to (re)take it otherwise."""

    def __init__(self, leases: LeaseClient) -> None:
        self.leases = leases
        self.holding: dict[str, Lease] = {}

    async def hold(self, name: str, body: Callable[[], Awaitable[None]]) -> None:
        interval = self.leases.ttl / 3
        lease_name = f"s:{name}"
        while True:
            try:
                lease = await self.leases.acquire(lease_name)
            except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
                log.debug("fleet: cannot try singleton %s (%s)", name, exc)
                lease = None
            if lease is None:
                await asyncio.sleep(interval)
                continue
            log.info("fleet: running %s here (fencing token %d)", name, lease.token)
            self.holding[name] = lease
            task = asyncio.create_task(body(), name=f"singleton:{name}")
            try:
                ended = await self._keep(lease, task, interval)
            except asyncio.CancelledError:  # the channel stops: hand the lease on at once (no TTL to wait out)
                await self._stop(task)
                await asyncio.shield(self._release_quietly(lease))
                raise
            finally:
                self.holding.pop(name, None)
                await self._stop(task)
            if ended:
                await self.leases.release(lease)
                return
            log.warning("fleet: lost the lease on %s; stopped it here (another process takes it over)", name)

    @staticmethod
    async def _stop(task: "asyncio.Task[None]") -> None:
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _release_quietly(self, lease: Lease) -> None:
        try:
            await self.leases.release(lease)
        except (redis.ConnectionError, redis.TimeoutError, OSError):
            pass  # Redis is gone: the lease runs out by its TTL instead

    async def _keep(self, lease: Lease, task: "asyncio.Task[None]", interval: float) -> bool:
        """Renew until the body ends (True) or the lease is lost (False)."""
        while True:
            done, _ = await asyncio.wait({task}, timeout=interval)
            if done:
                task.result()
                return True
            try:
                lost = await self.leases.renew([lease])
            except (redis.ConnectionError, redis.TimeoutError, OSError):
                lost = [] if lease.valid else [lease]
            if lost or not lease.valid:
                return False
