"""Cron in a fleet: every process arms the job from the shared store, each due time runs once
(claimed in Redis), and a killed process does not cost a run.

The daemon has no fake clock, so the job runs every few seconds instead of every minute (the claim
is per (job, due time) whatever the interval); what is checked is the property itself: over the
whole window, with one process SIGKILLed in the middle, the due times that ran are consecutive, none
twice, and each was answered exactly once.

The interval is longer than a failover: the killed process may hold the partition of the job's
session, and then the run due next waits (published, not lost) until a survivor takes that
partition, up to a lease and a renewal later. A run still open when the following one comes due
makes the cron skip that one (the overlap rule: one run of a job at a time), which is right for a
job running more often than a failover lasts, and not what this test is about."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

from tests.fakes.telegram_api import FakeTelegram
from tests.fleet_support import LEASE_SECONDS, Fleet, telegram_env
from tests.harness import DaemonProcess
from tests.waiting import wait_until

CHAT = 777
# A run (one fake model call) takes well under a second; a failover up to a lease plus a third of one
# (the next renewal round), and on a loaded machine some seconds more.
EVERY = 2 * LEASE_SECONDS + 2


async def _call(proc: DaemonProcess, method: str, params: dict[str, Any]) -> dict[str, Any]:
    async with proc.client() as client:
        return await client.request(method, params)


def call(proc: DaemonProcess, method: str, **params: Any) -> dict[str, Any]:
    return asyncio.run(_call(proc, method, params))


@pytest.mark.waits
def test_a_job_fires_once_per_due_time_across_the_fleet_with_a_process_killed(
        fleet_factory, telegram: FakeTelegram) -> None:
    fleet: Fleet = fleet_factory(telegram_env(telegram))
    procs = [fleet.add() for _ in range(3)]
    job = call(procs[0], "cron.add", message="tick", every=f"{EVERY:g}s", deliver=f"telegram:{CHAT}")
    job_id = job.get("id") or job["job"]["id"]
    wait_until(lambda: len(telegram.messages_to(CHAT)) >= 2, "two runs answered", timeout=90, describe=fleet.logs)
    import redis

    r = redis.Redis.from_url(fleet.redis_url, decode_responses=True)
    claims = {float(k.rsplit(":", 1)[1]): r.get(k).split("|")[0]  # "<node>", "<node>|done" once recorded
              for k in r.scan_iter(match=f"{fleet.prefix}:claim:cron:{job_id}:*")}
    victim = fleet.by_node(claims[max(claims)])  # the process that started the latest run
    victim.kill()
    survivors = [p for p in procs if p is not victim]
    wait_until(lambda: len(telegram.messages_to(CHAT)) >= 5, "three more runs answered after the kill", timeout=120,
               describe=fleet.logs)
    call(survivors[0], "cron.enable", id=job_id, enabled=False)
    runs = call(survivors[0], "cron.runs", id=job_id)
    runs = runs.get("runs", runs)
    scheduled = sorted(float(run["scheduledAt"]) for run in runs if run["status"] not in ("missed", "skipped"))
    assert len(scheduled) == len(set(scheduled)), runs  # no due time ran twice
    gaps = [round(b - a, 3) for a, b in zip(scheduled, scheduled[1:])]
    # and none was lost, the kill included
    assert all(gap == EVERY for gap in gaps), (gaps, [(run["scheduledAt"], run["status"], run["result"]) for run in runs])
    wait_until(lambda: len(telegram.messages_to(CHAT)) >= len(scheduled), "every run answered", describe=fleet.logs)
    answers = telegram.messages_to(CHAT)
    assert len(answers) == len(set(answers)) == len(scheduled), answers  # each run answered once
    stamps = [re.search(r"scheduled ([^·\]]+)", a) for a in answers]
    assert all(stamps), answers
