"""A worker dies or stalls: another resumes its work, the stalled one can no longer write, the
Telegram poller moves. Real daemons, real SIGKILL/SIGSTOP, a real redis-server."""

from __future__ import annotations

import json
import os
import signal
import threading
from pathlib import Path

from clawgate.agent.fleet.keys import partition_of
from clawgate.gateway.logs import parse_line
from tests.fakes.anthropic_api import FakeAnthropic, text, tool_use
from tests.fakes.telegram_api import FakeTelegram
from tests.fleet_support import LEASE_SECONDS, PARTITIONS, Fleet, telegram_env
from tests.harness import DaemonProcess
from tests.waiting import wait_until

CHAT = 5151


def audit_paths(home: Path, tool: str = "write_file") -> list[str]:
    path = home / "state/audit.jsonl"
    if not path.exists():
        return []
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [str(line["args"]) for line in lines if line["tool"] == tool]


def start_three(fleet_factory, telegram: FakeTelegram) -> Fleet:
    fleet: Fleet = fleet_factory(telegram_env(telegram, owner=[str(CHAT)]))
    for _ in range(3):
        fleet.add()
    fleet.spread(3)  # settled: every worker holds partitions and all are held (the first one handed some over)
    return fleet


def fleet_redis(fleet: Fleet):
    import redis

    return redis.Redis.from_url(fleet.redis_url, decode_responses=True)


def holder_of(fleet: Fleet, chat: int) -> DaemonProcess:
    node = fleet.holder(fleet_redis(fleet), partition_of(f"telegram:{chat}", PARTITIONS))
    assert node is not None
    return fleet.by_node(node)


def test_sigkill_of_the_partition_holder_mid_task_resumes_elsewhere_without_rerunning_steps(
        fleet_factory, telegram: FakeTelegram, fake_model: FakeAnthropic) -> None:
    fleet = start_three(fleet_factory, telegram)
    steps = [tool_use("write_file", {"path": f"steps/step-{i}.txt", "content": f"step {i}"}) for i in range(1, 13)]
    # step 6's first answer goes to the worker about to die (it never gets it); the survivor gets the next copy
    fake_model.enqueue(*steps[:5], text("never seen", delay=30.0), *steps[5:], text("all 12 steps done"))
    telegram.inject_message(CHAT, "do the 12 steps")
    wait_until(lambda: len(audit_paths(fleet.home)) >= 5 and len(fake_model.requests) >= 6,
               "five steps done and the sixth model call on its way", describe=fleet.logs)
    victim = holder_of(fleet, CHAT)
    victim.kill()
    wait_until(lambda: any("all 12 steps done" in t for t in telegram.messages_to(CHAT)), "the final answer",
               describe=fleet.logs)
    survivor = holder_of(fleet, CHAT)
    assert survivor is not victim
    paths = audit_paths(fleet.home)
    assert sorted(paths) == sorted(set(paths)) and len(paths) == 12, paths  # each step ran once
    for i in range(1, 13):
        assert (fleet.home / f"workspace/steps/step-{i}.txt").read_text() == f"step {i}"
    finals = [t for t in telegram.messages_to(CHAT) if "steps done" in t or "never seen" in t]
    assert finals == ["all 12 steps done"]


def test_a_worker_stopped_past_its_lease_cannot_write_when_it_wakes(
        fleet_factory, telegram: FakeTelegram, fake_model: FakeAnthropic) -> None:
    fleet = start_three(fleet_factory, telegram)
    answered = threading.Event()
    # the stalled worker's model call returns, late, a step that must never run
    late = tool_use("write_file", {"path": "stale.txt", "content": "late"})
    late.delay = LEASE_SECONDS * 4
    fake_model.enqueue(tool_use("write_file", {"path": "first.txt", "content": "1"}), late, text("finished once"))
    telegram.inject_message(CHAT, "two steps please")
    wait_until(lambda: len(fake_model.requests) >= 2, "the second model call on its way", describe=fleet.logs)
    stalled = holder_of(fleet, CHAT)
    assert stalled.proc is not None
    os.kill(stalled.proc.pid, signal.SIGSTOP)
    try:
        wait_until(lambda: any("finished once" in t for t in telegram.messages_to(CHAT)),
                   "the answer from the worker that took over", describe=fleet.logs)
        assert holder_of(fleet, CHAT) is not stalled
        answered.set()
    finally:
        os.kill(stalled.proc.pid, signal.SIGCONT)
    n = partition_of(f"telegram:{CHAT}", PARTITIONS)
    wait_until(lambda: f"lost partition {n}" in stalled.log_text(), "the woken worker noticing its lease is gone",
               describe=lambda: stalled.log_text()[-3000:])
    # its late model answer arrived after the wake-up; whatever it tried was refused, and it says why
    wait_until(lambda: "refused" in stalled.log_text() or "its partition moved to another worker" in stalled.log_text(),
               "the refusal in the woken worker's log", describe=lambda: stalled.log_text()[-3000:])
    assert not (fleet.home / "workspace/stale.txt").exists()
    assert "stale.txt" not in " ".join(audit_paths(fleet.home))
    # each refusal is one warning line naming why, never an error with a traceback
    lines = [parse_line(line) for line in stalled.log_text().splitlines()]
    refusals = [line for line in lines if "refused" in line["message"]]
    assert refusals and all(line["level"] == "warning" for line in refusals), refusals
    assert "Traceback" not in stalled.log_text() and "Fenced" not in stalled.log_text(), stalled.log_text()[-3000:]
    sent = telegram.messages_to(CHAT)
    assert [t for t in sent if "finished once" in t] == ["finished once"], sent
    assert not [t for t in sent if "went wrong" in t], sent
    assert answered.is_set()


def test_killing_the_telegram_pollers_holder_moves_polling_without_loss_or_duplicates(
        fleet_factory, telegram: FakeTelegram) -> None:
    fleet = start_three(fleet_factory, telegram)
    r = fleet_redis(fleet)
    wait_until(lambda: [k for k in r.scan_iter(match=f"{fleet.prefix}:lease:s:telegram-poller:*")],
               "a poller lease", describe=fleet.logs)
    key = next(iter(r.scan_iter(match=f"{fleet.prefix}:lease:s:telegram-poller:*")))
    chats = range(7000, 7020)
    for round_ in range(3):
        for chat in chats:
            telegram.inject_message(chat, f"c{chat} r{round_}")
    poller = fleet.by_node(r.get(key).split("|")[0])
    poller.kill()
    for chat in chats:
        telegram.inject_message(chat, f"c{chat} r3")
    wait_until(lambda: (r.get(key) or "").split("|")[0] not in ("", poller.node),  # type: ignore[attr-defined]
               "another process holding the poller lease", describe=fleet.logs)
    wait_until(lambda: all(len(telegram.messages_to(c)) >= 4 for c in chats), "four answers in every chat",
               describe=fleet.logs)
    for chat in chats:
        assert telegram.messages_to(chat) == [f"echo: c{chat} r{i}" for i in range(4)]
    assert len(list(r.scan_iter(match=f"{fleet.prefix}:lease:s:telegram-poller:*"))) == 1  # one bot, one poller
