"""This process's place in the fleet: the clients, the partitions it holds, its singletons, its claims.

The composition root (gateway/app.py) builds one FleetNode when `[fleet] redis_url` is set, uses
its bus instead of SqliteBus, gives the session log and the task store its `guard`, the channels
its `singletons.hold`, the triggers its `claim`, and starts and stops it with the daemon.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from typing import Any, Callable

import redis

from clawgate.config.schema import FleetSettings

from .bus import Fenced, RedisBus
from .claims import RunClaims
from .connect import async_client, check, mask_url, sync_client
from .keys import IN_GROUP, OUT_GROUP, Keys, partition_lease
from .leases import LeaseClient, Partitions, Singletons
from .relay import Relay

log = logging.getLogger("clawgate.fleet")
# Join the fleet's list of live workers; when none was alive, this is a new start of the fleet.
# Returns the fleet's start (ms, Redis's clock): what @reboot cron jobs count as the daemon's start.
JOIN = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) == 0 or redis.call('HEXISTS', KEYS[2], 'started') == 0 then
  redis.call('HSET', KEYS[2], 'started', now)
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
return redis.call('HGET', KEYS[2], 'started')
"""


class FleetNode:
    def __init__(self, settings: FleetSettings, *, keep_days: float, port: int | None = None) -> None:
        url = settings.redis_url or ""
        self.masked_url = mask_url(url)
        check(url).close()  # FleetUnavailable: one line, the daemon does not start
        self.node = settings.node or f"{socket.gethostname()}-{os.getpid()}"
        self.ttl = settings.lease_seconds
        self.keys = Keys(settings.prefix)
        self.sync = sync_client(url)
        self.r = async_client(url)
        self.partition_count = self._create(settings.partitions)
        self.leases = LeaseClient(self.r, self.keys, self.node, self.ttl)
        self.bus = RedisBus(self.sync, self.r, self.keys, self.partition_count, self.node, keep_days=keep_days,
                            lease_of=lambda n: self.partitions.lease_of(n), reading=lambda: self.partitions.reading())
        self.partitions = Partitions(self.leases, self.partition_count, on_gained=self.bus.gained,
                                     on_lost=self._lost, busy=self.bus.busy)
        self.singletons = Singletons(self.leases)
        self.bus.expired = self.partitions.expire
        self.bus.sweep_seconds = max(1.0, 2 * self.ttl)
        self.relay = Relay(self.r, f"{settings.prefix}:relay", self.node)
        self.runs = RunClaims(self.sync, self.keys, self.node)  # cron due times: held until recorded
        # set by the app: stop the local runs of sessions whose partition moved away
        self.stop_sessions: Callable[[list[str]], None] = lambda keys: None
        self.port = port
        # called every third of the lease TTL (the cron scheduler re-reads the shared job store)
        self.periodic: list[Callable[[], Any]] = []
        self._tasks: list[asyncio.Task[Any]] = []
        self._started = time.time()
        self.fleet_started = 0.0  # when the fleet (not this process) started, set by `start` (epoch seconds)

    def _create(self, wanted: int) -> int:
        """P is fixed when the fleet is created (the first process) and read by every later one."""
        self.sync.hsetnx(self.keys.meta, "partitions", wanted)
        count = int(self.sync.hget(self.keys.meta, "partitions") or wanted)
        if count != wanted:
            log.info("fleet: %d partitions (fixed when the fleet was created; fleet.partitions=%d is not used)", count, wanted)
        pipe = self.sync.pipeline(transaction=False)
        for n in range(count):
            pipe.xgroup_create(self.keys.inbound(n), IN_GROUP, id="0", mkstream=True)
            pipe.xgroup_create(self.keys.outbound(n), OUT_GROUP, id="0", mkstream=True)
        for result in pipe.execute(raise_on_error=False):
            if isinstance(result, Exception) and "BUSYGROUP" not in str(result):
                raise result
        return count

    # writes for a partition ------------------------------------------------------------------
    def guard(self, session_key: str) -> None:
        """Before a session-log or task write: refuse it unless this worker holds the session's
        partition now (checked on the local lease deadline: no round trip, and a pause counts)."""
        n = self.bus.partition(session_key)
        if self.partitions.lease_of(n) is None:
            self.partitions.expire(n)
            raise Fenced(f"write to session {session_key} refused: this worker no longer holds partition {n} "
                         "(its lease ran out or moved to another worker)")

    def holder(self, session_key: str) -> str | None:
        """The worker holding this session's partition now (None: nobody, between holders)."""
        value = self.sync.get(self.keys.lease(partition_lease(self.bus.partition(session_key))))
        return value.split("|")[0] if value else None

    def _lost(self, n: int) -> None:
        sessions = self.bus.lost(n)
        if sessions:
            self.stop_sessions(sessions)

    def claim(self, what: str, ttl_seconds: float) -> bool:
        """Once across the fleet: True for the first process to claim `what` (a cron job's due
        time, a heartbeat tick) within `ttl_seconds`."""
        return bool(self.sync.set(self.keys.claim(what), self.node, nx=True, ex=max(1, int(ttl_seconds))))

    # lifecycle --------------------------------------------------------------------------------
    async def start(self) -> None:
        started = await self.r.eval(JOIN, 2, self.keys.nodes, self.keys.meta, self.node, int(self.ttl * 1000))
        self.fleet_started = int(started) / 1000
        await self._register()
        self._tasks = [asyncio.create_task(self.partitions.run(self._register), name="fleet-leases"),
                       asyncio.create_task(self.bus.read_inbound(), name="fleet-inbound"),
                       asyncio.create_task(self.bus.read_outbound(), name="fleet-outbound"),
                       asyncio.create_task(self.relay.send_loop(), name="fleet-relay-out"),
                       asyncio.create_task(self.relay.receive_loop(), name="fleet-relay-in")]
        log.info("fleet: joined as %s on %s (%d partitions, lease %gs)", self.node, self.masked_url,
                 self.partition_count, self.ttl)

    async def _register(self) -> list[str]:
        """Say this worker is alive (until now + TTL); return the workers alive now."""
        for call in self.periodic:
            try:
                call()
            except Exception:
                log.exception("fleet: periodic %s failed", getattr(call, "__name__", call))
        seconds, micros = await self.r.time()
        now = int(seconds) * 1000 + int(micros) // 1000
        info = {"pid": os.getpid(), "host": socket.gethostname(), "port": self.port or 0, "started": self._started,
                "partitions": ",".join(map(str, sorted(self.partitions.held))),
                "singletons": ",".join(sorted(self.singletons.holding))}
        async with self.r.pipeline(transaction=False) as pipe:
            pipe.zadd(self.keys.nodes, {self.node: now + int(self.ttl * 1000)})
            pipe.zremrangebyscore(self.keys.nodes, "-inf", now)
            pipe.hset(self.keys.node_info(self.node), mapping=info)
            pipe.pexpire(self.keys.node_info(self.node), int(self.ttl * 3000))
            pipe.zrange(self.keys.nodes, 0, -1)
            results = await pipe.execute()
        return list(results[-1])

    async def stop(self) -> None:
        """After the local turns ended: hand the partitions back at once (no TTL to wait out)."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        try:  # answers and acks still on their way land before the partitions are handed over
            await asyncio.wait_for(self.bus.batch.flush(), 10)
        except (asyncio.TimeoutError, redis.ConnectionError, redis.TimeoutError, OSError):
            pass  # Redis is gone: what did not land is fenced out or claimed again by the next holder
        await self.partitions.release_all()
        try:
            await self.r.zrem(self.keys.nodes, self.node)
        except (redis.ConnectionError, redis.TimeoutError, OSError):
            pass  # Redis is gone: the process list entry ages out with its score
        await self.r.aclose()

    def close(self) -> None:
        self.bus.close()

    # the fleet as `clawgate status` shows it ----------------------------------------------------
    def status(self) -> dict[str, Any]:
        nodes = self.sync.zrange(self.keys.nodes, 0, -1)
        pipe = self.sync.pipeline(transaction=False)
        for node in nodes:
            pipe.hgetall(self.keys.node_info(node))
        infos = pipe.execute()
        lag = self.bus.lag()
        singles = {key.split(":lease:s:", 1)[1]: (self.sync.get(key) or "").split("|")[0]
                   for key in self.sync.scan_iter(match=self.keys.lease("s:*"), count=500)}
        return {
            "node": self.node, "redis": self.masked_url, "partitions": self.partition_count,
            "held": sorted(self.partitions.held), "refusedWrites": self.bus.refused, "answered": self.bus.answered,
            "processes": [{"node": node, "pid": int(info.get("pid") or 0), "host": info.get("host", ""),
                           "port": int(info.get("port") or 0),
                           "partitions": len([p for p in (info.get("partitions") or "").split(",") if p])}
                          for node, info in zip(nodes, infos)],
            "lag": {str(n): depth for n, depth in lag.items()},
            "singletons": singles,
        }


__all__ = ["FleetNode", "Fenced", "partition_lease"]
