"""What a client that names no agent may do, and who an agent's guests ask, end to end through the real daemon:
a checkpoint of agent `work` is shown, restored or forked only by naming `work` (over the gateway and with
`clawgate checkpoints --agent`); a guest's risky call in `work`, which names its own owners, is asked of
those owners in their private chat, not of the channel's owners."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.fakes.anthropic_api import FakeAnthropic, text, tool_use
from tests.fakes.telegram_api import FakeTelegram
from tests.harness import DaemonProcess
from tests.telegram_support import CHAT, POLL_TIMEOUT, RETRY_BASE, replies

HOME_TOKEN, WORK_TOKEN = "111111:HOME-TOKEN", "222222:WORK-TOKEN"


@pytest.fixture
def home_bot() -> Iterator[FakeTelegram]:
    with FakeTelegram(HOME_TOKEN, "home_bot") as fake:
        yield fake


@pytest.fixture
def work_bot() -> Iterator[FakeTelegram]:
    with FakeTelegram(WORK_TOKEN, "work_bot") as fake:
        yield fake


async def test_another_agents_checkpoint_is_reached_only_by_naming_its_agent(
        daemon_factory: Callable[..., DaemonProcess], fake_model: FakeAnthropic) -> None:
    daemon = daemon_factory({"CLAWGATE_AGENTS": json.dumps({"home": {"default": True}, "work": {}})})
    work_space = daemon.home / "agents" / "work" / "workspace"
    fake_model.enqueue(tool_use("write_file", {"path": "plan.txt", "content": "v1"}), text("written"))
    async with daemon.client() as client:
        assert (await client.chat("write the plan", session="main", agent="work"))["text"] == "written"
        assert (await client.chat("hello home", session="main"))["text"] == "echo: hello home"
        work_cps = (await client.request("checkpoints.list", {"session": "main", "agent": "work"}))["checkpoints"]
        home_cps = (await client.request("checkpoints.list", {"session": "main"}))["checkpoints"]
        assert work_cps and home_cps
        first = work_cps[-1]["id"]  # before the file was written
        assert all(cp["session"] == "agent:work:main" for cp in work_cps)
        # a client naming no agent acts for the default one: a bare id or a bare `agent:work:` key never crosses
        for method, params in (("checkpoints.restore", {"id": first, "confirm": True}),
                               ("checkpoints.show", {"id": first}),
                               ("checkpoints.show", {"id": first, "agent": "home"}),
                               ("checkpoints.fork", {"id": first}),
                               ("checkpoints.fork", {"id": home_cps[0]["id"], "session": "agent:work:stolen"})):
            with pytest.raises(Exception) as info:
                await client.request(method, params)
            assert "belongs to" in str(info.value) and "name it" in str(info.value), (method, info.value)
        assert (work_space / "plan.txt").read_text() == "v1"
        assert not (daemon.home / "state" / "sessions" / "agent%3Awork%3Astolen.jsonl").exists()

        # naming the agent is the owner's explicit act: it works
        shown = await client.request("checkpoints.show", {"id": first, "agent": "work"})
        assert shown["checkpoint"]["session"] == "agent:work:main"
        home_shown = await client.request("checkpoints.show", {"id": home_cps[0]["id"]})
        assert home_shown["checkpoint"]["session"] == "main"
        restored = await client.request("checkpoints.restore", {"id": first, "agent": "work", "confirm": True})
        assert restored["restored"] and not (work_space / "plan.txt").exists()
        forked = await client.request("checkpoints.fork", {"id": first, "agent": "work", "session": "branch"})
        assert forked["session"] == "agent:work:branch"

    # the CLI, through the running daemon, the same
    listed = daemon.cli("checkpoints", "list", "--session", "main", "--agent", "work", "--json")
    assert listed.returncode == 0, listed.stderr
    assert {cp["session"] for cp in json.loads(listed.stdout)["checkpoints"]} == {"agent:work:main"}
    refused = daemon.cli("checkpoints", "fork", first)
    assert refused.returncode != 0 and "belongs to agent 'work'" in refused.stderr + refused.stdout
    assert "Traceback" not in refused.stderr
    refused = daemon.cli("checkpoints", "show", first)
    assert refused.returncode != 0 and "belongs to agent 'work'" in refused.stderr + refused.stdout
    assert "Traceback" not in refused.stderr and refused.stderr.count("\n") == 1, refused.stderr
    shown = daemon.cli("checkpoints", "show", first, "--agent", "work")
    assert shown.returncode == 0 and "session agent:work:main" in shown.stdout, shown.stderr
    done = daemon.cli("checkpoints", "fork", first, "--agent", "work", "--session", "cli-branch")
    assert done.returncode == 0, done.stderr
    assert "agent:work:cli-branch" in done.stdout

    # and on the files, with the daemon stopped
    daemon.terminate()
    refused = daemon.cli("checkpoints", "restore", first, "--yes")
    assert refused.returncode != 0 and "belongs to agent 'work'" in refused.stderr + refused.stdout, refused
    refused = daemon.cli("checkpoints", "show", first, "--json")
    assert refused.returncode != 0 and "belongs to agent 'work'" in refused.stderr + refused.stdout, refused
    shown = daemon.cli("checkpoints", "show", first, "--agent", "work", "--json")
    assert shown.returncode == 0 and json.loads(shown.stdout)["checkpoint"]["id"] == first, shown.stderr
    offline = daemon.cli("checkpoints", "fork", first, "--agent", "work", "--session", "offline-branch")
    assert offline.returncode == 0, offline.stderr
    assert (daemon.home / "state" / "sessions" / "agent%3Awork%3Aoffline-branch.jsonl").exists()
    listed = daemon.cli("checkpoints", "list", "--session", "main", "--agent", "work", "--json")
    assert listed.returncode == 0 and first in {cp["id"] for cp in json.loads(listed.stdout)["checkpoints"]}


def test_a_guests_request_in_an_agent_with_its_own_owners_goes_to_those_owners(
        daemon_factory: Callable[..., DaemonProcess], tmp_path: Path, home_bot: FakeTelegram, work_bot: FakeTelegram,
        fake_model: FakeAnthropic) -> None:
    agent_owner, channel_owner = 777, 555
    home = tmp_path / "owners-home"
    DaemonProcess(home, anthropic_url=None).init()
    with (home / "config.toml").open("a", encoding="utf-8") as out:
        out.write(f'\n[channels.telegram.accounts.work]\ntoken = "{WORK_TOKEN}"\nbase_url = "{work_bot.base_url}"\n'
                  f'\n[agents.home]\ndefault = true\n[agents.work]\nowners = ["telegram.work:{agent_owner}"]\n'
                  '\n[[bindings]]\nagent = "work"\nmatch = { channel = "telegram", account = "work" }\n')
    env = {"TELEGRAM_BOT_TOKEN": home_bot.token, "CLAWGATE_CHANNELS__TELEGRAM__BASE_URL": home_bot.base_url,
           "CLAWGATE_CHANNELS__TELEGRAM__POLL_TIMEOUT_SECONDS": str(POLL_TIMEOUT),
           "CLAWGATE_CHANNELS__TELEGRAM__DM_POLICY": "open",
           "CLAWGATE_CHANNELS__TELEGRAM__OWNER": json.dumps([str(channel_owner)]),
           "CLAWGATE_CHANNELS__TELEGRAM__RETRY_BASE_SECONDS": str(RETRY_BASE)}
    daemon = daemon_factory(env, home=home, init=False)
    # the channel's owner has talked to the work bot privately: before, guests' requests were asked there
    fake_model.enqueue(text("hi operator"))
    work_bot.inject_message(channel_owner, "hello", user_id=channel_owner)
    work_bot.wait_for(lambda: replies(work_bot, channel_owner) == ["hi operator"])

    fake_model.enqueue(tool_use("exec", {"argv": ["touch", "guest.txt"]}), text("touched"))
    work_bot.inject_message(CHAT, "make a file")
    work_bot.wait_for(lambda: any(m.get("reply_markup") for m in work_bot.sent))
    prompt = next(m for m in work_bot.sent if m.get("reply_markup"))
    assert prompt["chat_id"] == agent_owner, prompt
    assert not any(m.get("reply_markup") for m in work_bot.sent if m["chat_id"] in (channel_owner, CHAT))
    assert not any(m.get("reply_markup") for m in home_bot.sent)
    approve = next(b["callback_data"] for row in prompt["reply_markup"]["inline_keyboard"] for b in row
                   if "Approve" in b["text"])
    work_bot.inject_callback(agent_owner, agent_owner, approve, prompt["message_id"])
    work_bot.wait_for(lambda: replies(work_bot, CHAT)[-1:] == ["touched"])
    assert work_bot.callback_answers[-1]["text"] == "Approved."
    assert daemon.alive()
