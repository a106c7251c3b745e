"""Bindings route chats to agents, end to end: the real daemon, real discord.py against the fake Discord,
the gateway's own clients. The route is decided once at intake and stored in the session key."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.fakes.anthropic_api import FakeAnthropic, Reply, text
from tests.fakes.discord_api import FakeDiscord
from tests.harness import DaemonProcess
from tests.waiting import DEFAULT_TIMEOUT, wait_until

AGENTS = {"home": {"default": True}, "guildbot": {}}


@pytest.fixture
def discord_fake() -> Iterator[FakeDiscord]:
    with FakeDiscord() as fake:
        yield fake


def _discord_env(fake: FakeDiscord, bindings: list[dict[str, Any]]) -> dict[str, str]:
    settings: dict[str, Any] = {"token": fake.token, "base_url": fake.base_url, "dm_policy": "open",
                                "owner": [fake.owner_user["id"]], "retry_base_seconds": 0.05,
                                "guild_ready_timeout_seconds": 0.5, "offline_grace_seconds": 2}
    env = {f"CLAWGATE_CHANNELS__DISCORD__{k.upper()}": v if isinstance(v, str) else json.dumps(v)
           for k, v in settings.items()}
    return {**env, "CLAWGATE_AGENTS": json.dumps(AGENTS), "CLAWGATE_BINDINGS": json.dumps(bindings)}


def _answers(fake: FakeDiscord, channel_id: str) -> list[str]:
    return [m["content"] for m in fake.sent_messages(channel_id)
            if not m["content"].startswith(("⚙️", "⏳")) and not m["flags"] & 64 and not m["components"]]


async def _sessions(daemon: DaemonProcess) -> dict[str, str]:
    async with daemon.client() as client:
        return {row["key"]: row["agent"] for row in (await client.request("sessions.list"))["sessions"]}


async def test_a_discord_guild_goes_to_its_agent_while_dms_stay_with_the_default(
        discord_fake: FakeDiscord, daemon_factory: Callable[..., DaemonProcess], fake_model: FakeAnthropic) -> None:
    daemon = daemon_factory(_discord_env(discord_fake, [
        {"agent": "guildbot", "match": {"channel": "discord", "guild": discord_fake.guild_id}}]))
    wait_until(discord_fake.connected, "the daemon's Discord Gateway session", describe=daemon.log_text)
    fake_model.enqueue(text("dm answer"))
    discord_fake.inject_dm("hello from a DM")
    dm = discord_fake.dm_channels[discord_fake.owner_user["id"]]
    discord_fake.wait_for(lambda: _answers(discord_fake, dm) == ["dm answer"], timeout=DEFAULT_TIMEOUT)
    fake_model.enqueue(text("guild answer"))
    discord_fake.inject_guild_message("help us", channel_id=discord_fake.thread_id, mention_bot=True)
    discord_fake.wait_for(lambda: _answers(discord_fake, discord_fake.thread_id) == ["guild answer"],
                          timeout=DEFAULT_TIMEOUT)
    sessions = await _sessions(daemon)
    assert sessions[f"discord:{dm}"] == "home"  # the default agent's key is today's key
    guild_keys = [key for key, agent in sessions.items() if agent == "guildbot"]
    assert len(guild_keys) == 1 and guild_keys[0].startswith("agent:guildbot:discord:"), sessions
    assert discord_fake.thread_id in guild_keys[0]


async def test_a_changed_binding_never_moves_a_message_already_taken_in(
        discord_fake: FakeDiscord, daemon_factory: Callable[..., DaemonProcess], fake_model: FakeAnthropic) -> None:
    """The route is stored with the message: one taken in under a binding and answered after a restart
    with the binding gone still belongs to the agent it was routed to; the next message follows the new config."""
    daemon = daemon_factory(_discord_env(discord_fake, [
        {"agent": "guildbot", "match": {"channel": "discord", "peer": discord_fake.owner_user["id"]}}]))
    wait_until(discord_fake.connected, "the daemon's Discord Gateway session", describe=daemon.log_text)
    called, gate = threading.Event(), threading.Event()

    def wait_then_answer(body: dict[str, Any]) -> Reply:
        called.set()
        gate.wait(DEFAULT_TIMEOUT)  # the first answer waits: the message is in the inbox, not yet answered
        return text("answered after the restart")

    fake_model.responder = wait_then_answer
    discord_fake.inject_dm("routed by the peer binding")
    wait_until(called.is_set, "the model call of the first message", describe=daemon.log_text)
    daemon.kill()
    gate.set()
    daemon.env["CLAWGATE_BINDINGS"] = "[]"
    await asyncio.to_thread(daemon.start)
    dm = discord_fake.dm_channels[discord_fake.owner_user["id"]]
    discord_fake.wait_for(lambda: "answered after the restart" in _answers(discord_fake, dm), timeout=DEFAULT_TIMEOUT)
    fake_model.enqueue(text("the next one"))
    discord_fake.inject_dm("after the binding was removed")
    discord_fake.wait_for(lambda: "the next one" in _answers(discord_fake, dm), timeout=DEFAULT_TIMEOUT)
    sessions = await _sessions(daemon)
    assert sessions[f"agent:guildbot:discord:{dm}"] == "guildbot"
    assert sessions[f"discord:{dm}"] == "home"
    async with daemon.client() as client:
        routed = await client.request("chat.history", {"session": f"discord:{dm}", "agent": "guildbot"})
        after = await client.request("chat.history", {"session": f"discord:{dm}"})
    assert [(m["role"], m["text"]) for m in routed["messages"]] == [
        ("user", "routed by the peer binding"), ("assistant", "answered after the restart")]
    assert [m["text"] for m in after["messages"]] == ["after the binding was removed", "the next one"]


async def test_gateway_clients_name_their_agent_and_an_unknown_one_is_one_line(
        daemon_factory: Callable[..., DaemonProcess], fake_model: FakeAnthropic) -> None:
    daemon = daemon_factory({"CLAWGATE_AGENTS": json.dumps(AGENTS)})
    async with daemon.client() as client:
        assert (await client.chat("to the guild agent", session="main", agent="guildbot"))["text"] == \
            "echo: to the guild agent"
        assert (await client.chat("to the default", session="main"))["text"] == "echo: to the default"
        history = await client.request("chat.history", {"session": "main", "agent": "guildbot"})
        assert [m["text"] for m in history["messages"] if m["role"] == "user"] == ["to the guild agent"]
        with pytest.raises(Exception) as info:
            await client.request("chat.send", {"session": "main", "agent": "nobody", "text": "hi"})
        job = (await client.request("cron.add", {"message": "nightly report", "every": "1h", "agent": "guildbot"}))["job"]
        assert job["session"] == f"agent:guildbot:cron:{job['id']}"
        await client.request("cron.run", {"id": job["id"]})
        wait_until(lambda: fake_model.requests and "nightly report" in json.dumps(fake_model.requests[-1]["messages"]),
                   "the job's run", describe=daemon.log_text)
        assert (await client.request("tasks.list", {"session": "main", "agent": "guildbot"}))["tasks"] == []
    assert "no agent 'nobody'; this daemon has: home, guildbot" in str(info.value)
    sessions = await _sessions(daemon)
    assert {k: v for k, v in sessions.items() if not k.startswith("agent:guildbot:cron:")} == {
        "agent:guildbot:main": "guildbot", "main": "home"}
    assert sessions[job["session"]] == "guildbot"  # the job ran in its agent's session
