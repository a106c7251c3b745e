"""An agent's `daily_tokens` in a fleet: the count is the fleet's, not each process's. Two real daemons
share one home and a real redis-server; agent `work` (bound to its own Telegram bot) has a small budget,
and its chats are spread over both processes' partitions. Each process alone spends less than the
budget, the fleet together more: the next call, on either process, is refused in one line."""

from __future__ import annotations

from datetime import datetime

import redis

from clawgate.agent.fleet.keys import partition_of
from tests.e2e.fleet.test_fleet_agents import answers, requests_saying, work_session
from tests.fakes.anthropic_api import FakeAnthropic, text
from tests.fakes.telegram_api import FakeTelegram
from tests.fleet_support import PARTITIONS, Fleet, telegram_env
from tests.waiting import wait_until

HOME_TOKEN, WORK_TOKEN = "111111:HOME-TOKEN", "222222:WORK-TOKEN"
BUDGET = 1000
PER_CALL = 300  # 200 in, 100 out: two calls per process (600) stay under the budget, four in the fleet do not
CHATS = range(7100, 7140)


def start_fleet(fleet_factory, home: FakeTelegram, work: FakeTelegram, work_settings: str,
                env: dict[str, str] | None = None) -> Fleet:
    """Two processes; agent `work` (with `work_settings`, TOML lines) bound to the work bot's account."""
    fleet: Fleet = fleet_factory({**telegram_env(home),
                                  "CLAWGATE_CHANNELS__TELEGRAM__ACCOUNTS__WORK__TOKEN": work.token,
                                  "CLAWGATE_CHANNELS__TELEGRAM__ACCOUNTS__WORK__BASE_URL": work.base_url, **(env or {})})
    first = fleet.add(start=False)
    with (fleet.home / "config.toml").open("a", encoding="utf-8") as out:
        out.write(f'\n[agents.home]\ndefault = true\n[agents.work]\n{work_settings}\n'
                  '\n[[bindings]]\nagent = "work"\nmatch = { channel = "telegram", account = "work" }\n')
    first.start()
    fleet.add()
    fleet.spread(2)
    return fleet


def test_an_agents_daily_tokens_hold_for_the_whole_fleet(fleet_factory, fake_model: FakeAnthropic) -> None:
    with FakeTelegram(HOME_TOKEN, "home_bot") as home, FakeTelegram(WORK_TOKEN, "work_bot") as work:
        fleet = start_fleet(fleet_factory, home, work, f"daily_tokens = {BUDGET}")
        r = redis.Redis.from_url(fleet.redis_url, decode_responses=True)
        holders = fleet.holders(r)
        chat_of: dict[str, int] = {}
        for chat in CHATS:  # one chat of the work agent on each process's partitions
            chat_of.setdefault(holders[partition_of(work_session(chat), PARTITIONS)], chat)
        assert set(chat_of) == {"w0", "w1"}, holders

        # four calls, alternating between the processes: 300 tokens each, 600 per process, 1200 in the fleet
        for turn in range(4):
            chat = chat_of["w0" if turn % 2 == 0 else "w1"]
            fake_model.enqueue_for(f"task {turn}", text(f"done {turn}", input_tokens=200, output_tokens=100))
            work.inject_message(chat, f"task {turn}")
            wait_until(lambda chat=chat, turn=turn: f"done {turn}" in answers(work, chat),
                       f"the answer to task {turn}", describe=fleet.logs)
        day = datetime.now().astimezone().date().isoformat()
        assert int(r.get(f"{fleet.prefix}:count:tokens:work:{day}") or 0) == 4 * PER_CALL

        # past the budget across the fleet: refused on both processes, though each spent only 600 itself
        for node in ("w0", "w1"):
            chat = chat_of[node]
            before = len(answers(work, chat))
            work.inject_message(chat, f"one more on {node}")
            wait_until(lambda chat=chat, before=before: len(answers(work, chat)) > before,
                       f"the refusal on {node}", describe=fleet.logs)
            refusal = answers(work, chat)[-1]
            assert "daily token budget" in refusal and f"1200 of {BUDGET}" in refusal, refusal
            assert "agents.work.daily_tokens" in refusal and "\n" not in refusal.strip(), refusal
            assert not requests_saying(fake_model, f"one more on {node}")  # no model call was made

        # the default agent has no budget: it still answers, and spends nothing of work's
        home.inject_message(4242, "hello home")
        wait_until(lambda: home.messages_to(4242) == ["echo: hello home"], "the home bot's answer", describe=fleet.logs)
        assert int(r.get(f"{fleet.prefix}:count:tokens:work:{day}") or 0) == 4 * PER_CALL
        assert not list(r.scan_iter(match=f"{fleet.prefix}:count:tokens:home:*"))
