"""A cron due time's claim against a real redis-server: once across the fleet, held by its winner until
the run is recorded, and taken again when the winner died (or failed) before recording it."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
import redis

from clawgate.agent.fleet.claims import RunClaims
from clawgate.agent.fleet.keys import Keys
from clawgate.agent.triggers.schedule import iso_utc
from tests.unit.agent.triggers.test_cron_service import Rig
from tests.waiting import wait_until

HOLD = 1.0  # seconds a winner holds an unrecorded claim (a lease, in the daemon)


def claims(url: str, prefix: str, node: str) -> RunClaims:
    return RunClaims(redis.Redis.from_url(url, decode_responses=True), Keys(prefix), node)


def test_a_claim_is_its_winners_until_recorded_then_nobodys(redis_server) -> None:
    prefix = "k" + uuid.uuid4().hex[:8]
    a, b = claims(redis_server.url, prefix, "a"), claims(redis_server.url, prefix, "b")
    assert a.take("cron:j:1", HOLD) and not b.take("cron:j:1", HOLD)
    assert a.take("cron:j:1", HOLD)  # the winner's own retry
    a.settle("cron:j:1", 60)
    assert not a.take("cron:j:1", HOLD) and not b.take("cron:j:1", HOLD)
    assert a.holder("cron:j:1") == "a"
    time.sleep(HOLD * 1.5)  # a settled claim does not run out with the hold
    assert not b.take("cron:j:1", HOLD)


def test_a_claim_whose_winner_died_is_taken_again(redis_server) -> None:
    prefix = "k" + uuid.uuid4().hex[:8]
    a, b = claims(redis_server.url, prefix, "a"), claims(redis_server.url, prefix, "b")
    assert a.take("cron:j:2", HOLD)  # ... and "a" is killed before recording the run
    assert not b.take("cron:j:2", HOLD)
    wait_until(lambda: b.take("cron:j:2", HOLD), "the dead winner's claim taken by another process", timeout=30)
    assert b.holder("cron:j:2") == "b" and not a.take("cron:j:2", HOLD)


async def test_a_due_time_whose_first_start_failed_runs_on_the_retry_and_once(redis_server, tmp_path: Path) -> None:
    """Two processes on one store: the winner's publish fails after it claimed; the other process looks again
    a hold later instead of at the next due time; the winner's retry runs it, and the due time is settled."""
    prefix = "k" + uuid.uuid4().hex[:8]
    here, there = Rig(tmp_path / "state.db"), Rig(tmp_path / "state.db")
    for rig, node in ((here, "a"), (there, "b")):
        node_claims = claims(redis_server.url, prefix, node)
        rig.service.claim = lambda what, c=node_claims: c.take(f"cron:{what}", HOLD)
        rig.service.settle = lambda what, c=node_claims: c.settle(f"cron:{what}", 60)
        rig.service.claim_wait = HOLD
    job = here.service.add(message="tick", every="60s")
    for rig in (here, there):
        rig.clock.now = job.next_run_at + 1
    publish = here.bus.publish_inbound

    def failing(msg):  # the bus is away at the moment of the first start
        raise redis.ConnectionError("connection refused")

    here.bus.publish_inbound = failing
    with pytest.raises(redis.ConnectionError):
        here.service.fire(job.id)
    assert there.service.fire(job.id) is None  # held by "a": looked at again a hold later, not in a minute
    assert there.armed_at(job.id) == there.clock.now + HOLD
    here.bus.publish_inbound = publish
    run_id = here.service.fire(job.id)  # the retry ("a" still holds it)
    assert run_id == f"cron:{job.id}:{iso_utc(job.next_run_at)}"
    assert here.inbound() == [run_id]
    assert there.service.fire(job.id) is None  # recorded: the other process re-arms for the next due time
    assert there.armed_at(job.id) == job.next_run_at + 60
    time.sleep(HOLD * 1.5)
    assert not claims(redis_server.url, prefix, "b").take(f"cron:{job.id}:{job.next_run_at}", HOLD)
