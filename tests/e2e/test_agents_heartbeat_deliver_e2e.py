"""Each agent's heartbeat news goes to that agent's chat, end to end: the real daemon, python-telegram-bot
against two fake Bot API servers (the default agent's bot and agent `work`'s bot, bound by account).

- `work` sets no `heartbeat_deliver`: "last", the chat its owner last talked to it from, on work's own
  bot, even after a guest wrote to work more recently (the owner's checklist is not a guest's news);
- `ops` names an explicit target (`heartbeat_deliver = "telegram.work:6300"`): its news goes there;
- the default agent's bot says nothing of either."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import pytest

from tests.fakes.anthropic_api import FakeAnthropic, Reply, last_user_text, text
from tests.fakes.telegram_api import FakeTelegram
from tests.harness import DaemonProcess
from tests.telegram_support import replies
from tests.waiting import wait_until

HOME_TOKEN, WORK_TOKEN = "111111:HOME-TOKEN", "222222:WORK-TOKEN"
OWNER, GUEST, OPS_TARGET = 6100, 6200, 6300


@pytest.fixture
def bots() -> Iterator[tuple[FakeTelegram, FakeTelegram]]:
    with FakeTelegram(HOME_TOKEN, "home_bot") as home, FakeTelegram(WORK_TOKEN, "work_bot") as work:
        yield home, work


def _env(home: FakeTelegram, work: FakeTelegram) -> dict[str, str]:
    agents = {"home": {"default": True},
              "work": {"owners": [f"telegram.work:{OWNER}"]},
              "ops": {"heartbeat_deliver": f"telegram.work:{OPS_TARGET}"}}
    bindings = [{"agent": "work", "match": {"channel": "telegram", "account": "work"}}]
    return {"TELEGRAM_BOT_TOKEN": home.token, "CLAWGATE_CHANNELS__TELEGRAM__BASE_URL": home.base_url,
            "CLAWGATE_CHANNELS__TELEGRAM__POLL_TIMEOUT_SECONDS": "1", "CLAWGATE_CHANNELS__TELEGRAM__DM_POLICY": "open",
            "CLAWGATE_CHANNELS__TELEGRAM__RETRY_BASE_SECONDS": "0.05",
            "CLAWGATE_CHANNELS__TELEGRAM__ACCOUNTS__WORK__TOKEN": work.token,
            "CLAWGATE_CHANNELS__TELEGRAM__ACCOUNTS__WORK__BASE_URL": work.base_url,
            "CLAWGATE_AGENTS": json.dumps(agents), "CLAWGATE_BINDINGS": json.dumps(bindings),
            "CLAWGATE_HEARTBEAT__INTERVAL_SECONDS": "0.5"}


def test_each_agents_heartbeat_news_reaches_its_owners_last_chat_or_its_own_target(
        bots: tuple[FakeTelegram, FakeTelegram], daemon_factory: Callable[..., DaemonProcess],
        fake_model: FakeAnthropic) -> None:
    home, work = bots
    daemon = daemon_factory(_env(home, work))
    work.inject_message(OWNER, "hello work", user_id=OWNER)
    wait_until(lambda: replies(work, OWNER) == ["echo: hello work"], "work's answer to its owner",
               describe=daemon.log_text)
    work.inject_message(GUEST, "hello from a guest", user_id=GUEST)  # later than the owner, and not the owner
    wait_until(lambda: replies(work, GUEST) == ["echo: hello from a guest"], "work's answer to the guest",
               describe=daemon.log_text)
    sessions = daemon.home / "state" / "sessions"
    assert (sessions / f"agent%3Awork%3Atelegram.work%3A{GUEST}.jsonl").exists()

    echo = fake_model.responder

    def news(body: dict) -> Reply:
        asked = last_user_text(body)
        if "[heartbeat]" not in asked:
            return echo(body)
        return text("WORK NEWS: the plants need water" if "office plants" in asked else "OPS NEWS: backups are stale")
    fake_model.responder = news
    for agent, line in (("work", "- water the office plants"), ("ops", "- check last night's backups")):
        (daemon.home / "agents" / agent / "workspace" / "HEARTBEAT.md").write_text(line + "\n")

    # two beats' news each, so the negative checks below come after more than one delivery
    wait_until(lambda: replies(work, OWNER).count("WORK NEWS: the plants need water") >= 2,
               "work's heartbeat news in its owner's chat", describe=daemon.log_text)
    wait_until(lambda: replies(work, OPS_TARGET).count("OPS NEWS: backups are stale") >= 2,
               "ops's heartbeat news at its target", describe=daemon.log_text)
    assert replies(work, GUEST) == ["echo: hello from a guest"]  # never the guest's chat
    assert "OPS NEWS: backups are stale" not in replies(work, OWNER)
    assert not home.sent  # the default agent's bot says nothing of the other agents' heartbeats
    # the beats ran in each agent's heartbeat session, as before
    for agent in ("work", "ops"):
        assert (sessions / f"agent%3A{agent}%3Aheartbeat.jsonl").exists()
