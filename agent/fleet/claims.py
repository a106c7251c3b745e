"""Once across the fleet, and never lost: the claim on a cron job's due time.

A process that wins a due time holds it only for a while (`hold_seconds`, a lease's length) until it
has recorded the run (`settle`); then the claim is kept for good (a day). A holder that dies, or
fails, between winning and recording leaves a claim that runs out, and the due time is taken again
by another process (or by itself on its retry: a claim is its holder's again while it holds it). Two
starts of the same due time are one message: the run's inbound id is the same, and the bus takes an
id once.
"""

from __future__ import annotations

import redis

from .keys import Keys

# Taken when free or already this node's (held, not settled): held for ARGV[2] ms.
TAKE = """
local v = redis.call('GET', KEYS[1])
if v == false or v == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
"""
SETTLED = "|done"  # the value's suffix once the run is recorded: nobody takes it again


class RunClaims:
    def __init__(self, sync: "redis.Redis", keys: Keys, node: str) -> None:
        self.sync, self.keys, self.node = sync, keys, node
        self._take = sync.register_script(TAKE)

    def take(self, what: str, hold_seconds: float) -> bool:
        """True when `what` is this process's to run now: free, or held by this process already."""
        return bool(self._take(keys=[self.keys.claim(what)], args=[self.node, max(1, int(hold_seconds * 1000))]))

    def settle(self, what: str, keep_seconds: float) -> None:
        """The run is recorded: the claim is kept (`keep_seconds`) and no process takes it again."""
        self.sync.set(self.keys.claim(what), self.node + SETTLED, ex=max(1, int(keep_seconds)))

    def holder(self, what: str) -> str | None:
        """The node that holds or settled `what` (None: nobody)."""
        value = self.sync.get(self.keys.claim(what))
        return str(value).removesuffix(SETTLED) if value else None
