"""The fleet's list of pending approvals against a real redis-server: listed while the asking worker
lives and waits, gone when answered, when the worker is gone or past the wait; Redis away: no list,
no error."""

from __future__ import annotations

import json
import time
import uuid

from clawgate.agent.fleet.approvals import SharedApprovals
from clawgate.agent.fleet.keys import Keys
from tests.fleet_support import RedisServer


def _request(approval_id: str) -> dict[str, object]:
    return {"id": approval_id, "session_key": "telegram:1", "tool": "exec", "summary": "rm -rf build"}


def _fleet(redis_server: RedisServer, timeout: float = 300.0) -> tuple[SharedApprovals, SharedApprovals, Keys]:
    keys = Keys("u" + uuid.uuid4().hex[:8])
    r = redis_server.client()
    seconds, _ = r.time()
    r.zadd(keys.nodes, {"a": (int(seconds) + 60) * 1000, "b": (int(seconds) + 60) * 1000})  # both alive a minute
    return (SharedApprovals(r, keys.approvals, keys.nodes, "a", timeout),
            SharedApprovals(r, keys.approvals, keys.nodes, "b", timeout), keys)


def test_an_approval_is_listed_on_every_process_until_it_is_answered(redis_server: RedisServer) -> None:
    a, b, _ = _fleet(redis_server)
    a.on_event({"type": "approval_request", "session": "telegram:1", "request": _request("ap_1")})
    assert [p["id"] for p in b.pending()] == ["ap_1"] and b.holder("ap_1") == "a"
    a.on_event({"type": "approval_result", "session": "telegram:1", "id": "ap_1", "approved": False, "how": "stopped"})
    assert b.pending() == [] and b.holder("ap_1") is None


def test_an_approval_of_a_worker_gone_or_past_its_wait_is_not_listed_and_is_removed(redis_server: RedisServer) -> None:
    a, b, keys = _fleet(redis_server)
    a.on_event({"type": "approval_request", "session": "telegram:1", "request": _request("ap_live")})
    r = redis_server.client()
    r.hset(keys.approvals, "ap_late", json.dumps({"node": "a", "until": time.time() - 1, "request": _request("ap_late")}))
    r.hset(keys.approvals, "ap_dead", json.dumps({"node": "c", "until": time.time() + 600, "request": _request("ap_dead")}))
    r.hset(keys.approvals, "ap_bad", "not json")
    assert [p["id"] for p in b.pending()] == ["ap_live"]
    assert sorted(r.hkeys(keys.approvals)) == ["ap_live"]  # the others cleared by the reader


def test_with_redis_unreachable_the_list_is_empty_not_an_error() -> None:
    import redis

    r = redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=1)  # nothing listens on port 1
    shared = SharedApprovals(r, "x:approvals", "x:nodes", "a", 300.0)
    assert shared.pending() == [] and shared.holder("ap_1") is None
    shared.on_event({"type": "approval_request", "session": "s", "request": _request("ap_1")})  # logged, not raised
