"""A count shared by the fleet: one Redis integer per name, added to after the fact and read before.

Used for each agent's `daily_tokens` (gateway/agent_scope.py, docs/agents.md "In a fleet"): without it
every process would count only the day's stored totals at its start plus its own calls, and an agent
could spend its budget once per process. The key expires two days after its last addition, so a day's
counts clean themselves up; the caller puts the day in the name.
"""

from __future__ import annotations

import redis.asyncio as aioredis

from .keys import Keys

KEEP_SECONDS = 2 * 86400


class SharedCounter:
    def __init__(self, r: "aioredis.Redis", keys: Keys) -> None:
        self.r = r
        self.keys = keys

    def key(self, name: str) -> str:
        return f"{self.keys.prefix}:count:{name}"

    async def get(self, name: str) -> int:
        return int(await self.r.get(self.key(name)) or 0)

    async def add(self, name: str, amount: int) -> int:
        """Adds `amount` for the whole fleet; the new total (one round trip: INCRBY and EXPIRE in a MULTI)."""
        async with self.r.pipeline(transaction=True) as pipe:
            pipe.incrby(self.key(name), amount)
            pipe.expire(self.key(name), KEEP_SECONDS)
            total, _ = await pipe.execute()
        return int(total)
