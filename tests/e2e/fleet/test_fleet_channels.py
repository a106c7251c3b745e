"""A chat channel's once-per-bot connection in a fleet: one process holds the Discord Gateway session
(or the Matrix device), the others forward their sends to it, and it moves when its holder is
SIGKILLed. Real daemons, real discord.py against the fake Discord server, a real Synapse with a real
end-to-end encrypting client, a real redis-server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import psutil
import pytest
import redis

from clawgate.agent.fleet.keys import partition_of
from tests.fakes.anthropic_api import FakeAnthropic, text, tool_use
from tests.fakes.discord import payloads as P
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.telegram_api import FakeTelegram
from tests.fleet_support import LEASE_SECONDS, PARTITIONS, Fleet, telegram_env
from tests.harness import DaemonProcess
from tests.email_support import MailWorld, mail_world  # noqa: F401  (fixture)
from tests.email_servers import dovecot, unique_address  # noqa: F401  (fixture)
from tests.fakes.slack_api import APP_TOKEN, BOT_TOKEN, FakeSlack
from tests.fakes.slack_api import workspace as W
from tests.matrix_support import humans, matrix_bot  # noqa: F401  (fixtures)
from tests.slack_support import NO_PROXY, slack  # noqa: F401  (fixture)
from tests.waiting import DEFAULT_TIMEOUT, wait_until

STATUS_PREFIXES = ("⚙️", "⏳")


@pytest.fixture
def discord_fake() -> Iterator[FakeDiscord]:
    with FakeDiscord() as fake:
        yield fake


def one_channel_per_partition(fake: FakeDiscord) -> dict[int, str]:
    """Guild text channels, one whose session (`discord:<id>`) falls in each partition: whichever process
    holds which partitions, some chats' runs happen on a process without the Gateway session."""
    found: dict[int, str] = {}
    while len(found) < PARTITIONS:
        channel_id = P.snowflake()
        n = partition_of(f"discord:{channel_id}", PARTITIONS)
        if n not in found:
            found[n] = channel_id
            fake.channels[channel_id] = P.text_channel(channel_id, f"room-{n}", fake.guild_id, position=n + 1)
    return found


def discord_env(fake: FakeDiscord) -> dict[str, str]:
    values: dict[str, Any] = {"base_url": fake.base_url, "dm_policy": "open", "owner": [fake.owner_user["id"]],
                              "retry_base_seconds": 0.05}
    env = {"CLAWGATE_CHANNELS__DISCORD__TOKEN": fake.token}
    for key, value in values.items():
        env[f"CLAWGATE_CHANNELS__DISCORD__{key.upper()}"] = value if isinstance(value, str) else json.dumps(value)
    return env


def replies(fake: FakeDiscord, channel_id: str) -> list[str]:
    """What the bot said in a channel, minus status lines, ephemeral answers and approval prompts."""
    return [m["content"] for m in fake.sent_messages(channel_id)
            if not m["content"].startswith(STATUS_PREFIXES) and not m["flags"] & 64 and not m["components"]]


def seen(fake: FakeDiscord, rooms: dict[int, str]) -> str:
    return "\n".join(f"p{n} {room}: {replies(fake, room)}" for n, room in rooms.items()) + "\n"


def live_sessions(fake: FakeDiscord) -> int:
    """Gateway sessions with an open connection right now."""
    with fake._cond:
        return sum(1 for s in fake.gateway.sessions.values() if s.valid and s.connection is not None)


async def _status(proc: DaemonProcess) -> dict[str, Any]:
    async with proc.client() as client:
        return await client.request("status")


def status(proc: DaemonProcess) -> dict[str, Any]:
    return asyncio.run(_status(proc))


def lease_holder(fleet: Fleet, r: "redis.Redis") -> str | None:
    keys = list(r.scan_iter(match=f"{fleet.prefix}:lease:s:discord:*"))
    assert len(keys) <= 1, keys  # one bot, one connection lease
    value = r.get(keys[0]) if keys else None
    return value.split("|")[0] if value else None


def spread(fleet_factory, env: dict[str, str], lease_name: str, count: int = 2,
           channel: str | None = None) -> tuple[Fleet, "redis.Redis", DaemonProcess]:
    """`count` processes with the partitions spread over them; returns the one holding the `lease_name`
    singleton, once the others show `channel` on standby (None: a connection with no standby state)."""
    fleet: Fleet = fleet_factory(env)
    for _ in range(count):
        fleet.add()
    r = fleet.spread(count)
    lease = f"{fleet.prefix}:lease:s:{lease_name}:*"
    holder = fleet.by_node(wait_until(lambda: [(r.get(k) or "").split("|")[0] for k in r.scan_iter(match=lease)][0],
                                      f"a {lease_name} lease", describe=fleet.logs))
    for proc in fleet.procs:
        if proc is not holder and channel is not None:
            wait_until(lambda: status(proc)["channelStates"][channel].get("state") == "standby",
                       f"the other process's {channel} on standby", describe=fleet.logs)
    return fleet, r, holder


def start(fleet_factory, fake: FakeDiscord, count: int,
          extra: dict[str, str] | None = None) -> tuple[Fleet, "redis.Redis", DaemonProcess]:
    fleet, r, holder = spread(fleet_factory, {**discord_env(fake), **(extra or {})}, "discord", count, "discord")
    assert lease_holder(fleet, r) == holder.node  # type: ignore[attr-defined]  # one bot, one lease
    wait_until(fake.connected, "the holder's Gateway session", describe=fleet.logs)
    return fleet, r, holder


def test_one_gateway_session_for_the_fleet_and_replies_from_every_process(
        fleet_factory, discord_fake: FakeDiscord) -> None:
    rooms = one_channel_per_partition(discord_fake)
    fleet, r, holder = start(fleet_factory, discord_fake, 2)
    other = next(p for p in fleet.procs if p is not holder)
    state = status(other)["channelStates"]["discord"]
    assert state["state"] == "standby" and state["reason"] == f"connection held by {holder.node}", state  # type: ignore[attr-defined]
    remote = [room for n, room in rooms.items() if fleet.holder(r, n) == other.node]  # type: ignore[attr-defined]
    shown = other.cli("channels")
    assert f"standby (connection held by {holder.node})" in shown.stdout, shown.stdout + shown.stderr  # type: ignore[attr-defined]
    assert remote, "the standby process holds partitions"

    for round_ in range(2):
        for room in rooms.values():
            discord_fake.inject_guild_message(f"{room} r{round_}", channel_id=room, mention_bot=True)
    wait_until(lambda: all(len(replies(discord_fake, room)) >= 2 for room in rooms.values()),
               "two answers in every room", describe=fleet.logs)
    for room in rooms.values():
        assert replies(discord_fake, room) == [f"echo: {room} r0", f"echo: {room} r1"]
    # the standby process ran the turns of its partitions and sent through the holder's connection
    assert status(other)["fleetCalls"]["forwarded"] > 0
    assert "platform calls" in other.cli("status").stdout
    assert status(holder)["fleetCalls"]["served"] > 0
    assert discord_fake.identifies == 1 and live_sessions(discord_fake) == 1
    assert lease_holder(fleet, r) == holder.node  # type: ignore[attr-defined]


def test_an_approval_for_a_run_on_the_standby_process_is_answered_on_the_holder(
        fleet_factory, discord_fake: FakeDiscord, fake_model: FakeAnthropic) -> None:
    rooms = one_channel_per_partition(discord_fake)
    fleet, r, holder = start(fleet_factory, discord_fake, 2)
    other = next(p for p in fleet.procs if p is not holder)
    room = next(room for n, room in rooms.items() if fleet.holder(r, n) == other.node)  # type: ignore[attr-defined]
    fake_model.enqueue(tool_use("exec", {"argv": ["touch", "approved.txt"]}), text("Created approved.txt."))
    discord_fake.inject_guild_message("make a file", channel_id=room, mention_bot=True)
    prompt = discord_fake.wait_for(lambda: next((m for m in discord_fake.sent_messages(room) if m["components"]),
                                                None), timeout=DEFAULT_TIMEOUT)
    assert "touch approved.txt" in prompt["content"] and not (fleet.home / "workspace/approved.txt").exists()
    approve = next(b["custom_id"] for b in prompt["components"][0]["components"] if b["label"] == "Approve")
    # the press reaches the holder's Gateway session; the run waiting for it is on the other process
    discord_fake.press_button(prompt["id"], approve, user_id=discord_fake.owner_user["id"])
    wait_until(lambda: "Created approved.txt." in replies(discord_fake, room), "the approved run's answer",
               describe=fleet.logs)
    assert (fleet.home / "workspace/approved.txt").exists()
    assert any(m["flags"] & 64 and m["content"] == "Approved." for m in discord_fake.sent_messages(room))
    # the run's process edits its prompt (through the holder): the buttons go
    discord_fake.wait_for(lambda: discord_fake._find(prompt["id"])["components"] == [], timeout=DEFAULT_TIMEOUT)
    assert discord_fake.identifies == 1


def test_typing_is_kept_up_by_the_holder_while_the_standby_process_runs_the_turn(
        fleet_factory, discord_fake: FakeDiscord, fake_model: FakeAnthropic) -> None:
    rooms = one_channel_per_partition(discord_fake)
    fleet, r, holder = start(fleet_factory, discord_fake, 2, {"CLAWGATE_CHANNELS__DISCORD__TYPING_INTERVAL_SECONDS": "0.3"})
    room = next(room for n, room in rooms.items() if fleet.holder(r, n) != holder.node)  # type: ignore[attr-defined]
    fake_model.enqueue(text("Thought it over.", delay=3.0))
    discord_fake.inject_guild_message("think it over", channel_id=room, mention_bot=True)
    wait_until(lambda: "Thought it over." in replies(discord_fake, room), "the slow turn's answer", describe=fleet.logs)
    typed = discord_fake.requests("POST", f"/channels/{room}/typing")
    # the holder took the message in and typed every 0.3 s while the other process ran the 3 s turn
    # (without knowing the fleet's open messages it typed once: its own process was not busy)
    assert len(typed) >= 4, [c.path for c in typed]


def test_killing_the_connections_holder_moves_it_and_every_message_is_answered_once(
        fleet_factory, discord_fake: FakeDiscord) -> None:
    rooms = one_channel_per_partition(discord_fake)
    fleet, r, holder = start(fleet_factory, discord_fake, 3)
    for room in rooms.values():
        discord_fake.inject_guild_message(f"{room} before", channel_id=room, mention_bot=True)
    wait_until(lambda: all(replies(discord_fake, room) for room in rooms.values()), "an answer in every room",
               describe=fleet.logs)
    holder.kill()
    for room in rooms.values():  # while no process holds the connection: read back by the next holder
        discord_fake.inject_guild_message(f"{room} during", channel_id=room, mention_bot=True)
    wait_until(lambda: lease_holder(fleet, r) not in (None, holder.node),  # type: ignore[attr-defined]
               "another process holding the connection lease", timeout=LEASE_SECONDS + 30, describe=fleet.logs)
    wait_until(lambda: discord_fake.identifies == 2 and live_sessions(discord_fake) == 1,
               "the new holder's Gateway session", timeout=LEASE_SECONDS + 30, describe=fleet.logs)
    for room in rooms.values():
        discord_fake.inject_guild_message(f"{room} after", channel_id=room, mention_bot=True)
    wait_until(lambda: all(len(replies(discord_fake, room)) >= 3 for room in rooms.values()),
               "three answers in every room",
               describe=lambda: seen(discord_fake, rooms) + fleet.logs())
    for room in rooms.values():
        assert replies(discord_fake, room) == [f"echo: {room} {when}" for when in ("before", "during", "after")]
    assert discord_fake.identifies == 2 and live_sessions(discord_fake) == 1
    survivors = [p for p in fleet.procs if p is not holder]
    new_holder = fleet.by_node(lease_holder(fleet, r) or "")
    standby = next(p for p in survivors if p is not new_holder)
    assert status(standby)["channelStates"]["discord"]["reason"] == f"connection held by {new_holder.node}"  # type: ignore[attr-defined]


def test_matrix_one_device_syncs_and_a_run_on_the_standby_process_answers_encrypted(
        fleet_factory, matrix_bot, humans, tmp_path) -> None:
    alice = humans("alice", store=tmp_path / "alice-keys")  # an E2E client, as Element is
    fleet, r, holder = spread(fleet_factory, matrix_bot.env(dm_policy="open"), "matrix", channel="matrix")
    other = next(p for p in fleet.procs if p is not holder)
    lease = f"{fleet.prefix}:lease:s:matrix:*"
    bot = matrix_bot.user.user_id
    # an encrypted DM whose session the standby process runs (rooms are made until one falls in its partitions)
    room = next(room for room in (alice.encrypted_dm(bot) for _ in range(12))
                if fleet.holder(r, partition_of(f"matrix:{room}", PARTITIONS)) == other.node)  # type: ignore[attr-defined]
    alice.wait(lambda: bot in alice.members(room), "the bot to join the encrypted DM", describe=fleet.logs)
    alice.send(room, "a secret question")
    answers = alice.wait(lambda: [e for e in alice.seen(room, bot) if e.body == "echo: a secret question"],
                         "the encrypted answer", describe=fleet.logs)
    assert answers[0].encrypted  # sent by the holder's device, readable by alice's client
    assert status(other)["fleetCalls"]["forwarded"] > 0 and status(holder)["fleetCalls"]["served"] > 0
    assert status(other)["channelStates"]["matrix"]["reason"] == f"connection held by {holder.node}"  # type: ignore[attr-defined]
    assert "matrix: joined" in holder.log_text() and "matrix: joined" not in other.log_text()  # only it syncs
    assert len([d for d in matrix_bot.devices() if d.get("display_name") == "clawgate"]) == 1  # one device syncs
    assert len(list(r.scan_iter(match=lease))) == 1


def test_slack_one_socket_for_the_fleet_and_threads_answered_from_every_process(
        fleet_factory, slack: FakeSlack) -> None:
    values: dict[str, Any] = {"enabled": True, "bot_token": BOT_TOKEN, "app_token": APP_TOKEN,
                              "base_url": slack.api_url, "owner": [W.OWNER_ID], "retry_base_seconds": 0.05}
    env = {**NO_PROXY, **{f"CLAWGATE_CHANNELS__SLACK__{k.upper()}": v if isinstance(v, str) else json.dumps(v)
                          for k, v in values.items()}}
    fleet, r, holder = spread(fleet_factory, env, "slack", channel="slack")
    other = next(p for p in fleet.procs if p is not holder)
    slack.wait_for(lambda f: f.socket.open_connections(), timeout=DEFAULT_TIMEOUT)
    # mentions in #general, each its own thread (its own session), until one is run by the standby process
    threads: list[tuple[int, str]] = []
    for i in range(24):
        ts = str(slack.send_mention(f"question {i}").payload["event"]["ts"])
        threads.append((i, ts))
        if fleet.holder(r, partition_of(f"slack:{W.GENERAL}:{ts}", PARTITIONS)) == other.node:  # type: ignore[attr-defined]
            break
    else:
        raise AssertionError("no thread fell in the standby process's partitions")

    def answers(ts: str) -> list[str]:
        return [m["text"] for m in slack.posted(W.GENERAL)
                if m.get("thread_ts") == ts and not m["text"].startswith(STATUS_PREFIXES)]

    wait_until(lambda: all(answers(ts) for _, ts in threads), "an answer in every thread", describe=fleet.logs)
    for i, ts in threads:
        assert answers(ts) == [f"echo: question {i}"]
    assert status(other)["fleetCalls"]["forwarded"] > 0
    assert len(slack.socket.open_connections()) == 1
    assert len([c for c in slack.calls_to("apps.connections.open") if c.ok]) == 1  # one socket ever opened


def imap_connections(proc: DaemonProcess, port: int) -> int:
    """The process's open TCP connections to the IMAP server."""
    assert proc.proc is not None
    return sum(1 for c in psutil.Process(proc.proc.pid).net_connections(kind="tcp")
               if c.raddr and c.raddr.port == port and c.status == psutil.CONN_ESTABLISHED)


def test_email_one_imap_login_for_the_fleet_and_mail_run_on_the_standby_process_is_answered(
        fleet_factory, mail_world: MailWorld) -> None:
    world = mail_world
    values: dict[str, Any] = {
        "address": world.bot, "password": world.dovecot.passwords[world.bot], "imap_host": "127.0.0.1",
        "imap_port": world.dovecot.port, "imap_tls": "none", "smtp_port": world.smtp.port, "smtp_tls": "none",
        "owner": [world.owner], "dm_policy": "open", "retry_base_seconds": 0.05, "progress": False, "idle_seconds": 5}
    env = {f"CLAWGATE_CHANNELS__EMAIL__{k.upper()}": v if isinstance(v, str) else json.dumps(v) for k, v in values.items()}
    fleet, r, holder = spread(fleet_factory, env, "email", channel="email")
    other = next(p for p in fleet.procs if p is not holder)
    wait_until(lambda: "email: first start" in holder.log_text(), "the holder's first IMAP start", describe=fleet.logs)
    # a sender whose chat the standby process runs
    sender = next(a for a in (unique_address("person") for _ in range(200))
                  if fleet.holder(r, partition_of(f"email:{a}", PARTITIONS)) == other.node)  # type: ignore[attr-defined]
    world.mail(sender, "a question by mail", subject="Question")
    (reply,) = world.wait_replies(sender, 1)
    assert world.texts(sender) == ["echo: a question by mail"] and reply["Subject"] == "Re: Question"
    assert status(other)["fleetCalls"]["forwarded"] > 0
    assert imap_connections(holder, world.dovecot.port) >= 1 and imap_connections(other, world.dovecot.port) == 0
    assert "email: first start" not in other.log_text()  # it never opened the mailbox


def test_telegram_a_button_pressed_on_the_pollers_process_approves_a_run_on_another(
        fleet_factory, telegram: FakeTelegram, fake_model: FakeAnthropic) -> None:
    owners = list(range(8100, 8140))  # owners' chats; one whose session another process runs is used
    fleet, r, poller_proc = spread(fleet_factory, telegram_env(telegram, owner=[str(o) for o in owners]), "telegram-poller")
    poller = poller_proc.node  # type: ignore[attr-defined]
    chat = next(c for c in owners if fleet.holder(r, partition_of(f"telegram:{c}", PARTITIONS)) not in (None, poller))
    fake_model.enqueue(tool_use("exec", {"argv": ["touch", "approved.txt"]}), text("Created approved.txt."))
    telegram.inject_message(chat, "make a file")
    prompt = wait_until(lambda: next((m for m in telegram.sent if m.get("reply_markup")), None), "the approval prompt",
                        describe=fleet.logs)
    assert prompt["chat_id"] == chat and not (fleet.home / "workspace/approved.txt").exists()
    data = prompt["reply_markup"]["inline_keyboard"][0][0]["callback_data"]
    telegram.inject_callback(chat, chat, data, prompt["message_id"])  # read by the poller's process
    wait_until(lambda: "Created approved.txt." in telegram.messages_to(chat), "the approved run's answer",
               describe=fleet.logs)
    assert (fleet.home / "workspace/approved.txt").exists()
    assert [a["text"] for a in telegram.callback_answers] == ["Approved."]
