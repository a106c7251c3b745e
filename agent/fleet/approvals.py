"""The fleet's pending approvals, in one place every process reads: `approvals.list` on any process
shows the approvals runs on every worker wait for (docs/fleet.md).

A Redis hash `<prefix>:approvals`, field = approval id, value = the request, the worker that asked
and until when it waits. The worker writes it when its broker asks (an `approval_request` event)
and removes it when the answer, the timeout or the run's end settles it (`approval_result`).
Safety nets for a worker that dies meanwhile: an entry of a worker no longer alive, or past its
wait, is not listed and is removed by the next reader; the hash itself expires after twice the
approval timeout without a new request.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import redis

log = logging.getLogger("clawgate.fleet")
MARGIN_SECONDS = 5.0  # an entry outlives its wait by this much: the result event is on its way


class SharedApprovals:
    def __init__(self, sync: "redis.Redis", key: str, nodes_key: str, node: str, timeout: float) -> None:
        self.sync, self.key, self.nodes_key, self.node, self.timeout = sync, key, nodes_key, node, timeout

    def on_event(self, event: dict[str, Any]) -> None:
        """EventHub subscriber on the worker running the run: keep the hash in step with its broker."""
        try:
            if event.get("type") == "approval_request":
                request = dict(event["request"])
                entry = {"node": self.node, "until": time.time() + self.timeout + MARGIN_SECONDS, "request": request}
                with self.sync.pipeline(transaction=False) as pipe:
                    pipe.hset(self.key, str(request["id"]), json.dumps(entry, default=str, ensure_ascii=False))
                    pipe.expire(self.key, max(60, int(self.timeout * 2 + MARGIN_SECONDS)))
                    pipe.execute()
            elif event.get("type") == "approval_result":
                self.sync.hdel(self.key, str(event.get("id")))
        except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:  # the list is a view; the run goes on
            log.warning("fleet: could not record approval %s in Redis (%s); other processes may not list it",
                        event.get("id") or (event.get("request") or {}).get("id"), exc)

    def _entries(self) -> dict[str, dict[str, Any]]:
        """Entries still waiting on a live worker; the others are removed."""
        with self.sync.pipeline(transaction=False) as pipe:
            pipe.hgetall(self.key)
            pipe.time()
            pipe.zrange(self.nodes_key, 0, -1, withscores=True)
            raw, (seconds, micros), nodes = pipe.execute()
        now_ms = int(seconds) * 1000 + int(micros) // 1000
        alive = {str(node) for node, until in nodes if until > now_ms}
        entries, dead = {}, []
        for approval_id, value in raw.items():
            try:
                entry = json.loads(value)
                waiting = entry["node"] in alive and float(entry["until"]) > time.time()
            except (ValueError, KeyError, TypeError):
                waiting = False
            if waiting:
                entries[approval_id] = entry
            else:
                dead.append(approval_id)
        if dead:
            self.sync.hdel(self.key, *dead)
        return entries

    def _reachable(self) -> dict[str, dict[str, Any]]:
        """The entries, or none while Redis is unreachable (the caller still has its own process's)."""
        try:
            return self._entries()
        except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
            log.warning("fleet: cannot read the other processes' approvals from Redis (%s); listing this one's", exc)
            return {}

    def pending(self) -> list[dict[str, Any]]:
        """Every worker's pending approvals (oldest waiting first)."""
        entries = sorted(self._reachable().values(), key=lambda entry: float(entry["until"]))
        return [dict(entry["request"]) for entry in entries]

    def holder(self, approval_id: str) -> str | None:
        """The worker whose run waits for this approval (None: none waits for it any more)."""
        entry = self._reachable().get(approval_id)
        return str(entry["node"]) if entry is not None else None
