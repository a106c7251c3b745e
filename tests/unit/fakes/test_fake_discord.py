"""The fake Discord server (tests/fakes/discord) against the real, unmodified discord.py.

No clawgate code is involved: these tests show that the fake speaks the protocol discord.py
speaks (login, Gateway session, RESUME, interactions, rate limits) and refuses what Discord
refuses, so the Discord adapter's tests can trust it.
"""

from __future__ import annotations

import asyncio
import io
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import discord
import pytest
import yarl
from discord import app_commands

from tests.fakes.discord_api import INTENT_MESSAGE_CONTENT, FakeDiscord


class Bot:
    """A ``discord.Client`` run against the fake, with what it saw kept for the test."""

    def __init__(self, fake: FakeDiscord, intents: discord.Intents | None = None) -> None:
        if intents is None:
            intents = discord.Intents.default()
            intents.message_content = True
        self.fake = fake
        self.client = discord.Client(intents=intents, guild_ready_timeout=0.05)
        self.tree = app_commands.CommandTree(self.client)
        self.messages: list[discord.Message] = []
        self.resumed = 0
        self.readies = 0
        self.changed = asyncio.Condition()
        self.task: asyncio.Task[None] | None = None

        @self.client.event
        async def on_ready() -> None:
            self.readies += 1
            await self._notify()

        @self.client.event
        async def on_resumed() -> None:
            self.resumed += 1
            await self._notify()

        @self.client.event
        async def on_message(message: discord.Message) -> None:
            self.messages.append(message)
            await self._notify()

    async def _notify(self) -> None:
        async with self.changed:
            self.changed.notify_all()

    async def until(self, predicate: Callable[[], Any], timeout: float = 10.0) -> Any:
        """Wait (on the client's own events, no polling) until ``predicate()`` is truthy."""

        async def wait() -> None:
            async with self.changed:
                await self.changed.wait_for(predicate)

        await asyncio.wait_for(wait(), timeout)
        return predicate()

    async def start(self, token: str | None = None) -> None:
        self.task = asyncio.create_task(self.client.start(token or self.fake.token))
        ready = asyncio.create_task(self.until(lambda: self.readies >= 1))
        done, _ = await asyncio.wait({self.task, ready}, timeout=15, return_when=asyncio.FIRST_COMPLETED)
        if self.task in done:
            ready.cancel()
            self.task.result()  # raises what the client failed with
        assert ready in done, "no on_ready within 15 s"

    def from_others(self) -> list[discord.Message]:
        return [m for m in self.messages if m.author.id != self.client.user.id]  # type: ignore[union-attr]

    async def close(self) -> None:
        await self.client.close()
        if self.task is not None:
            try:
                await asyncio.wait_for(self.task, 10)
            except Exception:  # noqa: BLE001 - a failed client already failed its test
                pass


@pytest.fixture
def fake() -> Any:
    with FakeDiscord(heartbeat_interval_ms=41250) as server, server.discord_py_pointed_here():
        yield server


@pytest.fixture
async def bot(fake: FakeDiscord) -> AsyncIterator[Bot]:
    started = Bot(fake)
    await started.start()
    yield started
    await started.close()


async def test_login_identify_ready_and_heartbeat(fake: FakeDiscord, bot: Bot) -> None:
    client = bot.client
    assert client.user is not None and str(client.user.id) == fake.bot_user["id"]
    assert [g.name for g in client.guilds] == ["clawgate-test"]
    general = client.get_channel(int(fake.channel_id))
    assert isinstance(general, discord.TextChannel) and general.name == "general"

    # Login asked who it is and which application, with the bot token.
    paths = [(c.method, c.path) for c in fake.calls]
    assert ("GET", "/users/@me") in paths and ("GET", "/oauth2/applications/@me") in paths
    assert all(c.headers["Authorization"] == f"Bot {fake.token}" for c in fake.calls)

    identify = fake.received_frames(op=2)
    assert len(identify) == 1
    assert identify[0]["d"]["token"] == fake.token
    assert identify[0]["d"]["intents"] == client.intents.value
    assert client.intents.value & INTENT_MESSAGE_CONTENT
    conn = fake.gateway.connections[0]
    assert conn.query["v"] == "10" and conn.query["encoding"] == "json"
    assert conn.compress in ("zlib-stream", "zstd-stream"), "discord.py asks for transport compression"

    # discord.py heartbeats right after HELLO; every heartbeat is acknowledged.
    await fake.wait_for_async(lambda: fake.received_frames(op=1))
    await fake.wait_for_async(lambda: [f for f in fake.frames if f.direction == "out" and f.op == 11])
    assert [f["t"] for f in fake.dispatched()][:2] == ["READY", "GUILD_CREATE"]
    assert [f["s"] for f in fake.dispatched()][:2] == [1, 2]


async def test_wrong_token_is_refused_at_login(fake: FakeDiscord) -> None:
    client = discord.Client(intents=discord.Intents.default())
    with pytest.raises(discord.LoginFailure):
        await client.login("not-the-token")
    await client.close()
    refused = fake.requests("GET", "/users/@me")
    assert refused and refused[-1].status == 401


async def test_rest_refuses_missing_auth_and_unknown_channel(fake: FakeDiscord) -> None:
    async with aiohttp.ClientSession() as http:
        url = f"{fake.api_url}/channels/{fake.channel_id}/messages"
        async with http.post(url, json={"content": "hi"}) as resp:
            assert resp.status == 401
        headers = {"Authorization": f"Bot {fake.token}"}
        async with http.post(f"{fake.api_url}/channels/123/messages", json={"content": "hi"}, headers=headers) as resp:
            assert resp.status == 404 and (await resp.json())["code"] == 10003
        async with http.post(url, json={"content": "  "}, headers=headers) as resp:
            assert resp.status == 400 and (await resp.json())["code"] == 50006
    assert fake.sent_messages(fake.channel_id) == []


async def test_dm_and_guild_messages_reach_on_message(fake: FakeDiscord, bot: Bot) -> None:
    fake.inject_dm("hello in private", attachments=[("notes.txt", b"file body", "text/plain")])
    fake.inject_guild_message("hello everyone")
    fake.inject_guild_message("are you there?", mention_bot=True)
    messages = await bot.until(lambda: len(bot.from_others()) >= 3 and bot.from_others())

    dm, plain, mention = messages
    me = bot.client.user
    assert isinstance(dm.channel, discord.DMChannel) and dm.guild is None
    assert dm.content == "hello in private" and str(dm.author.id) == fake.owner_user["id"]
    assert await dm.attachments[0].read() == b"file body"  # fetched from the fake's CDN

    assert isinstance(plain.channel, discord.TextChannel) and plain.guild is not None
    assert plain.content == "hello everyone" and not me.mentioned_in(plain)
    assert me.mentioned_in(mention) and mention.content.endswith("are you there?")


async def test_without_message_content_intent_guild_text_is_withheld(fake: FakeDiscord) -> None:
    intents = discord.Intents.default()
    intents.message_content = False
    bot = Bot(fake, intents)
    await bot.start()
    try:
        fake.inject_guild_message("secret words")
        fake.inject_guild_message("hey bot", mention_bot=True)
        fake.inject_dm("dm text")
        plain, mention, dm = await bot.until(lambda: len(bot.from_others()) >= 3 and bot.from_others())
        assert plain.content == ""
        assert mention.content.endswith("hey bot") and dm.content == "dm text"
    finally:
        await bot.close()


async def test_privileged_intent_not_granted_is_refused(fake: FakeDiscord) -> None:
    intents = discord.Intents.default()
    intents.members = True  # GUILD_MEMBERS is privileged and not switched on for the fake application
    bot = Bot(fake, intents)
    with pytest.raises(discord.PrivilegedIntentsRequired):
        await bot.start()
    await bot.close()


async def test_reply_with_file_and_typing_are_recorded(fake: FakeDiscord, bot: Bot) -> None:
    fake.inject_guild_message("send me the report", mention_bot=True)
    (incoming,) = await bot.until(lambda: bot.from_others())
    async with incoming.channel.typing():
        pass
    sent = await incoming.reply("here it is", file=discord.File(io.BytesIO(b"%PDF-1.7 fake"), "report.pdf"))

    (stored,) = fake.sent_messages(fake.channel_id)
    assert stored["id"] == str(sent.id) and stored["content"] == "here it is"
    assert stored["message_reference"]["message_id"] == str(incoming.id)
    assert stored["referenced_message"]["content"] == incoming.content
    with pytest.raises(discord.HTTPException) as raised:  # a reply to a message that is not there
        await incoming.channel.send("lost", reference=discord.MessageReference(
            message_id=1, channel_id=incoming.channel.id, fail_if_not_exists=True))
    assert raised.value.code == 50035 and "message_reference" in raised.value.text
    upload = fake.requests("POST", f"/channels/{fake.channel_id}/messages")[0]
    assert upload.files[0].filename == "report.pdf" and upload.files[0].data == b"%PDF-1.7 fake"
    assert await sent.attachments[0].read() == b"%PDF-1.7 fake"
    assert fake.requests("POST", f"/channels/{fake.channel_id}/typing")

    edited = await sent.edit(content="here it is (v2)")
    assert edited.content == "here it is (v2)" and fake.sent_texts(fake.channel_id) == ["here it is (v2)"]
    await sent.delete()
    assert fake.sent_messages(fake.channel_id) == []


async def test_content_over_2000_characters_is_refused(fake: FakeDiscord, bot: Bot) -> None:
    channel = bot.client.get_channel(int(fake.channel_id))
    assert isinstance(channel, discord.TextChannel)
    await channel.send("x" * 2000)  # the limit itself is fine
    await channel.send("\U0001f600" * 2000)  # counted in code points, not UTF-16 units or bytes
    with pytest.raises(discord.HTTPException) as raised:
        await channel.send("x" * 2001)
    assert raised.value.status == 400 and raised.value.code == 50035
    assert "content" in raised.value.text and "2000" in raised.value.text
    assert [len(t) for t in fake.sent_texts(fake.channel_id)] == [2000, 2000]


async def test_rate_limit_is_waited_out_and_retried(fake: FakeDiscord, bot: Bot) -> None:
    channel = bot.client.get_channel(int(fake.channel_id))
    assert isinstance(channel, discord.TextChannel)
    fake.rate_limit(r"/channels/\d+/messages", method="POST", retry_after=0.6)
    started = time.monotonic()
    await channel.send("after the wait")
    took = time.monotonic() - started

    attempts = fake.requests("POST", f"/channels/{fake.channel_id}/messages")
    assert [a.status for a in attempts] == [429, 200]
    assert attempts[1].at - attempts[0].at >= 0.6 and took >= 0.6
    assert fake.sent_texts(fake.channel_id) == ["after the wait"]


async def test_forced_reconnect_resumes_without_losing_events(fake: FakeDiscord, bot: Bot) -> None:
    fake.inject_dm("before")
    await bot.until(lambda: len(bot.from_others()) == 1)
    ready = fake.dispatched("READY")[0]["d"]

    assert fake.force_reconnect() == 1
    # These go out right after op 7, on a socket discord.py no longer reads, or while it is away.
    fake.inject_dm("during 1")
    fake.inject_dm("during 2")
    await bot.until(lambda: bot.resumed >= 1 and len(bot.from_others()) >= 3)
    fake.inject_dm("after")
    await bot.until(lambda: len(bot.from_others()) >= 4)

    assert [m.content for m in bot.from_others()] == ["before", "during 1", "during 2", "after"]
    (resume,) = fake.received_frames(op=6)
    assert resume["d"]["session_id"] == ready["session_id"] and resume["d"]["token"] == fake.token
    assert fake.identifies == 1 and fake.resumes == 1
    assert fake.gateway.connections[1].path == "/resume-gateway"  # READY's resume_gateway_url
    sequences = [f["s"] for f in fake.dispatched()]
    assert sorted(set(sequences)) == list(range(1, max(sequences) + 1))  # replays reuse their numbers


async def test_resume_of_an_expired_session_is_invalidated_and_identifies_again(fake: FakeDiscord, bot: Bot) -> None:
    fake.expire_sessions()
    fake.drop_connections(4000)  # a resumable close: discord.py tries RESUME
    await bot.until(lambda: bot.readies >= 2)
    assert len(fake.received_frames(op=6)) == 1
    assert [f for f in fake.frames if f.direction == "out" and f.op == 9 and f.payload["d"] is False]
    assert fake.identifies == 2
    fake.inject_dm("still here?")
    await bot.until(lambda: [m for m in bot.from_others() if m.content == "still here?"])


class Approval(discord.ui.View):
    def __init__(self, bot: Bot, delay: float) -> None:
        super().__init__(timeout=None)
        self.bot = bot
        self.delay = delay
        self.errors: list[Exception] = []

    @discord.ui.button(label="Approve", style=discord.ButtonStyle.success, custom_id="approve:42")
    async def approve(self, interaction: discord.Interaction, button: discord.ui.Button) -> None:
        await asyncio.sleep(self.delay)
        try:
            await interaction.response.send_message("approved")
        except discord.HTTPException as exc:
            self.errors.append(exc)
            await self.bot._notify()


@pytest.mark.parametrize("delay, in_time", [(0.0, True), (3.3, False)])
async def test_button_press_answered_in_time_or_refused_late(fake: FakeDiscord, bot: Bot, delay: float,
                                                             in_time: bool) -> None:
    channel = bot.client.get_channel(int(fake.channel_id))
    assert isinstance(channel, discord.TextChannel)
    view = Approval(bot, delay)
    prompt = await channel.send("run rm -rf build/?", view=view)
    stored = fake.sent_messages(fake.channel_id)[0]
    assert stored["components"][0]["components"][0]["custom_id"] == "approve:42"

    pressed = fake.press_button(prompt.id, "approve:42", user_id=fake.owner_user["id"])
    interaction = fake.interaction(pressed["id"])
    if in_time:
        await fake.wait_for_async(lambda: interaction.response is not None)
        assert interaction.response_type == 4 and interaction.responded_after < 3.0
        assert fake.sent_texts(fake.channel_id) == ["run rm -rf build/?", "approved"]
    else:
        await bot.until(lambda: view.errors, timeout=10)
        assert interaction.response is None and interaction.refused[0][1]["code"] == 10062
        assert isinstance(view.errors[0], discord.NotFound) and view.errors[0].code == 10062
        assert fake.sent_texts(fake.channel_id) == ["run rm -rf build/?"]


async def test_application_commands_registered_and_invoked(fake: FakeDiscord, bot: Bot) -> None:
    ran: list[str] = []

    @bot.tree.command(name="status", description="Show what the agent is doing")
    async def status(interaction: discord.Interaction) -> None:
        ran.append("status")
        await interaction.response.send_message("idle")

    @bot.tree.command(name="new", description="Start a new session")
    async def new(interaction: discord.Interaction) -> None:
        await interaction.response.defer()
        await interaction.followup.send("new session started")

    synced = await bot.tree.sync()
    assert sorted(c.name for c in synced) == ["new", "status"]
    put = fake.requests("PUT", f"/applications/{fake.application_id}/commands")
    assert put and put[-1].status == 200
    assert sorted(c["name"] for c in fake.commands[None]) == ["new", "status"]

    first = fake.run_command("status", channel_id=fake.channel_id)
    await fake.wait_for_async(lambda: fake.interaction(first["id"]).response is not None)
    assert ran == ["status"] and fake.sent_texts(fake.channel_id) == ["idle"]

    second = fake.run_command("new", channel_id=fake.channel_id)
    await fake.wait_for_async(lambda: "new session started" in fake.sent_texts(fake.channel_id))
    assert fake.interaction(second["id"]).response_type == 5

    with pytest.raises(KeyError):
        fake.run_command("tasks", channel_id=fake.channel_id)  # never registered


async def test_invalid_command_names_are_refused(fake: FakeDiscord, bot: Bot) -> None:
    payload = [{"name": "Status", "description": "upper case is not allowed", "type": 1}]
    with pytest.raises(discord.HTTPException) as raised:
        await bot.client.http.bulk_upsert_global_commands(bot.client.application_id, payload)
    assert raised.value.code == 50035


async def test_sharded_client_finds_the_gateway_through_gateway_bot(fake: FakeDiscord,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # A dead default Gateway: the sharded client must take the URL GET /gateway/bot gives.
    monkeypatch.setattr(discord.gateway.DiscordWebSocket, "DEFAULT_GATEWAY", yarl.URL("ws://127.0.0.1:9/"))
    client = discord.AutoShardedClient(intents=discord.Intents.default(), guild_ready_timeout=0.05)
    ready = asyncio.Event()
    client.event(_setter("on_ready", ready))
    task = asyncio.create_task(client.start(fake.token))
    try:
        await asyncio.wait_for(ready.wait(), 15)
        assert fake.requests("GET", "/gateway/bot")[0].status == 200
        (identify,) = fake.received_frames(op=2)
        assert identify["d"]["shard"] == [0, 1]
        assert fake.dispatched("READY")[0]["d"]["shard"] == [0, 1]
    finally:
        await client.close()
        await asyncio.wait_for(task, 10)


def _setter(name: str, event: asyncio.Event) -> Callable[[], Any]:
    async def handler() -> None:
        event.set()

    handler.__name__ = name
    return handler


async def test_channel_lookup_and_original_response_edit(fake: FakeDiscord, bot: Bot) -> None:
    channel = await bot.client.fetch_channel(int(fake.channel_id))
    assert isinstance(channel, discord.TextChannel) and channel.name == "general"
    with pytest.raises(discord.NotFound) as raised:
        await bot.client.fetch_channel(123)
    assert raised.value.code == 10003

    @bot.tree.command(name="tasks", description="List running tasks")
    async def tasks(interaction: discord.Interaction) -> None:
        await interaction.response.send_message("checking…")
        await interaction.edit_original_response(content="no tasks running")

    await bot.tree.sync()
    fake.run_command("tasks", channel_id=fake.channel_id)
    (edit,) = await fake.wait_for_async(
        lambda: [c for c in fake.requests("PATCH", f"/webhooks/{fake.application_id}/") if c.status == 200])
    assert edit.path.endswith("/messages/@original")
    assert fake.sent_texts(fake.channel_id) == ["no tasks running"]


async def test_redelivered_message_keeps_its_id_and_gets_a_new_sequence(fake: FakeDiscord, bot: Bot) -> None:
    original = fake.inject_dm("do the thing")
    fake.redeliver(original)
    first, again = await bot.until(lambda: len(bot.from_others()) >= 2 and bot.from_others())
    assert first.id == again.id == int(original["id"])
    creates = [f for f in fake.dispatched("MESSAGE_CREATE") if f["d"]["id"] == original["id"]]
    assert len(creates) == 2 and creates[0]["s"] < creates[1]["s"]


async def test_ephemeral_answer_is_kept_but_not_dispatched(fake: FakeDiscord, bot: Bot) -> None:
    @bot.tree.command(name="stop", description="Stop the running task")
    async def stop(interaction: discord.Interaction) -> None:
        await interaction.response.send_message("stopped", ephemeral=True)

    await bot.tree.sync()
    fake.run_command("stop", channel_id=fake.channel_id)
    (answer,) = await fake.wait_for_async(lambda: fake.sent_messages(fake.channel_id))
    assert answer["content"] == "stopped" and answer["flags"] & 64
    assert not [f for f in fake.dispatched("MESSAGE_CREATE") if f["d"]["id"] == answer["id"]]


async def test_button_and_command_in_a_dm(fake: FakeDiscord, bot: Bot) -> None:
    @bot.tree.command(name="new", description="Start a new session")
    async def new(interaction: discord.Interaction) -> None:
        assert isinstance(interaction.channel, discord.DMChannel) and interaction.guild is None
        await interaction.response.send_message(f"new session for {interaction.user.name}")

    await bot.tree.sync()
    owner = await bot.client.fetch_user(int(fake.owner_user["id"]))
    view = Approval(bot, 0.0)
    prompt = await owner.send("approve the cron job?", view=view)  # opens the DM over REST first
    dm_id = fake.dm_channels[fake.owner_user["id"]]
    assert prompt.channel.id == int(dm_id)

    pressed = fake.press_button(prompt.id, "approve:42")
    await fake.wait_for_async(lambda: fake.interaction(pressed["id"]).response is not None)
    fake.run_command("new", channel_id=dm_id)
    await fake.wait_for_async(lambda: len(fake.sent_messages(dm_id)) == 3)
    assert fake.sent_texts(dm_id) == ["approve the cron job?", "approved", "new session for alice"]


async def test_message_in_a_thread_is_answered_in_the_thread(fake: FakeDiscord, bot: Bot) -> None:
    fake.inject_guild_message("status of the build?", channel_id=fake.thread_id, mention_bot=True)
    (incoming,) = await bot.until(lambda: bot.from_others())
    assert isinstance(incoming.channel, discord.Thread)
    assert incoming.channel.parent_id == int(fake.channel_id)
    await incoming.channel.send("still building")
    assert fake.sent_texts(fake.thread_id) == ["still building"]
    assert fake.sent_texts(fake.channel_id) == []


async def test_blocked_client_stops_heartbeating_is_closed_and_resumes() -> None:
    with FakeDiscord(heartbeat_interval_ms=400) as fake, fake.discord_py_pointed_here():
        bot = Bot(fake)
        await bot.start()
        try:
            # discord.py heartbeats on its own thread every 0.4 s, each acknowledged.
            await fake.wait_for_async(lambda: len(fake.received_frames(op=1)) >= 3, timeout=5)
            fake.inject_dm("before the stall")
            await bot.until(lambda: bot.from_others())
            time.sleep(1.5)  # deliberately block the client's event loop: its heartbeats cannot go out
            fake.inject_dm("during the stall")
            await bot.until(lambda: bot.resumed >= 1 and len(bot.from_others()) >= 2)
            assert fake.gateway.connections[0].close_code == 4009
            assert [m.content for m in bot.from_others()] == ["before the stall", "during the stall"]
            assert fake.identifies == 1 and fake.resumes >= 1
        finally:
            await bot.close()


async def test_outage_and_restart_on_the_same_port(fake: FakeDiscord, bot: Bot) -> None:
    port = fake.port
    await asyncio.to_thread(fake.stop)
    assert bot.client.is_closed() is False
    await asyncio.to_thread(fake.start)
    assert fake.port == port
    # discord.py comes back by itself: its RESUME finds the session gone (op 9), so it IDENTIFYs.
    await bot.until(lambda: bot.readies >= 2, timeout=30)
    assert fake.identifies == 2
    fake.inject_dm("back again")
    await bot.until(lambda: [m for m in bot.from_others() if m.content == "back again"])


@pytest.mark.parametrize("frame, code", [
    ({"op": 3, "d": {"status": "online", "since": 0, "activities": [], "afk": False}}, 4003),  # before IDENTIFY
    ({"op": 2, "d": {"token": "wrong", "intents": 513, "properties": {}}}, 4004),
    ({"op": 2, "d": {"token": None, "intents": 1 << 30, "properties": {}}}, 4013),
    ({"op": 99, "d": None}, 4001),
])
async def test_gateway_closes_what_discord_closes(fake: FakeDiscord, frame: dict[str, Any], code: int) -> None:
    if frame["op"] == 2 and frame["d"]["token"] is None:
        frame["d"]["token"] = fake.token
    async with aiohttp.ClientSession() as http:
        async with http.ws_connect(f"{fake.ws_url}/?v=10&encoding=json") as ws:
            hello = await ws.receive_json(timeout=5)
            assert hello["op"] == 10 and hello["d"]["heartbeat_interval"] == 41250
            await ws.send_json(frame)
            closed = await ws.receive(timeout=5)
            assert closed.type is aiohttp.WSMsgType.CLOSE and closed.data == code


async def test_history_after_and_before_as_discord_pages_it(fake: FakeDiscord, bot: Bot) -> None:
    written = [fake.inject_guild_message(f"m{i}") for i in range(5)]
    await bot.until(lambda: len(bot.from_others()) == 5)
    channel = bot.client.get_channel(int(fake.channel_id))
    assert isinstance(channel, discord.TextChannel)
    after = [m.content async for m in channel.history(after=discord.Object(id=int(written[1]["id"])),
                                                        oldest_first=True, limit=2)]
    assert after == ["m2", "m3"]
    newest = [m.content async for m in channel.history(limit=3)]
    assert newest == ["m4", "m3", "m2"]
    with pytest.raises(discord.HTTPException) as raised:
        await bot.client.http.logs_from(fake.channel_id, 101)
    assert raised.value.code == 50035
