"""The Discord channel end to end: the real daemon process, real discord.py, the fake Discord server.

Each test injects what a person would do on Discord (a DM, a mention, a button press, a slash
command) and reads what the bot really sent over the fake's REST API.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.fakes.anthropic_api import FakeAnthropic, text, tool_use
from tests.fakes.discord_api import FakeDiscord
from tests.harness import DaemonProcess
from tests.waiting import DEFAULT_TIMEOUT, wait_until

STATUS_PREFIXES = ("⚙️", "⏳")


@pytest.fixture
def discord_fake() -> Iterator[FakeDiscord]:
    with FakeDiscord() as fake:
        yield fake


@pytest.fixture
def dc_daemon(discord_fake: FakeDiscord, daemon_factory: Callable[..., DaemonProcess]) -> Callable[..., DaemonProcess]:
    """A daemon wired to the fake Discord; keyword arguments become channels.discord settings."""

    def make(env: dict[str, str] | None = None, **settings: Any) -> DaemonProcess:
        # the fake sends every GUILD_CREATE right after READY: a 0.5 s wait for more is plenty (default 2 s);
        # a Discord that went away is reported (and reconnected from scratch) after 2 s instead of 10
        values: dict[str, Any] = {"base_url": discord_fake.base_url, "dm_policy": "open",
                                  "owner": [discord_fake.owner_user["id"]], "retry_base_seconds": 0.05,
                                  "guild_ready_timeout_seconds": 0.5, "offline_grace_seconds": 2, **settings}
        full = {"CLAWGATE_CHANNELS__DISCORD__TOKEN": discord_fake.token, **(env or {})}
        for key, value in values.items():
            full[f"CLAWGATE_CHANNELS__DISCORD__{key.upper()}"] = value if isinstance(value, str) else json.dumps(value)
        daemon = daemon_factory(full)
        wait_until(discord_fake.connected, "the daemon's Discord Gateway session", describe=daemon.log_text)
        return daemon

    return make


def replies(fake: FakeDiscord, channel_id: str) -> list[str]:
    """What the bot said in a channel, minus the transient status lines and ephemeral answers."""
    return [m["content"] for m in fake.sent_messages(channel_id)
            if not m["content"].startswith(STATUS_PREFIXES) and not m["flags"] & 64 and not m["components"]]


def wait_replies(fake: FakeDiscord, channel_id: str, count: int) -> list[str]:
    return fake.wait_for(lambda: len(replies(fake, channel_id)) >= count and replies(fake, channel_id),
                         timeout=DEFAULT_TIMEOUT)


def test_dm_chat_and_a_multi_step_task_with_progress(dc_daemon, discord_fake: FakeDiscord,
                                                     fake_model: FakeAnthropic) -> None:
    dc_daemon()
    fake_model.enqueue(text("Hi **alice**! Ask me anything."))
    discord_fake.inject_dm("hello")
    dm = discord_fake.dm_channels[discord_fake.owner_user["id"]]
    assert wait_replies(discord_fake, dm, 1) == ["Hi **alice**! Ask me anything."]

    fake_model.enqueue(tool_use("write_file", {"path": "plan.md", "content": "1. look\n2. write"}),
                       tool_use("list_dir", {"path": "."}), text("Done: wrote plan.md and checked it is there."))
    discord_fake.inject_dm("write a plan, then check it")
    assert wait_replies(discord_fake, dm, 2)[1] == "Done: wrote plan.md and checked it is there."
    assert discord_fake.requests("POST", f"/channels/{dm}/typing")  # typing while it worked
    status_posts = [c for c in discord_fake.requests("POST", f"/channels/{dm}/messages")
                    if (c.json or {}).get("content", "").startswith(STATUS_PREFIXES)]
    assert status_posts, "a status line showed the steps"
    steps = [c.json.get("content", "") for c in status_posts] + [
        (c.json or {}).get("content", "") for c in discord_fake.requests("PATCH", f"/channels/{dm}/messages")]
    assert any("write_file" in s or "list_dir" in s for s in steps)


def test_guild_mention_only_and_reply_in_thread(dc_daemon, discord_fake: FakeDiscord, fake_model) -> None:
    dc_daemon()
    fake_model.enqueue(text("Answered in the thread."))
    discord_fake.inject_guild_message("people talking among themselves")
    discord_fake.inject_guild_message("can you help?", channel_id=discord_fake.thread_id, mention_bot=True)
    assert wait_replies(discord_fake, discord_fake.thread_id, 1) == ["Answered in the thread."]
    assert replies(discord_fake, discord_fake.channel_id) == []
    assert len(fake_model.requests) == 1  # the unaddressed message never reached the model
    assert fake_model.requests[0]["messages"][-1]["content"][-1]["text"] == "can you help?"


def _prompt(fake: FakeDiscord, channel_id: str) -> dict[str, Any]:
    return fake.wait_for(lambda: next((m for m in fake.sent_messages(channel_id) if m["components"]), None),
                         timeout=DEFAULT_TIMEOUT)


def test_risky_tool_approved_by_button_and_a_non_owner_refused(dc_daemon, discord_fake: FakeDiscord,
                                                               fake_model) -> None:
    daemon = dc_daemon()
    fake_model.enqueue(tool_use("exec", {"argv": ["touch", "approved.txt"]}), text("Created approved.txt."))
    discord_fake.inject_guild_message("make a file", mention_bot=True)
    prompt = _prompt(discord_fake, discord_fake.channel_id)
    assert "touch approved.txt" in prompt["content"] and not (daemon.workspace / "approved.txt").exists()
    approve = next(b["custom_id"] for b in prompt["components"][0]["components"] if b["label"] == "Approve")

    refused = discord_fake.press_button(prompt["id"], approve, user_id=discord_fake.other_user["id"])
    discord_fake.wait_for(lambda: any(m["flags"] & 64 and "owner" in m["content"]
                                      for m in discord_fake.sent_messages(discord_fake.channel_id)))
    assert discord_fake.interaction(refused["id"]).refused == []  # acknowledged within Discord's 3 s
    assert not (daemon.workspace / "approved.txt").exists()

    discord_fake.press_button(prompt["id"], approve, user_id=discord_fake.owner_user["id"])
    discord_fake.wait_for(lambda: "Created approved.txt." in replies(discord_fake, discord_fake.channel_id),
                          timeout=DEFAULT_TIMEOUT)
    assert (daemon.workspace / "approved.txt").exists()
    discord_fake.wait_for(lambda: discord_fake._find(prompt["id"])["components"] == [], timeout=DEFAULT_TIMEOUT)


def test_slash_commands_are_registered_and_answered(dc_daemon, discord_fake: FakeDiscord, fake_model) -> None:
    dc_daemon()
    discord_fake.wait_for(lambda: {"new", "stop", "status", "tasks"} <= {c["name"] for c in
                                                                        discord_fake.commands.get(None, [])},
                          timeout=DEFAULT_TIMEOUT)
    ran = discord_fake.run_command("tasks", channel_id=discord_fake.channel_id)
    discord_fake.wait_for(lambda: (discord_fake.interaction(ran["id"]).original_message or {}).get("content"),
                          timeout=DEFAULT_TIMEOUT)
    content = discord_fake.interaction(ran["id"]).original_message["content"]
    # a command's answer is plain text escaped as Markdown, which Discord shows without the backslashes
    assert re.sub(r"\\([^\w\s])", r"\1", content) == "No active tasks in this chat.", content
    assert fake_model.requests == []  # a command never reaches the model


def test_cron_job_result_arrives_in_the_channel(dc_daemon, discord_fake: FakeDiscord, fake_model) -> None:
    daemon = dc_daemon()
    fake_model.enqueue_for("water the plants", text("Time to water the plants 🌱"))
    added = daemon.cli("cron", "add", "--at", "+1s", "--message", "Tell me to water the plants",
                       "--deliver", f"discord:{discord_fake.channel_id}")
    assert added.returncode == 0, added.stderr
    assert wait_replies(discord_fake, discord_fake.channel_id, 1) == ["Time to water the plants 🌱"]


def test_a_duplicate_gateway_event_gets_one_reply(dc_daemon, discord_fake: FakeDiscord, fake_model) -> None:
    dc_daemon()
    fake_model.enqueue(text("first answer"), text("second answer"))
    message = discord_fake.inject_dm("once")
    dm = discord_fake.dm_channels[discord_fake.owner_user["id"]]
    wait_replies(discord_fake, dm, 1)
    discord_fake.redeliver(message)  # as after a RESUME replay
    discord_fake.inject_dm("twice")
    assert wait_replies(discord_fake, dm, 2) == ["first answer", "second answer"]
    assert len(fake_model.requests) == 2


async def test_killing_discord_leaves_the_gateway_chat_answering(dc_daemon, discord_fake: FakeDiscord,
                                                                fake_model) -> None:
    daemon = dc_daemon()
    discord_fake.stop()
    fake_model.enqueue(text("still here"))
    async with daemon.client() as client:
        final = await client.chat("are you there?")
    assert final["text"] == "still here"
    assert daemon.alive()
    discord_fake.start()  # back on the same port: the channel reconnects by itself
    discord_fake.wait_for(discord_fake.connected, timeout=DEFAULT_TIMEOUT)
    fake_model.enqueue(text("back on Discord"))
    discord_fake.inject_dm("hello again")
    dm = discord_fake.dm_channels[discord_fake.owner_user["id"]]
    assert wait_replies(discord_fake, dm, 1) == ["back on Discord"]
    log = daemon.log_text()
    assert discord_fake.token not in log and "Traceback" not in log  # the outage is log lines, not stack traces


async def test_a_bad_token_is_one_line_and_the_daemon_keeps_serving(discord_fake: FakeDiscord, daemon_factory,
                                                                    fake_model) -> None:
    daemon = daemon_factory({"CLAWGATE_CHANNELS__DISCORD__TOKEN": "revoked-token-value",
                             "CLAWGATE_CHANNELS__DISCORD__BASE_URL": discord_fake.base_url})
    line = wait_until(lambda: next((l for l in daemon.log_text().splitlines() if "Reset Token" in l), None),
                      "the bad-token line", describe=daemon.log_text)
    assert "channel discord failed" in line and "Traceback" not in daemon.log_text()
    assert "revoked-token-value" not in daemon.log_text()
    fake_model.enqueue(text("the gateway still answers"))
    async with daemon.client() as client:
        final = await client.chat("hello?")
    assert final["text"] == "the gateway still answers"
    assert discord_fake.identifies == 0  # never got past the REST login


def test_a_stranger_pairs_with_the_cli_and_channels_lists_discord(dc_daemon, discord_fake: FakeDiscord,
                                                                   fake_model) -> None:
    daemon = dc_daemon(dm_policy="pairing", pairing_check_seconds=0.2)
    def state() -> str:
        return next(row for row in json.loads(daemon.cli("channels", "--json").stdout) if row["name"] == "discord")["state"]

    wait_until(lambda: state() == "running", "discord shown running by `clawgate channels`", interval=0.5)
    bob = discord_fake.other_user["id"]
    discord_fake.inject_dm("hi, can I use this?", user_id=bob)
    dm = discord_fake.dm_channels[bob]
    code_line = wait_replies(discord_fake, dm, 1)[0]
    code = re.search(r"pairing approve discord (\w+)", code_line)
    assert code is not None and fake_model.requests == []
    approved = daemon.cli("pairing", "approve", "discord", code[1])
    assert approved.returncode == 0, approved.stderr
    assert "approved" in wait_replies(discord_fake, dm, 2)[1]
    fake_model.enqueue(text("Welcome, bob."))
    discord_fake.inject_dm("hello again", user_id=bob)
    assert wait_replies(discord_fake, dm, 3)[2] == "Welcome, bob."


def test_send_file_arrives_as_an_attachment_in_the_dm(dc_daemon, discord_fake: FakeDiscord,
                                                       fake_model: FakeAnthropic) -> None:
    daemon = dc_daemon()
    (daemon.workspace / "chart.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8)
    fake_model.enqueue(tool_use("send_file", {"path": "chart.png", "caption": "Your chart."}), text("Sent."))
    discord_fake.inject_dm("send me the chart")
    dm = discord_fake.dm_channels[discord_fake.owner_user["id"]]
    wait_until(lambda: "Sent." in replies(discord_fake, dm), "the final answer", describe=daemon.log_text)
    [sent] = [m for m in discord_fake.sent_messages(dm) if m["attachments"]]
    [attachment] = sent["attachments"]
    assert attachment["filename"] == "chart.png" and sent["content"] == "Your chart."
    [(data, _)] = [v for path, v in discord_fake.attachments.items() if path.endswith(f"/{attachment['id']}/chart.png")]
    assert data == (daemon.workspace / "chart.png").read_bytes()
    outbox = daemon.home / "state" / "outbox-files"
    wait_until(lambda: not outbox.exists() or not any(outbox.iterdir()), "the stored copy removed")
