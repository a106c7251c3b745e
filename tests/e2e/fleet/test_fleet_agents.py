"""Two agents in a fleet: partitions per agent, singletons per account. Two real daemons share one
home and a real redis-server; two Telegram bots (two fake Bot API servers) are bound to two agents.

- a session's partition is computed from its key, which carries its agent (`agent:work:…`), so a run
  of agent `work` may happen on either process, and wherever it happens it uses `work`'s workspace
  and model, never the default agent's;
- each bot account's poller is its own singleton (`telegram-poller:<bot id>`), held by one process;
  SIGKILL of the holder of one moves it, and nothing is lost or answered twice.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from clawgate.agent.fleet.keys import partition_of
from tests.e2e.fleet.test_fleet_work import fleet_status
from tests.fakes.anthropic_api import FakeAnthropic, text, tool_use
from tests.fakes.telegram_api import FakeTelegram
from tests.fleet_support import PARTITIONS, Fleet, telegram_env
from tests.waiting import wait_until

HOME_TOKEN, WORK_TOKEN = "111111:HOME-TOKEN", "222222:WORK-TOKEN"
WORK_SOUL = "You are the WORK agent. WORK-SOUL-7c1e."
WORK_MODEL = "claude-work-model"
WORK_CHATS = range(6100, 6140)


@pytest.fixture
def bots() -> Iterator[tuple[FakeTelegram, FakeTelegram]]:
    with FakeTelegram(HOME_TOKEN, "home_bot") as home, FakeTelegram(WORK_TOKEN, "work_bot") as work:
        yield home, work


def start_fleet(fleet_factory, home: FakeTelegram, work: FakeTelegram, processes: int = 2) -> Fleet:
    owners = ", ".join(f'"telegram.work:{chat}"' for chat in WORK_CHATS)
    fleet: Fleet = fleet_factory({**telegram_env(home),
                                  "CLAWGATE_CHANNELS__TELEGRAM__ACCOUNTS__WORK__TOKEN": work.token,
                                  "CLAWGATE_CHANNELS__TELEGRAM__ACCOUNTS__WORK__BASE_URL": work.base_url})
    first = fleet.add(start=False)
    with (fleet.home / "config.toml").open("a", encoding="utf-8") as out:
        out.write(f'\n[agents.home]\ndefault = true\n[agents.work]\nmodel = "{WORK_MODEL}"\nowners = [{owners}]\n'
                  '\n[[bindings]]\nagent = "work"\nmatch = { channel = "telegram", account = "work" }\n')
    workspace = fleet.home / "agents/work/workspace"
    workspace.mkdir(parents=True)
    (workspace / "SOUL.md").write_text(WORK_SOUL + "\n")
    first.start()
    for _ in range(processes - 1):
        fleet.add()
    fleet.spread(processes)
    return fleet


def work_session(chat: int) -> str:
    return f"agent:work:telegram.work:{chat}"


def answers(bot: FakeTelegram, chat: int) -> list[str]:
    """What the bot said in `chat`, without the step status line a run with a tool call shows."""
    return [t for t in bot.messages_to(chat) if not t.startswith("⚙️")]


def requests_saying(fake: FakeAnthropic, words: str) -> list[dict[str, Any]]:
    return [r for r in fake.requests if words in json.dumps(r["messages"])]


def test_an_agents_sessions_spread_over_the_fleet_and_run_with_its_workspace_and_model_everywhere(
        fleet_factory, bots: tuple[FakeTelegram, FakeTelegram], fake_model: FakeAnthropic) -> None:
    home, work = bots
    fleet = start_fleet(fleet_factory, home, work)
    r = redis.Redis.from_url(fleet.redis_url, decode_responses=True)
    holders = fleet.holders(r)
    # a chat of the work agent on each process's partitions (the key that is hashed carries the agent)
    by_node: dict[str, int] = {}
    for chat in WORK_CHATS:
        by_node.setdefault(holders[partition_of(work_session(chat), PARTITIONS)], chat)
    assert set(by_node) == {"w0", "w1"}, holders
    for node, chat in by_node.items():
        fake_model.enqueue_for(f"note for {node}", tool_use("write_file", {"path": f"{node}.txt", "content": node}),
                               text(f"noted on {node}"))
        work.inject_message(chat, f"note for {node}")
    home.inject_message(4242, "hello home agent")
    for node, chat in by_node.items():
        wait_until(lambda chat=chat, node=node: answers(work, chat) == [f"noted on {node}"],
                   f"the work bot's answer in chat {chat}", describe=fleet.logs)
    wait_until(lambda: home.messages_to(4242) == ["echo: hello home agent"], "the home bot's answer",
               describe=fleet.logs)

    # each process ran one of the work agent's chats, and in the work agent's workspace
    assert all(fleet_status(p)["answered"] >= 1 for p in fleet.procs)
    for node in by_node:
        assert (fleet.home / f"agents/work/workspace/{node}.txt").read_text() == node
        assert not (fleet.home / f"workspace/{node}.txt").exists()  # never the default agent's
    for node in by_node:
        asked = requests_saying(fake_model, f"note for {node}")
        assert asked and all(req["model"] == WORK_MODEL for req in asked)
        assert all(WORK_SOUL in json.dumps(req["system"]) for req in asked)
    [home_request] = requests_saying(fake_model, "hello home agent")
    assert home_request["model"] != WORK_MODEL and WORK_SOUL not in json.dumps(home_request["system"])
    # the sessions are the agent's own, on the shared volume
    sessions = fleet.home / "state/sessions"
    for chat in by_node.values():
        assert (sessions / f"agent%3Awork%3Atelegram.work%3A{chat}.jsonl").exists()


def test_each_accounts_poller_is_held_once_and_moves_on_a_kill_without_loss_or_repeats(
        fleet_factory, bots: tuple[FakeTelegram, FakeTelegram], fake_model: FakeAnthropic) -> None:
    home, work = bots
    fleet = start_fleet(fleet_factory, home, work)
    r = redis.Redis.from_url(fleet.redis_url, decode_responses=True)

    def pollers() -> dict[str, str]:
        return {key.rsplit(":", 1)[1]: (r.get(key) or "").split("|")[0]
                for key in r.scan_iter(match=f"{fleet.prefix}:lease:s:telegram-poller:*")}

    held = wait_until(lambda: (p := pollers()) and set(p) == {"111111", "222222"} and all(p.values()) and p,
                      "a poller lease per bot", describe=fleet.logs)
    chats = list(WORK_CHATS)[:10]
    for round_ in range(2):
        for chat in chats:
            work.inject_message(chat, f"c{chat} r{round_}")
            home.inject_message(chat, f"h{chat} r{round_}")
    victim = fleet.by_node(held["222222"])
    victim.kill()  # SIGKILL of the work bot's poller (whatever else it held)
    for chat in chats:
        work.inject_message(chat, f"c{chat} r2")
        home.inject_message(chat, f"h{chat} r2")
    survivor = next(p for p in fleet.procs if p is not victim)
    wait_until(lambda: pollers().get("222222") == survivor.node and pollers().get("111111") == survivor.node,  # type: ignore[attr-defined]
               "the survivor polling both bots", describe=fleet.logs)
    wait_until(lambda: all(len(work.messages_to(c)) >= 3 and len(home.messages_to(c)) >= 3 for c in chats),
               "three answers in every chat of both bots", describe=fleet.logs)
    for chat in chats:
        assert work.messages_to(chat) == [f"echo: c{chat} r{i}" for i in range(3)]
        assert home.messages_to(chat) == [f"echo: h{chat} r{i}" for i in range(3)]
    assert len(pollers()) == 2  # one poller per bot, fleet-wide
