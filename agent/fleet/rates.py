"""A rate shared by the fleet: a token bucket kept in Redis, so N processes take together what one would.

Used for each webhook's `burst` / `rate_per_minute` (docs/hooks.md, "In a fleet"): without it every
process would keep its own bucket and a fleet of N would accept N times the configured rate. The
bucket is one hash per name, refilled from Redis's own clock (`TIME`, so the processes' clocks do not
matter) and changed by one Lua script, so two processes never both take the last token.
"""

from __future__ import annotations

import redis.asyncio as aioredis

from .keys import Keys

# KEYS[1] the bucket; ARGV rate per second, burst. Returns the seconds to wait ("0": a token was taken).
TAKE = """
local rate, burst = tonumber(ARGV[1]), tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local v = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens, at = tonumber(v[1]) or burst, tonumber(v[2]) or now
tokens = math.min(burst, tokens + math.max(0, now - at) * rate)
local wait = 0
if tokens >= 1 then tokens = tokens - 1 else wait = (1 - tokens) / rate end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(now))
redis.call('EXPIRE', KEYS[1], math.ceil(burst / rate) + 60)
return tostring(wait)
"""


class SharedRate:
    def __init__(self, r: "aioredis.Redis", keys: Keys) -> None:
        self.keys = keys
        self._take = r.register_script(TAKE)

    async def take(self, name: str, per_second: float, burst: int) -> float:
        """0 when a call may go ahead (a token taken fleet-wide), else the seconds until one may."""
        return float(await self._take(keys=[f"{self.keys.prefix}:rate:{name}"], args=[per_second, burst]))
