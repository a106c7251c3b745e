"""An agent's heartbeat news in a fleet: two real daemons on one home and a real redis-server, agent `work`
bound to its own Telegram bot. Its owner talked to it in two chats, each run on another process, the
last one on the process that does not publish the beats (one per interval, fleet-wide): work's news goes
to the chat the owner last talked from, through work's bot, though another process ran that conversation."""

from __future__ import annotations

from clawgate.agent.fleet.keys import partition_of
from tests.e2e.fleet.test_fleet_agents import answers, work_session
from tests.e2e.fleet.test_fleet_budget import HOME_TOKEN, WORK_TOKEN, start_fleet
from tests.fakes.anthropic_api import FakeAnthropic, Reply, last_user_text, text
from tests.fakes.telegram_api import FakeTelegram
from tests.fleet_support import PARTITIONS, Fleet
from tests.waiting import wait_until

CHATS = range(8100, 8140)
BEAT_LINE = "and HEARTBEAT.md in session agent:work:heartbeat"


def quiet_logs(fleet: Fleet) -> str:
    """The processes' logs without the line of every published beat."""
    return "\n\n".join(f"--- {p.node} ---\n" + "\n".join([ln for ln in p.output if BEAT_LINE not in ln][-60:])
                       for p in fleet.procs)
NEWS = "WORK NEWS: the plants need water"


def test_an_agents_heartbeat_news_reaches_its_owners_last_chat_from_any_process(
        fleet_factory, fake_model: FakeAnthropic) -> None:
    with FakeTelegram(HOME_TOKEN, "home_bot") as home, FakeTelegram(WORK_TOKEN, "work_bot") as work:
        owners = ", ".join(f'"telegram.work:{chat}"' for chat in CHATS)
        fleet = start_fleet(fleet_factory, home, work, f"owners = [{owners}]",
                            env={"CLAWGATE_HEARTBEAT__INTERVAL_SECONDS": "0.5"})
        holders = fleet.holders(fleet.spread(2))
        saying, echo = {"beat": "HEARTBEAT_OK"}, fake_model.responder

        def model(body: dict) -> Reply:
            return text(saying["beat"]) if "[heartbeat]" in last_user_text(body) else echo(body)
        fake_model.responder = model
        (fleet.home / "agents/work/workspace/HEARTBEAT.md").write_text("- water the office plants\n")
        # the beats are claimed once per interval fleet-wide: find the process that publishes them
        beater = wait_until(lambda: next((p.node for p in fleet.procs if any(BEAT_LINE in ln for ln in p.output)), None),
                            "a beat of work published", describe=fleet.logs)
        other = next(p.node for p in fleet.procs if p.node != beater)
        chat_of: dict[str, int] = {}
        for chat in CHATS:
            chat_of.setdefault(holders[partition_of(work_session(chat), PARTITIONS)], chat)
        earlier, latest = chat_of[beater], chat_of[other]  # the owner's last chat ran on the other process
        for chat in (earlier, latest):
            work.inject_message(chat, f"hello from {chat}", user_id=chat)
            wait_until(lambda chat=chat: answers(work, chat) == [f"echo: hello from {chat}"],
                       f"work's answer in chat {chat}", describe=lambda: quiet_logs(fleet))

        saying["beat"] = NEWS
        wait_until(lambda: answers(work, latest).count(NEWS) >= 3, "three beats' news in the owner's last chat",
                   describe=lambda: quiet_logs(fleet))
        assert answers(work, earlier) == [f"echo: hello from {earlier}"]  # not the earlier chat
        assert not home.sent  # not the default agent's bot
