"""Each agent its own workspace and model, and nothing crosses between agents, end to end: the real daemon,
its gateway clients and the fake model. Agent `work` (not the default) tries every route into agent
`home`'s files: read_file by a relative path, an absolute path and `..`; memory_search and memory_get;
a checkpoint of a home session restored or forked in work's name; a sub-agent it starts."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from clawgate.workspace.users import folder_name
from tests.fakes.anthropic_api import FakeAnthropic, text, tool_use
from tests.fakes.anthropic.request_text import tool_results
from tests.fakes.telegram_api import FakeTelegram
from tests.harness import DaemonProcess
from tests.mcp_support import mcp_status, stdio_server_env
from tests.telegram_support import CHAT, DELIVERY_RETRY, POLL_TIMEOUT, RETRY_BASE, replies, user_texts
from tests.waiting import wait_until

WORK_MODEL = "claude-work-model-7"
HOME_SECRET = "HOME-ONLY-zebra-4711"


def system_text(body: dict[str, Any]) -> str:
    return "\n".join(block.get("text", "") for block in body.get("system") or [])


def _start(daemon_factory: Callable[..., DaemonProcess], tmp_path: Path, **work: Any) -> DaemonProcess:
    agents = {"home": {"default": True}, "work": {"model": WORK_MODEL, **work}}
    return daemon_factory({"CLAWGATE_AGENTS": json.dumps(agents)})


async def test_each_agent_has_its_own_workspace_soul_and_model(
        daemon_factory: Callable[..., DaemonProcess], fake_model: FakeAnthropic, tmp_path: Path) -> None:
    daemon = _start(daemon_factory, tmp_path, max_tokens=1234, name="Ergon")
    work_space = daemon.home / "agents" / "work" / "workspace"
    assert (work_space / "SOUL.md").is_file() and (work_space / "AGENTS.md").is_file()  # `clawgate init`'s templates
    (daemon.workspace / "SOUL.md").write_text("You are Hestia, the household's assistant.\n")
    (work_space / "SOUL.md").write_text("You are Ergon, the office's assistant.\n")
    (work_space / "MEMORY.md").write_text("- the quarterly report is due Friday\n")
    async with daemon.client() as client:
        assert (await client.chat("hello work", session="main", agent="work"))["text"] == "echo: hello work"
        assert (await client.chat("hello home", session="main"))["text"] == "echo: hello home"
        work_status = (await client.chat("/status", session="main", agent="work"))["text"]
        home_status = (await client.chat("/status", session="main"))["text"]
    assert work_status.startswith(f"Ergon · model {WORK_MODEL} ·"), work_status
    assert not home_status.startswith("Ergon") and WORK_MODEL not in home_status, home_status
    work_body, home_body = fake_model.requests[-2], fake_model.requests[-1]
    assert "Ergon" in system_text(work_body) and "Hestia" not in system_text(work_body)
    assert "quarterly report" in system_text(work_body) and str(work_space) in system_text(work_body)
    assert "Hestia" in system_text(home_body) and "Ergon" not in system_text(home_body)
    assert "quarterly report" not in system_text(home_body)
    assert work_body["model"] == WORK_MODEL and home_body["model"] != WORK_MODEL
    assert work_body["max_tokens"] == 1234 and home_body["max_tokens"] != 1234


async def test_an_agent_named_workspace_path_is_honoured(
        daemon_factory: Callable[..., DaemonProcess], fake_model: FakeAnthropic, tmp_path: Path) -> None:
    elsewhere = tmp_path / "work-agent"
    daemon = _start(daemon_factory, tmp_path, workspace=str(elsewhere))
    assert (elsewhere / "SOUL.md").is_file()
    fake_model.enqueue(tool_use("write_file", {"path": "note.txt", "content": "written by work"}), text("done"))
    async with daemon.client() as client:
        assert (await client.chat("write a note", session="main", agent="work"))["text"] == "done"
    assert (elsewhere / "note.txt").read_text() == "written by work"
    assert not (daemon.workspace / "note.txt").exists()
    assert not (daemon.home / "agents" / "work" / "workspace").exists()


async def test_no_route_from_one_agent_reaches_another_agents_files_memory_or_checkpoints(
        daemon_factory: Callable[..., DaemonProcess], fake_model: FakeAnthropic, tmp_path: Path) -> None:
    daemon = _start(daemon_factory, tmp_path)
    (daemon.workspace / "secret.txt").write_text(HOME_SECRET + "\n")
    (daemon.workspace / "MEMORY.md").write_text(f"- the safe code is {HOME_SECRET}\n")
    async with daemon.client() as client:
        # home's own conversation: its transcript holds the secret, and its checkpoints exist
        fake_model.enqueue(text(f"noted {HOME_SECRET}"))
        await client.chat(f"remember {HOME_SECRET}", session="main")
        fake_model.enqueue(
            tool_use("read_file", {"path": "secret.txt"}),
            tool_use("read_file", {"path": str(daemon.workspace / "secret.txt")}),
            tool_use("read_file", {"path": "../../../workspace/secret.txt"}),
            tool_use("list_dir", {"path": str(daemon.workspace)}),
            tool_use("memory_search", {"query": "zebra"}),
            tool_use("memory_get", {"path": "sessions/main.jsonl"}),
            tool_use("memory_get", {"path": "MEMORY.md"}),
            text("tried everything"))
        assert (await client.chat("find the safe code", session="main", agent="work"))["text"] == "tried everything"
        results = tool_results(fake_model.requests[-1:])  # the last request carries the run's every result
        assert len(results) == 7, results
        assert not any(HOME_SECRET in result for result in results), results
        assert not any("secret.txt" in result for result in results[3:4]), results  # nothing listed of home's folder
        assert "no matches" in results[4]
        assert "not available" in results[5] or "does not exist" in results[5], results[5]

        cps = (await client.request("checkpoints.list", {"session": "main"}))["checkpoints"]
        assert cps, "home's conversation has checkpoints"
        home_cp = cps[0]["id"]
        for method, params in (("checkpoints.restore", {"id": home_cp, "agent": "work", "confirm": True}),
                               ("checkpoints.fork", {"id": home_cp, "agent": "work"}),
                               ("checkpoints.fork", {"id": home_cp, "agent": "work", "session": "stolen"})):
            with pytest.raises(Exception) as info:
                await client.request(method, params)
            assert "another agent" in str(info.value), (method, info.value)
        history = await client.request("chat.history", {"session": "main"})
        assert any(HOME_SECRET in m["text"] for m in history["messages"])  # home's conversation untouched
        assert not (daemon.home / "state" / "sessions" / "agent%3Awork%3Astolen.jsonl").exists()


async def test_a_sub_agent_started_by_an_agent_works_in_that_agents_workspace(
        daemon_factory: Callable[..., DaemonProcess], fake_model: FakeAnthropic, tmp_path: Path) -> None:
    daemon = _start(daemon_factory, tmp_path)
    (daemon.workspace / "secret.txt").write_text(HOME_SECRET + "\n")
    work_space = daemon.home / "agents" / "work" / "workspace"
    before = len(fake_model.requests)
    fake_model.enqueue(
        tool_use("spawn", {"task": "write child.txt and read secret.txt"}),
        tool_use("write_file", {"path": "child.txt", "content": "from the child"}),  # the child's turns
        tool_use("read_file", {"path": "secret.txt"}),
        text("child done"),
        text("parent done"))
    async with daemon.client() as client:
        assert (await client.chat("delegate", session="main", agent="work"))["text"] == "parent done"
    wait_until(lambda: (work_space / "child.txt").exists(), "the child's file in work's workspace",
               describe=daemon.log_text)
    assert not (daemon.workspace / "child.txt").exists()
    assert not any(HOME_SECRET in result for result in tool_results(fake_model.requests[before:]))
    child_bodies = [b for b in fake_model.requests[before:] if "write child.txt" in json.dumps(b["messages"][:1])]
    assert child_bodies and all(b["model"] == WORK_MODEL for b in child_bodies)


HOME_TOKEN, WORK_TOKEN = "111111:HOME-TOKEN", "222222:WORK-TOKEN"


@pytest.fixture
def home_bot() -> Iterator[FakeTelegram]:
    with FakeTelegram(HOME_TOKEN, "home_bot") as fake:
        yield fake


@pytest.fixture
def work_bot() -> Iterator[FakeTelegram]:
    with FakeTelegram(WORK_TOKEN, "work_bot") as fake:
        yield fake


def test_two_telegram_bots_bound_to_two_agents_answer_each_with_its_own_soul_and_model(
        daemon_factory: Callable[..., DaemonProcess], tmp_path: Path, home_bot: FakeTelegram, work_bot: FakeTelegram,
        fake_model: FakeAnthropic) -> None:
    """Config as a user writes it: the work bot's account bound to agent work, whose model is its own. The
    people writing are guests (no owner configured): a guest of home cannot reach work's owner folder."""
    home = tmp_path / "two-bots-home"
    DaemonProcess(home, anthropic_url=None).init()
    with (home / "config.toml").open("a", encoding="utf-8") as out:
        out.write(f'\n[channels.telegram.accounts.work]\ntoken = "{WORK_TOKEN}"\nbase_url = "{work_bot.base_url}"\n'
                  f'\n[agents.home]\ndefault = true\n[agents.work]\nmodel = "{WORK_MODEL}"\n'
                  '\n[[bindings]]\nagent = "work"\nmatch = { channel = "telegram", account = "work" }\n')
    env = {"TELEGRAM_BOT_TOKEN": home_bot.token, "CLAWGATE_CHANNELS__TELEGRAM__BASE_URL": home_bot.base_url,
           "CLAWGATE_CHANNELS__TELEGRAM__POLL_TIMEOUT_SECONDS": str(POLL_TIMEOUT),
           "CLAWGATE_CHANNELS__TELEGRAM__DM_POLICY": "open",
           "CLAWGATE_CHANNELS__TELEGRAM__RETRY_BASE_SECONDS": str(RETRY_BASE),
           "CLAWGATE_CHANNELS__DELIVERY_RETRY_SECONDS": str(DELIVERY_RETRY)}
    work_space = home / "agents" / "work" / "workspace"
    (home / "workspace" / "SOUL.md").write_text("You are Hestia, the household's assistant.\n")
    work_space.mkdir(parents=True)
    (work_space / "SOUL.md").write_text("You are Ergon, the office's assistant.\n")  # a folder of its own: no templates
    daemon = daemon_factory(env, home=home, init=False)
    assert not (work_space / "AGENTS.md").exists()

    fake_model.enqueue(text("home answer"))
    home_bot.inject_message(CHAT, "hello home")
    home_bot.wait_for(lambda: replies(home_bot, CHAT) == ["home answer"])
    home_body = fake_model.requests[-1]
    fake_model.enqueue(text("work answer"))
    work_bot.inject_message(CHAT, "hello work")
    work_bot.wait_for(lambda: replies(work_bot, CHAT) == ["work answer"])
    work_body = fake_model.requests[-1]
    assert user_texts(home_body) == ["hello home"] and user_texts(work_body) == ["hello work"]
    assert "Hestia" in system_text(home_body) and "Ergon" not in system_text(home_body)
    assert "Ergon" in system_text(work_body) and "Hestia" not in system_text(work_body)
    assert work_body["model"] == WORK_MODEL and home_body["model"] != WORK_MODEL
    assert (home / "state" / "sessions" / "agent%3Awork%3Atelegram.work%3A4242.jsonl").exists()

    # a guest of home tries work's owner folder by its absolute path: refused
    fake_model.enqueue(tool_use("read_file", {"path": str(work_space / "SOUL.md")}), text("could not"))
    home_bot.inject_message(CHAT, "read the other agent's soul")
    home_bot.wait_for(lambda: replies(home_bot, CHAT)[-1:] == ["could not"])
    results = tool_results(fake_model.requests[-1:])
    assert len(results) == 1 and "Ergon" not in results[0] and results[0].startswith("error"), results

    # the message tool of work cannot post into home's chat (the same chat id on home's bot), nor home into work's
    fake_model.enqueue(tool_use("message", {"text": "psst from work", "channel": "telegram", "chat_id": str(CHAT)}),
                       text("work tried"))
    work_bot.inject_message(CHAT, "tell the home chat")
    work_bot.wait_for(lambda: replies(work_bot, CHAT)[-1:] == ["work tried"])
    assert "another agent's chat" in tool_results(fake_model.requests[-1:])[0]
    fake_model.enqueue(tool_use("message", {"text": "psst from home", "channel": "telegram.work",
                                            "chat_id": str(CHAT)}), text("home tried"))
    home_bot.inject_message(CHAT, "tell the work chat")
    home_bot.wait_for(lambda: replies(home_bot, CHAT)[-1:] == ["home tried"])
    assert "another agent's chat" in tool_results(fake_model.requests[-1:])[-1]
    assert not any("psst" in answer for answer in replies(home_bot, CHAT) + replies(work_bot, CHAT))

    # a file sent to the work bot lands in the sender's folder of work, not of home
    fake_model.enqueue(text("filed"))
    work_bot.inject_document(CHAT, b"office numbers\n", "numbers.txt", mime_type="text/plain", caption="keep")
    work_bot.wait_for(lambda: replies(work_bot, CHAT)[-1:] == ["filed"])
    [saved] = list((home / "agents" / "work" / "workspaces" / folder_name(f"telegram.work:{CHAT}") / "inbox").iterdir())
    assert saved.read_bytes() == b"office numbers\n"
    assert not (daemon.guest_workspace(f"telegram.work:{CHAT}") / "inbox").exists()
    assert daemon.alive()


async def test_an_agents_tool_list_is_all_its_model_is_offered_and_all_it_may_call(
        daemon_factory: Callable[..., DaemonProcess], fake_model: FakeAnthropic, tmp_path: Path) -> None:
    daemon = _start(daemon_factory, tmp_path, tools={"allow": ["read_file", "list_dir"]})
    work_space = daemon.home / "agents" / "work" / "workspace"
    fake_model.enqueue(tool_use("write_file", {"path": "x.txt", "content": "not allowed"}), text("refused"))
    async with daemon.client() as client:
        assert (await client.chat("write x", session="main", agent="work"))["text"] == "refused"
        work_body = fake_model.requests[-1]
        assert (await client.chat("hello home", session="main"))["text"] == "echo: hello home"
    assert sorted(tool["name"] for tool in work_body["tools"]) == ["list_dir", "read_file"]
    assert "is not one of this agent's tools" in tool_results([work_body])[0]
    assert not (work_space / "x.txt").exists()
    assert "write_file" in {tool["name"] for tool in fake_model.requests[-1]["tools"]}  # the default agent: all


def test_an_agents_owners_own_its_chats_and_no_other_agents(
        daemon_factory: Callable[..., DaemonProcess], tmp_path: Path, home_bot: FakeTelegram, work_bot: FakeTelegram,
        fake_model: FakeAnthropic) -> None:
    """`owners` of agent work make the sender its owner on the work bot (its owner workspace); on the home
    bot, whose agent names no owners and whose channel has none, the same person stays a guest."""
    home = tmp_path / "owners-home"
    DaemonProcess(home, anthropic_url=None).init()
    with (home / "config.toml").open("a", encoding="utf-8") as out:
        out.write(f'\n[channels.telegram.accounts.work]\ntoken = "{WORK_TOKEN}"\nbase_url = "{work_bot.base_url}"\n'
                  f'\n[agents.home]\ndefault = true\n[agents.work]\nowners = ["telegram.work:{CHAT}"]\n'
                  '\n[[bindings]]\nagent = "work"\nmatch = { channel = "telegram", account = "work" }\n')
    env = {"TELEGRAM_BOT_TOKEN": home_bot.token, "CLAWGATE_CHANNELS__TELEGRAM__BASE_URL": home_bot.base_url,
           "CLAWGATE_CHANNELS__TELEGRAM__POLL_TIMEOUT_SECONDS": str(POLL_TIMEOUT),
           "CLAWGATE_CHANNELS__TELEGRAM__DM_POLICY": "open",
           "CLAWGATE_CHANNELS__TELEGRAM__RETRY_BASE_SECONDS": str(RETRY_BASE)}
    daemon = daemon_factory(env, home=home, init=False)
    fake_model.enqueue(tool_use("write_file", {"path": "owned.txt", "content": "by the owner"}), text("work wrote"))
    work_bot.inject_message(CHAT, "write it")
    work_bot.wait_for(lambda: replies(work_bot, CHAT) == ["work wrote"])
    fake_model.enqueue(tool_use("write_file", {"path": "guest.txt", "content": "by a guest"}), text("home wrote"))
    home_bot.inject_message(CHAT, "write it too")
    home_bot.wait_for(lambda: replies(home_bot, CHAT) == ["home wrote"])
    assert (home / "agents" / "work" / "workspace" / "owned.txt").read_text() == "by the owner"
    assert (daemon.guest_workspace(f"telegram:{CHAT}") / "guest.txt").read_text() == "by a guest"
    assert not (daemon.workspace / "guest.txt").exists() and not (daemon.workspace / "owned.txt").exists()

    # a risky call of the work agent's owner is asked in its chat and answered by that owner
    fake_model.enqueue(tool_use("exec", {"argv": ["touch", "approved.txt"]}), text("touched"))
    work_bot.inject_message(CHAT, "make a file")
    work_bot.wait_for(lambda: any(m.get("reply_markup") for m in work_bot.sent))
    prompt = next(m for m in work_bot.sent if m.get("reply_markup"))
    approve = next(b["callback_data"] for row in prompt["reply_markup"]["inline_keyboard"] for b in row
                   if "Approve" in b["text"])
    work_bot.inject_callback(CHAT, 9999, approve, prompt["message_id"])  # not an owner of work
    work_bot.wait_for(lambda: len(work_bot.callback_answers) == 1)
    assert "Only the owner" in work_bot.callback_answers[0]["text"]
    work_bot.inject_callback(CHAT, CHAT, approve, prompt["message_id"])
    work_bot.wait_for(lambda: replies(work_bot, CHAT)[-1:] == ["touched"])
    assert work_bot.callback_answers[-1]["text"] == "Approved."
    assert (home / "agents" / "work" / "workspace" / "approved.txt").exists()


def test_a_channels_owner_is_a_guest_of_an_agent_that_names_its_own_owners(
        daemon_factory: Callable[..., DaemonProcess], tmp_path: Path, home_bot: FakeTelegram, work_bot: FakeTelegram,
        fake_model: FakeAnthropic) -> None:
    home = tmp_path / "owners-home"
    DaemonProcess(home, anthropic_url=None).init()
    with (home / "config.toml").open("a", encoding="utf-8") as out:
        out.write(f'\n[channels.telegram.accounts.work]\ntoken = "{WORK_TOKEN}"\nbase_url = "{work_bot.base_url}"\n'
                  '\n[agents.home]\ndefault = true\n[agents.work]\nowners = ["telegram.work:999"]\n'
                  '\n[[bindings]]\nagent = "work"\nmatch = { channel = "telegram", account = "work" }\n')
    env = {"TELEGRAM_BOT_TOKEN": home_bot.token, "CLAWGATE_CHANNELS__TELEGRAM__BASE_URL": home_bot.base_url,
           "CLAWGATE_CHANNELS__TELEGRAM__POLL_TIMEOUT_SECONDS": str(POLL_TIMEOUT),
           "CLAWGATE_CHANNELS__TELEGRAM__DM_POLICY": "open",
           "CLAWGATE_CHANNELS__TELEGRAM__OWNER": json.dumps([str(CHAT)]),
           "CLAWGATE_CHANNELS__TELEGRAM__RETRY_BASE_SECONDS": str(RETRY_BASE)}
    daemon = daemon_factory(env, home=home, init=False)
    work_space = home / "agents" / "work" / "workspace"
    fake_model.enqueue(tool_use("write_file", {"path": "mine.txt", "content": "the operator's"}), text("home wrote"))
    home_bot.inject_message(CHAT, "write it")
    home_bot.wait_for(lambda: replies(home_bot, CHAT) == ["home wrote"])
    assert (daemon.workspace / "mine.txt").read_text() == "the operator's"  # the channel's owner owns home
    fake_model.enqueue(tool_use("write_file", {"path": "notmine.txt", "content": "a guest's"}), text("work wrote"))
    work_bot.inject_message(CHAT, "write it too")
    work_bot.wait_for(lambda: replies(work_bot, CHAT) == ["work wrote"])
    fake_model.enqueue(text("filed"))
    work_bot.inject_document(CHAT, b"guest numbers\n", "numbers.txt", mime_type="text/plain", caption="keep")
    work_bot.wait_for(lambda: replies(work_bot, CHAT)[-1:] == ["filed"])
    guest = home / "agents" / "work" / "workspaces" / folder_name(f"telegram.work:{CHAT}")
    assert (guest / "notmine.txt").read_text() == "a guest's"
    assert [p.read_bytes() for p in (guest / "inbox").iterdir()] == [b"guest numbers\n"]
    assert not (work_space / "notmine.txt").exists() and not (work_space / "inbox").exists()


async def test_mcp_servers_which_run_in_the_default_agents_workspace_are_offered_to_it_alone(
        daemon_factory: Callable[..., DaemonProcess], fake_model: FakeAnthropic, tmp_path: Path) -> None:
    """Another agent gets an MCP server's tools only when its `tools.allow` names them."""
    agents = {"home": {"default": True}, "work": {}, "ops": {"tools": {"allow": ["mcp_fake_add"]}}}
    daemon = daemon_factory({**stdio_server_env(tmp_path, read_only_tools=["add", "echo"]),
                             "CLAWGATE_AGENTS": json.dumps(agents)})
    assert (await mcp_status(daemon))["state"] == "up"
    fake_model.enqueue(tool_use("mcp_fake_add", {"a": 2, "b": 3}), text("work tried"))
    async with daemon.client() as client:
        assert (await client.chat("add", session="main", agent="work"))["text"] == "work tried"
        work_body = fake_model.requests[-1]
        fake_model.enqueue(tool_use("mcp_fake_add", {"a": 2, "b": 3}), text("ops added"))
        assert (await client.chat("add", session="main", agent="ops"))["text"] == "ops added"
        ops_body = fake_model.requests[-1]
        assert (await client.chat("hello", session="main"))["text"] == "echo: hello"
    assert not any(t["name"].startswith("mcp_") for t in work_body["tools"])
    assert "read_file" in {t["name"] for t in work_body["tools"]}
    assert "is not one of this agent's tools" in tool_results([work_body])[0]
    assert [t["name"] for t in ops_body["tools"]] == ["mcp_fake_add"] and "5" in tool_results([ops_body])[0]
    assert "mcp_fake_add" in {t["name"] for t in fake_model.requests[-1]["tools"]}  # the default agent: all
