"""SlackAdapter against the fake Slack server, with a kit that records what the adapter hands it
(the kit's own behaviour is tested in tests/unit/channels/kit and the conformance suite)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, AsyncIterator, Iterator

import pytest

from clawgate.channels.kit import ChannelAuthError, ChannelUnavailable, DeliveryError, Incoming, Sender, Target
from clawgate.channels.slack.adapter import MAX_CHARS, SlackAdapter
from clawgate.channels.slack.api import token_may_go_to
from clawgate.channels.slack.settings import SlackSettings
from tests.fakes.slack_api import APP_TOKEN, BOT_TOKEN, SIGNING_SECRET, FakeSlack
from tests.fakes.slack_api import workspace as W


class RecordingKit:
    """What the kit offers an adapter, recording the calls; `receive` can be held to prove the
    acknowledgement waits for it."""

    name = "slack"

    def __init__(self) -> None:
        self.log = logging.getLogger("clawgate.slack.test")
        self.received: list[Incoming] = []
        self.answers: list[tuple[str, Sender, bool]] = []
        self.hold: asyncio.Event | None = None

    async def receive(self, incoming: Incoming) -> None:
        if self.hold is not None:
            await self.hold.wait()
        self.received.append(incoming)

    async def approval_answer(self, approval_id: str, sender: Sender, approved: bool) -> str:
        self.answers.append((approval_id, sender, approved))
        return "✅ Approved" if sender.user_id == W.OWNER_ID else "Only the owner can approve."

    def command_names(self) -> list[tuple[str, str]]:
        return [("new", "start over"), ("stop", "stop the run"), ("status", "status"), ("tasks", "tasks")]


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeSlack]:
    for var in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"):
        monkeypatch.delenv(var, raising=False)
    with FakeSlack(ack_timeout=2.0) as f:
        f.workspace.add_user("U0GUEST001", "guest")
        yield f


def settings(fake: FakeSlack, **over: Any) -> SlackSettings:
    values: dict[str, Any] = {"enabled": True, "bot_token": BOT_TOKEN, "app_token": APP_TOKEN,
                              "base_url": fake.api_url, "owner": [W.OWNER_ID]}
    values.update(over)
    return SlackSettings(**values)


async def wait(predicate: Any, what: str, timeout: float = 30.0) -> Any:
    deadline = asyncio.get_running_loop().time() + timeout
    while not (value := predicate()):
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)
    return value


@pytest.fixture
async def adapter(fake: FakeSlack) -> AsyncIterator[tuple[SlackAdapter, RecordingKit]]:
    kit = RecordingKit()
    a = SlackAdapter(settings(fake), kit)  # type: ignore[arg-type]
    await a.connect()
    runner = asyncio.ensure_future(a.run())
    yield a, kit
    runner.cancel()
    await a.disconnect()


async def test_dm_reaches_the_kit_before_the_envelope_is_acknowledged(fake: FakeSlack, adapter: Any) -> None:
    a, kit = adapter
    kit.hold = asyncio.Event()
    env = fake.send_message("hello &lt;there&gt; <https://example.org|a link>")
    await asyncio.sleep(0.5)
    assert not env.acked and kit.received == []
    kit.hold.set()
    await fake.wait_for_async(lambda f: env.acked, timeout=30)
    (msg,) = kit.received
    assert (msg.chat_id, msg.private, msg.addressed, msg.thread_id) == (W.OWNER_DM, True, True, None)
    assert msg.text == "hello <there> a link (https://example.org)"
    assert msg.sender == Sender(W.OWNER_ID, "owner", "owner") and msg.message_id == f"{W.OWNER_DM}:{msg.metadata['ts']}"
    assert a.status()["bot"] == f"@{W.BOT_NAME}"


async def test_channel_mention_is_threaded_and_its_message_twin_has_the_same_id(fake: FakeSlack, adapter: Any) -> None:
    a, kit = adapter
    fake.send_mention("what's up?", also_message_event=True)
    fake.send_message("chatter without a mention", channel=W.GENERAL)
    got = await wait(lambda: len(kit.received) == 3 and kit.received, "three messages")
    first, twin = [m for m in got if m.text == "what's up?"]
    (chatter,) = [m for m in got if m.text == "chatter without a mention"]
    assert first.message_id == twin.message_id and first.text == "what's up?" and first.addressed
    assert (first.private, first.thread_id) == (False, first.metadata["ts"])
    assert chatter.addressed is False


async def test_own_posts_and_edits_are_not_messages(fake: FakeSlack, adapter: Any) -> None:
    a, kit = adapter
    own = fake.send_event({"type": "message", "channel": W.OWNER_DM, "channel_type": "im", "user": W.BOT_USER_ID,
                           "bot_id": W.BOT_ID, "text": "my own reply", "ts": "5.000001"})
    edit = fake.send_event({"type": "message", "subtype": "message_changed", "channel": W.OWNER_DM,
                            "channel_type": "im", "ts": "5.000002", "message": {"text": "x"}})
    other_bot = fake.send_event({"type": "message", "channel": W.OWNER_DM, "channel_type": "im", "user": "U0OTHERBOT",
                                 "bot_id": "B0OTHER", "text": "beep", "ts": "5.000003"})
    await fake.wait_for_async(lambda f: own.acked and edit.acked and other_bot.acked, timeout=30)
    assert [(m.text, m.sender_is_bot) for m in kit.received] == [("beep", True)]


async def test_render_keeps_every_chunk_under_slacks_limit(fake: FakeSlack, adapter: Any) -> None:
    a, kit = adapter
    para = "Some **bold** text with a [link](https://example.org/?a=1&b=2) and `a < b && c > d` & more. "
    markdown = "\n\n".join([para * 6, "```python\n" + "x = 1 < 2 & 3\n" * 120 + "```", "- item & <tag>\n" * 150]
                           * 3)
    assert len(markdown) > 10_000
    chunks = a.render(markdown)
    assert len(chunks) > 3 and all(len(c) <= MAX_CHARS for c in chunks)
    assert all(c.count("```") % 2 == 0 for c in chunks)  # no code block cut open
    assert "*bold*" in chunks[0] and "<https://example.org/?a=1&amp;b=2|link>" in chunks[0]
    for chunk in chunks:
        await a.send_text(Target(W.OWNER_DM), chunk)
    assert [m["text"] for m in fake.posted(W.OWNER_DM)] == chunks


async def test_send_errors_mean_what_slack_meant(fake: FakeSlack, adapter: Any) -> None:
    a, kit = adapter
    fake.rate_limit("chat.postMessage", retry_after=7)
    with pytest.raises(DeliveryError) as e:
        await a.send_text(Target(W.OWNER_DM), "hi")
    assert (e.value.retry_after, e.value.permanent) == (7.0, False)
    fake.fail("chat.postMessage", "channel_not_found")
    with pytest.raises(DeliveryError) as e:
        await a.send_text(Target(W.OWNER_DM), "hi")
    assert e.value.permanent and "channel_not_found" in str(e.value)
    with pytest.raises(DeliveryError) as e:
        await a.send_text(Target(W.OWNER_DM), "x" * 4_500)  # the fake refuses it as Slack does
    assert e.value.permanent and "msg_too_long" in str(e.value)
    fake.fail("chat.postMessage", "internal_error", status=500)
    with pytest.raises(DeliveryError) as e:
        await a.send_text(Target(W.OWNER_DM), "hi")
    assert not e.value.permanent and e.value.retry_after is None
    ts = await a.send_text(Target(W.GENERAL, thread_id=None), "⚙️ exec echo <!channel>")  # a status line, raw
    assert fake.posted(W.GENERAL)[0]["text"] == "⚙️ exec echo &lt;!channel&gt;"  # shown, nobody pinged
    await a.edit_text(Target(W.GENERAL), ts, "step 2 <@U0GUEST001> <!here>")
    assert [m["text"] for m in fake.posted(W.GENERAL)] == ["step 2 &lt;@U0GUEST001&gt; &lt;!here&gt;"]
    await a.delete(Target(W.GENERAL), ts)
    assert fake.posted(W.GENERAL) == []


async def test_threaded_reply_goes_under_the_persons_message(fake: FakeSlack, adapter: Any) -> None:
    a, kit = adapter
    fake.send_mention("thread me")
    (msg,) = await wait(lambda: kit.received, "the mention")
    await a.send_text(Target(msg.chat_id, thread_id=msg.thread_id), "in the thread")
    (reply,) = fake.posted(W.GENERAL)
    assert reply["thread_ts"] == msg.metadata["ts"]


async def test_approval_buttons_answer_the_presser_alone(fake: FakeSlack, adapter: Any) -> None:
    a, kit = adapter
    ts = await a.send_approval(Target(W.OWNER_DM), "ap-17", a.render("Run `rm -rf build`?")[0])
    (prompt,) = fake.posted(W.OWNER_DM)
    assert [e["value"] for e in prompt["blocks"][1]["elements"]] == ["ap-17", "ap-17"]
    guest = fake.press_button(ts, "clawgate_approve", user="U0GUEST001")
    owner = fake.press_button(ts, "clawgate_deny")
    await fake.wait_for_async(lambda f: guest.acked and owner.acked and len(f.responses) == 2, timeout=30)
    assert [(i, s.user_id, ok) for i, s, ok in kit.answers] == [("ap-17", "U0GUEST001", True), ("ap-17", W.OWNER_ID, False)]
    texts = sorted(body["text"] for _, body in fake.responses)
    assert texts == ["Only the owner can approve.", "✅ Approved"]
    assert all(body["response_type"] == "ephemeral" for _, body in fake.responses)


async def test_slash_command_becomes_a_chat_command(fake: FakeSlack, adapter: Any) -> None:
    a, kit = adapter
    ok = fake.slash_command("/clawgate", "new")
    bad = fake.slash_command("/clawgate", "dance")
    await fake.wait_for_async(lambda f: ok.acked and bad.acked, timeout=30)
    assert [(m.text, m.chat_id, m.addressed) for m in kit.received] == [("/new", W.OWNER_DM, True)]
    assert ok.ack_payload is None and "new|stop|status|tasks" in bad.ack_payload["text"]


async def test_shared_files_are_fetched_with_the_bot_token_only_from_slack(fake: FakeSlack, adapter: Any) -> None:
    a, kit = adapter
    fake.send_file("notes.txt", b"remember the milk\n", text="keep this")
    fake.send_file("more.txt", b"by id only\n", full_file=False)
    first, second = await wait(lambda: len(kit.received) == 2 and kit.received, "two file messages")
    (f1,), (f2,) = first.files, second.files
    assert (f1.name, f1.size, f1.mime, first.text) == ("notes.txt", 18, "text/plain", "keep this")
    assert await f1.fetch() == b"remember the milk\n" and await f2.fetch() == b"by id only\n"
    assert fake.calls_to("files.info") and all(auth == f"Bearer {BOT_TOKEN}" for _, auth in fake.file_fetches)
    assert not token_may_go_to("https://evil.example/files-pri/x", None)
    assert not token_may_go_to("http://files.slack.com/x", None)
    assert token_may_go_to("https://files.slack.com/files-pri/T1-F1/x.txt", None)


async def test_bad_tokens_are_one_line_and_name_the_fix(fake: FakeSlack) -> None:
    for over, needle in [({"bot_token": "xoxb-revoked"}, "bot_token"), ({"bot_token": None}, "bot_token is not set"),
                         ({"app_token": "xoxb-wrong-kind"}, "app_token"), ({"app_token": "xapp-1-revoked"}, "app-level token")]:
        a = SlackAdapter(settings(fake, **over), RecordingKit())  # type: ignore[arg-type]
        with pytest.raises(ChannelAuthError) as e:
            await a.connect()
        await a.disconnect()
        assert needle in str(e.value) and "\n" not in str(e.value) and "revoked" not in str(e.value)


async def test_unreachable_slack_is_unavailable(fake: FakeSlack) -> None:
    a = SlackAdapter(settings(fake, base_url="http://127.0.0.1:9/api/"), RecordingKit())  # type: ignore[arg-type]
    with pytest.raises(ChannelUnavailable) as e:
        await a.connect()
    await a.disconnect()
    assert "127.0.0.1:9" in str(e.value)


async def test_http_mode_verifies_signatures(fake: FakeSlack) -> None:
    kit = RecordingKit()
    a = SlackAdapter(settings(fake, mode="http", app_token=None, signing_secret=SIGNING_SECRET, http_port=0), kit)  # type: ignore[arg-type]
    await a.connect()
    try:
        url = a.status()["url"]
        body = fake.event_body({"type": "message", "channel_type": "im", "channel": W.OWNER_DM, "user": W.OWNER_ID,
                                "text": "over http", "ts": "9.000001"})
        assert (await fake.post_signed(url, body, secret="not-the-secret"))[0] == 401
        assert kit.received == []
        assert (await fake.post_signed(url, body))[0] == 200
        assert [m.text for m in kit.received] == ["over http"]
    finally:
        await a.disconnect()
