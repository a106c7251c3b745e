"""Feishu events -> Incoming, and Markdown -> Feishu content: who wrote, whether the bot was addressed, what
the text is once the mention placeholders are resolved, and that an answer can mention nobody."""

from __future__ import annotations

import json
from typing import Any

import pytest

from clawgate.channels.feishu.events import incoming, message_text
from clawgate.channels.feishu.render import approval_card, neutral, render
from clawgate.channels.feishu.settings import FeishuSettings

BOT = "ou_" + "b" * 32
ALICE = "ou_" + "a" * 32
COMMANDS = frozenset({"stop", "help"})


def event(text: str, *, chat_type: str = "group", mentions: list[dict[str, Any]] | None = None,
          sender: str = ALICE, sender_type: str = "user", msg_type: str = "text", **message: Any) -> dict[str, Any]:
    content = json.dumps({"text": text}) if msg_type == "text" else text
    return {"sender": {"sender_id": {"open_id": sender, "union_id": "on_x", "user_id": ""}, "sender_type": sender_type},
            "message": {"message_id": "om_1", "chat_id": "oc_1", "chat_type": chat_type, "message_type": msg_type,
                        "content": content, "mentions": mentions or [], **message}}


def mention(key: str, open_id: str, name: str) -> dict[str, Any]:
    return {"key": key, "id": {"open_id": open_id, "union_id": "on_y", "user_id": ""}, "name": name}


def test_a_group_message_mentioning_the_bot_is_addressed_and_the_placeholder_goes() -> None:
    found = incoming(event("@_user_1 what is new? cc @_user_2", mentions=[mention("@_user_1", BOT, "clawbot"),
                                                                           mention("@_user_2", ALICE, "Alice")]),
                     BOT, COMMANDS)
    assert found is not None and found.addressed and not found.private
    assert found.text == "what is new? cc @Alice"
    assert found.sender.user_id == ALICE and found.message_id == "om_1" and found.chat_id == "oc_1"


def test_a_group_message_mentioning_someone_else_or_a_name_alike_is_not_addressed() -> None:
    other = incoming(event("@_user_1 hi", mentions=[mention("@_user_1", ALICE, "clawbot")]), BOT, COMMANDS)
    assert other is not None and not other.addressed  # a person named like the bot is not the bot
    plain = incoming(event("clawbot are you there"), BOT, COMMANDS)
    assert plain is not None and not plain.addressed


def test_a_private_message_and_a_command_in_a_group_are_addressed() -> None:
    private = incoming(event("hello", chat_type="p2p"), BOT, COMMANDS)
    assert private is not None and private.private and private.addressed and private.thread_id is None
    command = incoming(event("/stop"), BOT, COMMANDS)
    assert command is not None and command.addressed


def test_the_bots_own_messages_and_other_apps_are_not_for_it() -> None:
    assert incoming(event("echo", sender=BOT), BOT, COMMANDS) is None
    app = incoming(event("beep", chat_type="p2p", sender_type="app"), BOT, COMMANDS)
    assert app is not None and app.sender_is_bot


def test_threads_and_reply_in_thread() -> None:
    in_thread = incoming(event("more", root_id="om_root", thread_id="omt_1"), BOT, COMMANDS)
    assert in_thread is not None and in_thread.thread_id == "om_root"
    reply = incoming(event("a quote reply", root_id="om_root"), BOT, COMMANDS)  # a reply, not a topic
    assert reply is not None and reply.thread_id is None
    started = incoming(event("start one"), BOT, COMMANDS, reply_in_thread=True)
    assert started is not None and started.thread_id == "om_1"


def test_rich_text_is_read_and_a_sticker_is_unreadable() -> None:
    post = json.dumps({"title": "Plan", "content": [[{"tag": "at", "user_id": "@_user_1"}, {"tag": "text", "text": " step one"}],
                                                    [{"tag": "a", "text": "the doc", "href": "https://x"}]]})
    found = incoming(event(post, msg_type="post", mentions=[mention("@_user_1", BOT, "clawbot")]), BOT, COMMANDS)
    assert found is not None and found.addressed and found.text == "Plan\nstep one\nthe doc"
    sticker = incoming(event(json.dumps({"file_key": "s_1"}), chat_type="p2p", msg_type="sticker"), BOT, COMMANDS)
    assert sticker is not None and sticker.unreadable
    assert message_text("text", "not json") is None


async def test_a_file_image_or_voice_message_carries_its_resource() -> None:
    fetched: list[tuple[str, str, str]] = []

    async def fetch(message_id: str, key: str, kind: str) -> bytes:
        fetched.append((message_id, key, kind))
        return b"data"

    sent = incoming(event(json.dumps({"file_key": "file_v3_1", "file_name": "notes.txt"}), chat_type="p2p",
                          msg_type="file"), BOT, COMMANDS, fetch=fetch)
    assert sent is not None and not sent.unreadable and sent.text == ""
    [attached] = sent.files
    assert (attached.name, attached.kind) == ("notes.txt", "file") and fetched == []  # nothing fetched yet
    assert await attached.fetch() == b"data" and fetched == [("om_1", "file_v3_1", "file")]
    image = incoming(event(json.dumps({"image_key": "img_v3_1"}), chat_type="p2p", msg_type="image"), BOT, COMMANDS,
                     fetch=fetch)
    assert image is not None and image.files[0].kind == "image"
    await image.files[0].fetch()
    assert fetched[-1] == ("om_1", "img_v3_1", "image")
    voice = incoming(event(json.dumps({"file_key": "file_v3_2", "duration": 2000}), chat_type="p2p",
                           msg_type="audio"), BOT, COMMANDS, fetch=fetch)
    assert voice is not None and voice.files[0].kind == "voice"


def test_an_answer_can_mention_nobody() -> None:
    assert neutral('hi <at user_id="all"></at> and < at id=all>') == 'hi &lt;at user_id="all">&lt;/at> and &lt; at id=all>'
    assert neutral("a < b and <b>") == "a < b and <b>"
    [chunk] = render('ping <at user_id="all">everyone</at>', 8000)
    assert "<at" not in json.loads(chunk.content)["zh_cn"]["content"][0][0]["text"]  # type: ignore[attr-defined]
    card = json.loads(approval_card('🔐 run <at user_id="all"></at>?', "A1", "s3cret"))
    assert "<at" not in card["elements"][0]["content"]
    assert [b["value"] for b in card["elements"][1]["actions"]] == [
        {"clawgate_approval": "A1", "approve": True, "secret": "s3cret"},
        {"clawgate_approval": "A1", "approve": False, "secret": "s3cret"}]


def test_settings_take_open_ids_and_a_known_domain() -> None:
    assert FeishuSettings(domain="lark").url() == "https://open.larksuite.com"
    assert FeishuSettings().url() == "https://open.feishu.cn"
    assert FeishuSettings(domain="https://open.example.com/").url() == "https://open.example.com"
    with pytest.raises(ValueError, match="not a Feishu open_id"):
        FeishuSettings(owner=["Alice"])
    with pytest.raises(ValueError, match="neither"):
        FeishuSettings(domain="open.feishu.cn/path")
