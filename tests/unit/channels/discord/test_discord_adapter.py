"""The Discord adapter with the real discord.py against the fake Discord server: in, out, errors."""

from __future__ import annotations

import asyncio

import pytest

from clawgate.channels.discord.adapter import INTENT_FIX, DiscordAdapter, approval_custom_id, intents
from clawgate.channels.kit import ChannelAuthError, ChannelUnavailable, DeliveryError, Target
from tests.fakes.discord_api import INTENT_MESSAGE_CONTENT, FakeDiscord
from tests.unit.channels.discord.conftest import OWNER_LINE, REFUSED_LINE, RecordingKit, settings_for
from tests.waiting import wait_until_async

Connected = tuple[DiscordAdapter, RecordingKit]


async def next_incoming(kit: RecordingKit, count: int) -> None:
    await wait_until_async(lambda: len(kit.incoming) >= count, f"{count} message(s) handed to the kit")


async def test_identify_asks_for_message_content_dms_and_guilds(fake: FakeDiscord, connected: Connected) -> None:
    identify = fake.received_frames(op=2)
    assert len(identify) == 1 and identify[0]["d"]["intents"] == intents().value
    assert intents().message_content and intents().dm_messages and intents().guild_messages and intents().guilds
    adapter, kit = connected
    assert adapter.status() == {"bot": "clawgate-bot"} and kit.bot_name == "clawgate-bot"


async def test_dm_guild_mention_role_mention_reply_and_thread(fake: FakeDiscord, connected: Connected) -> None:
    adapter, kit = connected
    dm = fake.inject_dm("hello there")
    fake.inject_guild_message("chatter, not for the bot")
    fake.inject_guild_message("what's up?", mention_bot=True)
    fake.inject_guild_message("and you?", mention_role=True)
    await next_incoming(kit, 4)
    bot_said = await adapter.send_text(Target(chat_id=fake.channel_id), "I am here")
    fake.inject_guild_message("thanks", reply_to=fake._find(bot_said))
    fake.inject_guild_message("in the thread", channel_id=fake.thread_id, mention_bot=True)
    await next_incoming(kit, 6)

    private, chatter, mention, role, reply, threaded = kit.incoming
    assert private.private and private.addressed and private.text == "hello there"
    assert private.message_id == dm["id"] and private.chat_id == fake.dm_channels[fake.owner_user["id"]]
    assert private.sender.user_id == fake.owner_user["id"] and private.sender.username == "alice"
    assert not chatter.private and not chatter.addressed and chatter.text == "chatter, not for the bot"
    assert mention.addressed and mention.text == "what's up?"  # the mention itself is gone
    assert role.addressed and role.text == "and you?"
    assert reply.addressed and reply.text == "thanks"
    assert threaded.addressed and threaded.chat_id == fake.channel_id and threaded.thread_id == fake.thread_id
    assert all(i.metadata.get("guild_id") == fake.guild_id for i in (chatter, mention, role, reply, threaded))


async def test_a_part_sent_again_with_its_send_key_is_one_message(fake: FakeDiscord, connected: Connected) -> None:
    """A reply part sent again after a crash carries the same send_key: as an enforced nonce, Discord
    returns the message it made instead of a second one. Without a key every send is a message."""
    adapter, _ = connected
    again = Target(chat_id=fake.channel_id, send_key="reply-1:0")
    first = await adapter.send_text(again, "once")
    assert await adapter.send_text(again, "once") == first
    await adapter.send_text(Target(chat_id=fake.channel_id), "twice")
    await adapter.send_text(Target(chat_id=fake.channel_id), "twice")
    assert fake.sent_texts(fake.channel_id) == ["once", "twice", "twice"]
    body = fake.requests("POST", f"/channels/{fake.channel_id}/messages")[0].json
    assert body["enforce_nonce"] is True and len(body["nonce"]) <= 25


async def test_a_file_sent_again_with_its_send_key_is_one_message(fake: FakeDiscord, connected: Connected) -> None:
    """A file goes as a multipart create with the same enforced nonce: sent again after a crash, one message."""
    adapter, _ = connected
    keyed = Target(chat_id=fake.channel_id, send_key="reply-2:file")
    first = await adapter.send_file(keyed, "report.csv", b"a,b\n", caption="the report")
    assert await adapter.send_file(keyed, "report.csv", b"a,b\n", caption="the report") == first
    await adapter.send_file(Target(chat_id=fake.channel_id), "other.csv", b"c\n", caption="")
    assert [m["attachments"][0]["filename"] for m in fake.sent_messages(fake.channel_id)] == ["report.csv", "other.csv"]


async def test_own_messages_and_system_messages_are_not_handed_on(fake: FakeDiscord, connected: Connected) -> None:
    adapter, kit = connected
    await adapter.send_text(Target(chat_id=fake.channel_id), "my own words")
    fake.inject_event("MESSAGE_CREATE", {**fake.inject_guild_message("marker", mention_bot=True), "id": "1",
                                         "type": 6})  # a "message pinned" notice
    await next_incoming(kit, 1)
    assert [i.text for i in kit.incoming] == ["marker"]


async def test_attachments_arrive_as_files_fetched_from_the_cdn(fake: FakeDiscord, connected: Connected) -> None:
    _, kit = connected
    fake.inject_dm("see attached", attachments=[("notes.txt", b"line one\n", "text/plain"),
                                                ("chart.png", b"\x89PNG fake", "image/png")])
    await next_incoming(kit, 1)
    notes, chart = kit.incoming[0].files
    assert (notes.name, notes.size, notes.mime, notes.kind) == ("notes.txt", 9, "text/plain", "file")
    assert chart.kind == "image"
    assert await notes.fetch() == b"line one\n"


async def test_replies_go_to_the_channel_or_thread_without_pings(fake: FakeDiscord, connected: Connected) -> None:
    adapter, kit = connected
    asked = fake.inject_guild_message("question", mention_bot=True)
    await next_incoming(kit, 1)
    first = await adapter.send_text(Target(chat_id=fake.channel_id, reply_to=asked["id"]), "answer @everyone")
    await adapter.send_text(Target(chat_id=fake.channel_id, thread_id=fake.thread_id), "in thread")

    sent = fake.sent_messages(fake.channel_id)
    assert [m["content"] for m in sent] == ["answer @everyone"] and sent[0]["id"] == first
    assert sent[0]["message_reference"]["message_id"] == asked["id"]
    assert fake.sent_texts(fake.thread_id) == ["in thread"]
    posts = fake.requests("POST", f"/channels/{fake.channel_id}/messages")
    assert posts[0].json["allowed_mentions"] == {"parse": []}


async def test_content_over_2000_and_forbidden_are_permanent_errors(fake: FakeDiscord, connected: Connected) -> None:
    adapter, _ = connected
    with pytest.raises(DeliveryError) as too_long:
        await adapter.send_text(Target(chat_id=fake.channel_id), "x" * 2001)
    assert too_long.value.permanent and "50035" in str(too_long.value)

    fake.fail(f"/channels/{fake.channel_id}/messages", method="POST", status=403, code=50013,
              message="Missing Permissions")
    with pytest.raises(DeliveryError) as forbidden:
        await adapter.send_text(Target(chat_id=fake.channel_id), "hello")
    assert forbidden.value.permanent and "403" in str(forbidden.value)


async def test_a_server_error_is_retryable_and_a_rate_limit_is_waited_out(fake: FakeDiscord,
                                                                         connected: Connected) -> None:
    adapter, _ = connected
    fake.fail(f"/channels/{fake.channel_id}/messages", method="POST", status=503, code=0, message="busy")
    with pytest.raises(DeliveryError) as busy:
        await adapter.send_text(Target(chat_id=fake.channel_id), "hello")
    assert not busy.value.permanent

    fake.rate_limit(f"/channels/{fake.channel_id}/messages", method="POST", retry_after=0.3)
    await adapter.send_text(Target(chat_id=fake.channel_id), "after the wait")
    posts = [c.status for c in fake.requests("POST", f"/channels/{fake.channel_id}/messages")]
    assert posts[-2:] == [429, 200] and fake.sent_texts(fake.channel_id) == ["after the wait"]


async def test_typing_edit_delete_and_files(fake: FakeDiscord, connected: Connected) -> None:
    adapter, _ = connected
    target = Target(chat_id=fake.channel_id)
    await adapter.typing(target)
    assert fake.requests("POST", f"/channels/{fake.channel_id}/typing")[0].status == 204
    status = await adapter.send_text(target, "step 1")
    await adapter.edit_text(target, status, "step 2")
    assert fake.sent_texts(fake.channel_id) == ["step 2"]
    await adapter.delete(target, status)
    assert fake.sent_texts(fake.channel_id) == []
    in_thread = await adapter.send_text(Target(chat_id=fake.channel_id, thread_id=fake.thread_id), "thread step 1")
    await adapter.edit_text(target, in_thread, "thread step 2")  # the kit edits by chat; the message is in the thread
    assert fake.sent_texts(fake.thread_id) == ["thread step 2"]
    await adapter.delete(target, in_thread)
    assert fake.sent_texts(fake.thread_id) == []
    await adapter.send_file(target, "report.csv", b"a,b\n1,2\n", caption="the report")
    (message,) = fake.sent_messages(fake.channel_id)
    assert message["content"] == "the report" and message["attachments"][0]["filename"] == "report.csv"


async def test_approval_buttons_owner_and_non_owner(fake: FakeDiscord, connected: Connected) -> None:
    adapter, kit = connected
    dm = fake.dm_channel_for(fake.owner_user["id"])["id"]
    target = Target(chat_id=fake.channel_id)
    prompt = await adapter.send_approval(target, "ap_42", "Run `rm -rf build`?")
    assert prompt is not None
    buttons = fake._find(prompt)["components"][0]["components"]
    assert [b["custom_id"] for b in buttons] == [approval_custom_id("ap_42", True), approval_custom_id("ap_42", False)]

    refused = fake.press_button(prompt, approval_custom_id("ap_42", True), user_id=fake.other_user["id"])
    accepted = fake.press_button(prompt, approval_custom_id("ap_42", True), user_id=fake.owner_user["id"])
    await wait_until_async(lambda: len(kit.answers) == 2, "both presses handed to the kit")
    assert kit.where == fake.channel_id
    assert {(a, s.user_id, ok) for a, s, ok in kit.answers} == {
        ("ap_42", fake.other_user["id"], True), ("ap_42", fake.owner_user["id"], True)}
    for pressed in (refused, accepted):
        interaction = fake.interaction(pressed["id"])
        assert interaction.response_type == 6 and not interaction.refused  # acknowledged, in time
    await wait_until_async(lambda: len([m for m in fake.sent_messages(fake.channel_id) if m["flags"] & 64]) == 2,
                           "the two outcome lines")
    private = sorted(m["content"] for m in fake.sent_messages(fake.channel_id) if m["flags"] & 64)
    assert private == sorted([OWNER_LINE, REFUSED_LINE])  # each only to its presser (ephemeral)
    await adapter.edit_text(target, prompt, "Run `rm -rf build`? ✅ Approved")
    assert fake._find(prompt)["components"] == []  # answered: no more buttons
    assert dm  # the owner's DM channel exists for the e2e path; no message went there
    assert fake.sent_texts(dm) == []


async def test_slash_commands_registered_once_and_answered_in_place(fake: FakeDiscord, connected: Connected) -> None:
    adapter, kit = connected
    await adapter.register_commands(kit.command_names())
    await adapter.register_commands(kit.command_names())
    assert len(fake.requests("PUT", f"/applications/{fake.application_id}/commands")) == 1  # unchanged: not rewritten
    assert sorted(c["name"] for c in fake.commands[None]) == ["new", "status", "stop", "tasks"]

    ran = fake.run_command("tasks", channel_id=fake.channel_id, options=[{"name": "args", "type": 3, "value": "all"}])
    await next_incoming(kit, 1)
    command = kit.incoming[0]
    assert command.text == "/tasks all" and command.addressed and command.message_id == ran["id"]
    assert fake.interaction(ran["id"]).response_type == 5  # "thinking…" shown at once
    await adapter.send_text(Target(chat_id=fake.channel_id, reply_to=command.message_id), "No tasks.")
    await adapter.send_text(Target(chat_id=fake.channel_id), "second chunk")
    assert fake.sent_texts(fake.channel_id) == ["No tasks.", "second chunk"]
    assert fake.interaction(ran["id"]).original_message["content"] == "No tasks."


async def test_forced_reconnect_resumes_and_keeps_receiving(fake: FakeDiscord, connected: Connected) -> None:
    _, kit = connected
    fake.force_reconnect()
    await fake.wait_for_async(lambda: fake.resumes == 1 and fake.connected(), timeout=30)
    fake.inject_dm("after the reconnect")
    await next_incoming(kit, 1)
    assert kit.incoming[0].text == "after the reconnect" and fake.identifies == 1


async def test_bad_token_is_an_auth_error_naming_the_fix(fake: FakeDiscord) -> None:
    settings = settings_for(fake).model_copy(update={"token": "not-the-token"})
    adapter = DiscordAdapter(settings, RecordingKit(fake.owner_user["id"]))
    with pytest.raises(ChannelAuthError) as raised:
        await adapter.connect()
    assert "Reset Token" in str(raised.value) and "\n" not in str(raised.value)
    assert "not-the-token" not in str(raised.value)


async def test_missing_message_content_intent_is_an_auth_error(fake: FakeDiscord) -> None:
    fake.privileged_intents = 0  # not switched on in the Developer Portal
    adapter = DiscordAdapter(settings_for(fake), RecordingKit(fake.owner_user["id"]))
    with pytest.raises(ChannelAuthError) as raised:
        await adapter.connect()
    assert str(raised.value) == INTENT_FIX
    assert fake.privileged_intents != INTENT_MESSAGE_CONTENT


async def test_unreachable_server_is_unavailable_then_the_adapter_recovers(fake: FakeDiscord) -> None:
    fake.stop()
    adapter = DiscordAdapter(settings_for(fake), RecordingKit(fake.owner_user["id"]))
    with pytest.raises(ChannelUnavailable):
        await adapter.connect()
    fake.start()
    await adapter.connect()  # what the runner's retry does
    runner = asyncio.create_task(adapter.run())
    try:
        fake.inject_dm("back")
        await next_incoming(adapter.kit, 1)  # type: ignore[arg-type]
    finally:
        runner.cancel()
        await adapter.disconnect()


async def test_no_token_is_refused_before_any_request() -> None:
    adapter = DiscordAdapter(DiscordAdapter.settings_model(), RecordingKit("1"))
    with pytest.raises(ChannelAuthError) as raised:
        await adapter.connect()
    assert "CLAWGATE_CHANNELS__DISCORD__TOKEN" in str(raised.value)
    assert not DiscordAdapter.enabled(DiscordAdapter.settings_model())
    assert DiscordAdapter.enabled(DiscordAdapter.settings_model(token="t"))


async def test_messages_missed_while_offline_are_read_back_once(fake: FakeDiscord, connected: Connected) -> None:
    adapter, kit = connected
    fake.inject_dm("before the restart")
    fake.inject_guild_message("chatter before", mention_bot=False)
    await next_incoming(kit, 2)
    await wait_until_async(lambda: len(adapter._cursors) == 2, "both channels' cursors saved")
    await adapter.disconnect()  # the daemon is down: nothing reaches it

    missed = [fake.inject_dm("while you were away"), fake.inject_guild_message("hey bot", mention_bot=True)]
    again = DiscordAdapter(settings_for(fake), kit)  # the same store: a restarted daemon
    await again.connect()
    try:
        await next_incoming(kit, 4)
        await wait_until_async(lambda: again._catch_up is not None and again._catch_up.done(), "the read-back done")
        assert [i.text for i in kit.incoming] == ["before the restart", "chatter before", "while you were away",
                                                  "hey bot"]
        assert [i.message_id for i in kit.incoming[2:]] == [m["id"] for m in missed]
        history = fake.requests("GET", f"/channels/{fake.channel_id}/messages")
        assert history and history[0].query["after"]  # read from the cursor on, not the whole channel
    finally:
        await again.disconnect()


async def test_a_failing_intake_is_retried_in_order_before_the_cursor_moves(fake: FakeDiscord,
                                                                           connected: Connected) -> None:
    adapter, kit = connected
    failures = [RuntimeError("database is locked")]
    taken = kit.receive

    async def flaky(incoming):  # the first call fails, as with a busy state database
        if failures:
            raise failures.pop()
        await taken(incoming)

    kit.receive = flaky  # type: ignore[method-assign]
    first = fake.inject_dm("first")
    fake.inject_dm("second")
    await next_incoming(kit, 2)
    assert [i.text for i in kit.incoming] == ["first", "second"]  # the retry came before the next message
    assert int(adapter._cursors[first["channel_id"]]) > int(first["id"])


async def test_a_short_drop_is_resumed_and_an_outage_is_reported(fake: FakeDiscord) -> None:
    kit = RecordingKit(fake.owner_user["id"])
    # the grace shortened from 10 s, still well above a RESUME's time on a loaded machine
    adapter = DiscordAdapter(settings_for(fake, offline_grace_seconds=4), kit)
    await adapter.connect()
    runner = asyncio.create_task(adapter.run())
    try:
        fake.drop_connections(4000)  # a blip: discord.py resumes, run() goes on
        await fake.wait_for_async(lambda: fake.resumes == 1 and fake.connected(), timeout=30)
        fake.inject_dm("after the blip")
        await next_incoming(kit, 1)
        assert not runner.done()
        fake.stop()  # an outage: reported once the grace period is over, for the runner to retry
        with pytest.raises(ChannelUnavailable) as raised:
            await asyncio.wait_for(runner, 60)
        assert "reconnecting" in str(raised.value)
    finally:
        runner.cancel()
        await adapter.disconnect()


async def test_a_button_pressed_after_a_restart_still_reaches_the_kit(fake: FakeDiscord, connected: Connected) -> None:
    adapter, kit = connected
    prompt = await adapter.send_approval(Target(chat_id=fake.channel_id), "ap_7", "Run it?")
    await adapter.disconnect()  # the daemon restarts; the prompt stays on Discord
    again = DiscordAdapter(settings_for(fake), kit)
    await again.connect()
    try:
        pressed = fake.press_button(prompt, approval_custom_id("ap_7", False), user_id=fake.owner_user["id"])
        await wait_until_async(lambda: kit.answers, "the press handed to the kit")
        assert [(a, ok) for a, _, ok in kit.answers] == [("ap_7", False)]
        assert fake.interaction(pressed["id"]).response_type == 6
    finally:
        await again.disconnect()
