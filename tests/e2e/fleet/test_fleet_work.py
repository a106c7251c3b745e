"""Three daemons on one Redis and one home share the chats: every message answered once, in order."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.fakes.telegram_api import FakeTelegram
from tests.fleet_support import Fleet, telegram_env
from tests.harness import DaemonProcess
from tests.waiting import wait_until

SESSIONS = 200
PER_SESSION = 5
FIRST_CHAT = 10_000


async def _status(proc: DaemonProcess) -> dict[str, Any]:
    async with proc.client() as client:
        return await client.request("status")


def fleet_status(proc: DaemonProcess) -> dict[str, Any]:
    return asyncio.run(_status(proc))["fleet"]


def replies_by_chat(fake: FakeTelegram) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for sent in list(fake.sent):
        out.setdefault(int(sent["chat_id"]), []).append(sent["text"])
    return out


def missing(fake: FakeTelegram) -> dict[int, int]:
    got = replies_by_chat(fake)
    return {s: len(got.get(FIRST_CHAT + s, [])) for s in range(SESSIONS) if len(got.get(FIRST_CHAT + s, [])) < PER_SESSION}


def test_200_sessions_x_5_messages_answered_once_in_order_across_three_processes(
        fleet_factory, telegram: FakeTelegram) -> None:
    fleet: Fleet = fleet_factory(telegram_env(telegram))
    procs = [fleet.add() for _ in range(3)]
    # every worker holds partitions before the load starts (the first one took them all, then handed over)
    wait_until(lambda: all(fleet_status(p)["held"] for p in procs), "all three workers holding partitions",
               describe=fleet.logs)
    for i in range(PER_SESSION):
        for s in range(SESSIONS):
            telegram.inject_message(FIRST_CHAT + s, f"s{s} m{i}")
    total = SESSIONS * PER_SESSION

    def answered() -> int:
        return sum(len(v) for v in replies_by_chat(telegram).values())

    wait_until(lambda: answered() >= total, f"{total} replies", timeout=240,
               describe=lambda: f"{answered()} replies; missing {missing(telegram)}\n{fleet.state()}\n{fleet.logs()}")
    got = replies_by_chat(telegram)
    for s in range(SESSIONS):
        assert got[FIRST_CHAT + s] == [f"echo: s{s} m{i}" for i in range(PER_SESSION)], f"chat {s}"
    statuses = [fleet_status(p) for p in procs]
    assert sum(st["answered"] for st in statuses) == total
    assert all(st["answered"] > 0 for st in statuses), [st["answered"] for st in statuses]
    assert {pr["node"] for pr in statuses[0]["processes"]} == {"w0", "w1", "w2"}
    assert answered() == total  # nothing arrived late, twice
    shown = procs[1].cli("status")
    assert shown.returncode == 0, shown.stderr
    for node in ("w0", "w1", "w2"):
        assert f"process {node}: pid" in shown.stdout, shown.stdout
    assert "this process: w1 on redis://127.0.0.1:" in shown.stdout
    assert "singleton telegram-poller:" in shown.stdout and "backlog: none" in shown.stdout
