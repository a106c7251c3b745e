"""A reply part sent again after a crash is one Google Chat message: the adapter, with the real
google-apps-chat client, gives the create the part's send_key as its `requestId` (Chat returns the
message that request made) and as its `messageId` (a custom id, unique in the space: taken, Chat answers
ALREADY_EXISTS, which the adapter counts as sent). The fake keeps both as Google documents them."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from clawgate.channels.googlechat.adapter import GoogleChatAdapter
from clawgate.channels.googlechat.api import ApiError, custom_message_id
from clawgate.channels.googlechat.settings import GoogleChatSettings
from clawgate.channels.kit import DeliveryError, Target
from tests.fakes.googlechat import PROJECT_NUMBER, FakeGoogleChat


@pytest.fixture
def fake() -> Iterator[FakeGoogleChat]:
    with FakeGoogleChat() as server:
        yield server


@pytest.fixture
async def adapter(fake: FakeGoogleChat, tmp_path: Path) -> AsyncIterator[GoogleChatAdapter]:
    """Only the sending half: the Chat client as the app's service account (no event endpoint)."""
    key = tmp_path / "key.json"
    key.write_text(json.dumps(fake.key()))
    settings = GoogleChatSettings(credentials_file=str(key), audience=PROJECT_NUMBER, base_url=fake.base_url)
    adapter = GoogleChatAdapter(settings, SimpleNamespace(log=logging.getLogger("clawgate.googlechat")))  # type: ignore[arg-type]
    yield adapter
    adapter.api.close()


def texts(fake: FakeGoogleChat, space: str) -> list[str]:
    return [s.text for s in fake.sent_to(space)]


async def test_a_part_sent_again_with_its_send_key_is_one_message(fake: FakeGoogleChat,
                                                                  adapter: GoogleChatAdapter) -> None:
    space = fake.add_space("team")
    again = Target(chat_id=space, send_key="reply-1:0")
    first = await adapter.send_text(again, "once")
    assert await adapter.send_text(again, "once") == first  # the requestId: the message it made
    await adapter.send_text(Target(chat_id=space), "twice")  # no key: every send is a message
    await adapter.send_text(Target(chat_id=space), "twice")
    assert texts(fake, space) == ["once", "twice", "twice"]
    assert fake.sent_to(space)[0].client_id == custom_message_id("reply-1:0")


async def test_a_part_chat_no_longer_matches_by_request_is_already_there_by_its_custom_id(
        fake: FakeGoogleChat, adapter: GoogleChatAdapter) -> None:
    """Google does not say how long a requestId is remembered: past it, the custom id makes the create
    ALREADY_EXISTS, which is the part sent (never a failure, never a second message); its name, built from
    the custom id, names the message for an edit."""
    user = fake.add_user("ann")
    part = Target(chat_id=user.dm, send_key="reply-2:1")
    await adapter.send_text(part, "the answer")
    fake.forget_request_ids()
    name = await adapter.send_text(part, "the answer")
    assert name == f"{user.dm}/messages/{custom_message_id('reply-2:1')}" and texts(fake, user.dm) == ["the answer"]
    await adapter.edit_text(part, name, "the answer, edited")
    assert texts(fake, user.dm) == ["the answer, edited"]


async def test_the_fake_refuses_a_malformed_custom_id_as_chat_does(fake: FakeGoogleChat,
                                                                   adapter: GoogleChatAdapter) -> None:
    from google.apps import chat_v1

    space = fake.add_space("team")
    for bad in ("custom-name", "client-Upper", "client-" + "a" * 57):
        request = chat_v1.CreateMessageRequest(parent=space, message=chat_v1.Message(text="hi"), message_id=bad)
        with pytest.raises(ApiError, match="HTTP 400") as refused:
            await adapter.api._call("create_message", request=request)
        assert "client-" in str(refused.value)
    assert not fake.sent_to(space)
    with pytest.raises(DeliveryError, match="not found"):  # an unknown space is still refused, key or not
        await adapter.send_text(Target(chat_id="spaces/nowhere", send_key="reply-3:0"), "lost")
