"""A reply part sent again after a crash is one Feishu message: the adapter, with the real lark-oapi SDK,
passes the part's send_key on as im/v1/messages' `uuid`, which the fake deduplicates as Feishu documents
("the same uuid within one hour sends at most one message") and refuses over 50 characters."""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import AsyncIterator, Iterator
from types import SimpleNamespace

import httpx
import pytest

from clawgate.channels.feishu.adapter import FeishuAdapter, send_uuid
from clawgate.channels.feishu.settings import FeishuSettings
from clawgate.channels.kit import Target, markdown
from tests.fakes.feishu import APP_SECRET, FakeFeishu


@pytest.fixture
def fake() -> Iterator[FakeFeishu]:
    """An app id of its own: lark-oapi caches the tenant token per app id for the whole process."""
    with FakeFeishu() as server:
        server.app_id = "cli_" + secrets.token_hex(8)
        yield server


@pytest.fixture
async def adapter(fake: FakeFeishu) -> AsyncIterator[FeishuAdapter]:
    """Connected (the bot's info read); the kit is only what sending text uses: a log and the bot's name."""
    kit = SimpleNamespace(log=logging.getLogger("clawgate.feishu"), bot_name=None)
    adapter = FeishuAdapter(FeishuSettings(domain=fake.url, app_id=fake.app_id, app_secret=APP_SECRET), kit)  # type: ignore[arg-type]
    await adapter.connect()
    yield adapter
    await adapter.disconnect()


def texts(fake: FakeFeishu, chat: str) -> list[str]:
    return [json.loads(m.content)["zh_cn"]["content"][0][0]["text"] for m in fake.sent_to(chat)]


async def test_a_part_sent_again_with_its_send_key_is_one_message(fake: FakeFeishu, adapter: FeishuAdapter) -> None:
    chat = fake.p2p_chat(fake.add_user("alice"))
    again = Target(chat_id=chat, send_key="reply-1:0")
    first = await adapter.send_text(again, "once")
    assert await adapter.send_text(again, "once") == first
    await adapter.send_text(Target(chat_id=chat), "twice")  # no key: every send is a message
    await adapter.send_text(Target(chat_id=chat), "twice")
    assert texts(fake, chat) == ["once", "twice", "twice"]
    [body, *_] = [c.body for c in fake.send_requests(chat)]
    assert body["uuid"] == send_uuid("reply-1:0") and len(body["uuid"]) <= 50


async def test_a_reply_sent_again_with_its_send_key_is_one_reply(fake: FakeFeishu, adapter: FeishuAdapter) -> None:
    """The reply to the message answered (im/v1/messages/:id/reply) takes the same uuid."""
    user = fake.add_user("alice")
    chat = fake.p2p_chat(user)
    asked = fake.write(user, chat, "hello")["event"]["message"]["message_id"]
    part = Target(chat_id=chat, reply_to=asked, send_key="reply-2:0")
    first = await adapter.send_text(part, "the answer")
    assert await adapter.send_text(part, "the answer") == first
    [reply] = fake.sent_to(chat)
    assert reply.parent_id == asked and len(fake.send_requests(chat)) == 2


async def test_a_file_whose_caption_is_unconfirmed_is_still_sent(fake: FakeFeishu) -> None:
    """The caption and the file are two messages: a caption that timed out (Feishu took it, its answer came too
    late) is not sent again, and the file goes all the same, each under a uuid of its own."""
    kit = SimpleNamespace(log=logging.getLogger("clawgate.feishu"), bot_name=None, markdown=markdown)
    adapter = FeishuAdapter(FeishuSettings(domain=fake.url, app_id=fake.app_id, app_secret=APP_SECRET,
                                           request_timeout_seconds=3), kit)  # type: ignore[arg-type]
    await adapter.connect()
    try:
        chat = fake.p2p_chat(fake.add_user("alice"))
        fake.answer_late(6.0)  # past the 3 s timeout, which leaves the connect's own calls time on a loaded machine
        await adapter.send_file(Target(chat_id=chat, send_key="reply-3:file"), "a.txt", b"the data", "the caption")
    finally:
        await adapter.disconnect()
    assert [m.msg_type for m in fake.sent_to(chat)] == ["post", "file"]
    uuids = [c.body.get("uuid") for c in fake.send_requests(chat)]
    assert uuids[0] == send_uuid("reply-3:file:caption") and uuids[-1] == send_uuid("reply-3:file")


def test_the_fake_refuses_a_uuid_over_50_characters_as_feishu_does(fake: FakeFeishu) -> None:
    token = httpx.post(f"{fake.url}/open-apis/auth/v3/tenant_access_token/internal",
                       json={"app_id": fake.app_id, "app_secret": APP_SECRET}, trust_env=False).json()["tenant_access_token"]
    chat = fake.p2p_chat(fake.add_user("alice"))

    def send(uuid: str) -> httpx.Response:
        return httpx.post(f"{fake.url}/open-apis/im/v1/messages?receive_id_type=chat_id", trust_env=False,
                          headers={"Authorization": f"Bearer {token}"},
                          json={"receive_id": chat, "msg_type": "text", "content": json.dumps({"text": "hi"}),
                                "uuid": uuid})

    refused = send("u" * 51)
    assert refused.status_code == 400 and refused.json()["code"] == 99992402 and not fake.sent_to(chat)
    assert send("u" * 50).json()["code"] == 0 and len(fake.sent_to(chat)) == 1
