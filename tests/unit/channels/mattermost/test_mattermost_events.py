"""`posted` events -> Incoming: who wrote (the post's user id), whether it addresses the bot, the thread an
answer goes to, and what is never read (system posts, the bot's own, other bots)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from clawgate.channels.mattermost.events import Me, incoming
from clawgate.channels.mattermost.settings import MattermostSettings

ME = Me("b" * 26, "clawbot")
ALICE = "a" * 26


async def _fetch(file_id: str) -> bytes:
    return file_id.encode()


def posted(message: str, *, channel_type: str = "O", root_id: str = "", user_id: str = ALICE,
           mentions: list[str] | None = None, **post: Any) -> dict[str, Any]:
    body = {"id": "p" * 26, "user_id": user_id, "channel_id": "c" * 26, "root_id": root_id, "message": message,
            "type": "", "props": {}, "create_at": 1700000000000, **post}
    data = {"channel_type": channel_type, "post": json.dumps(body), "sender_name": "@alice"}
    if mentions is not None:
        data["mentions"] = json.dumps(mentions)
    return {"event": "posted", "data": data, "seq": 3}


def test_a_direct_message_is_private_addressed_and_unthreaded() -> None:
    msg = incoming(posted("hello", channel_type="D"), ME, _fetch, frozenset())
    assert msg is not None and msg.private and msg.addressed and msg.thread_id is None
    assert msg.sender.user_id == ALICE and msg.sender.username == "alice" and msg.message_id == "p" * 26


def test_a_channel_mention_is_removed_and_answered_in_a_thread_on_the_post() -> None:
    msg = incoming(posted("@clawbot  what is new?"), ME, _fetch, frozenset())
    assert msg is not None and msg.addressed and not msg.private
    assert msg.text == "what is new?" and msg.thread_id == "p" * 26
    # the server's mention list counts too; a post in a thread stays in it
    msg = incoming(posted("hey you", root_id="r" * 26, mentions=[ME.user_id]), ME, _fetch, frozenset())
    assert msg is not None and msg.addressed and msg.thread_id == "r" * 26


def test_a_channel_post_without_a_mention_is_not_addressed_unless_a_command() -> None:
    assert not incoming(posted("@clawbotx and email@clawbot.org"), ME, _fetch, frozenset()).addressed  # type: ignore[union-attr]
    assert incoming(posted("/stop"), ME, _fetch, frozenset({"stop"})).addressed  # type: ignore[union-attr]


def test_system_posts_own_posts_and_broken_events_are_not_read() -> None:
    assert incoming(posted("joined", type="system_join_channel"), ME, _fetch, frozenset()) is None
    assert incoming(posted("echo", user_id=ME.user_id), ME, _fetch, frozenset()) is None
    assert incoming({"event": "posted", "data": {"post": "not json"}}, ME, _fetch, frozenset()) is None
    bot = incoming(posted("from a bot", props={"from_bot": "true"}), ME, _fetch, frozenset())
    assert bot is not None and bot.sender_is_bot


def test_files_are_described_and_fetched_by_id() -> None:
    files = [{"id": "f" * 26, "name": "cat.png", "size": 10, "mime_type": "image/png"},
             {"id": "g" * 26, "name": "notes.txt", "size": 5, "mime_type": "text/plain"}]
    msg = incoming(posted("", channel_type="D", metadata={"files": files}), ME, _fetch, frozenset())
    assert msg is not None and [(f.name, f.kind) for f in msg.files] == [("cat.png", "image"), ("notes.txt", "file")]


def test_owner_and_allow_from_take_user_ids_only() -> None:
    with pytest.raises(ValueError, match="not a Mattermost user id.*channels.mattermost.owner"):
        MattermostSettings(owner=["@alice"])
    with pytest.raises(ValueError, match="channels.mattermost.allow_from"):
        MattermostSettings(allow_from=["alice"])
    assert MattermostSettings(owner=[ALICE], allow_from=["*"]).owner == [ALICE]


def test_the_button_listener_address_is_host_and_port() -> None:
    with pytest.raises(ValueError, match="actions_listen 'localhost' is not host:port"):
        MattermostSettings(actions_listen="localhost")
    assert MattermostSettings(actions_listen=" 127.0.0.1:8071 ").actions_listen == "127.0.0.1:8071"
