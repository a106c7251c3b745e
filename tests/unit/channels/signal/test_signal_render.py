"""Markdown -> Signal text and style ranges, and signal-cli events -> Incoming (no network)."""

from __future__ import annotations

from typing import Any

from clawgate.channels.signal.events import Self, incoming, reaction
from clawgate.channels.signal.render import MAX_CHARS, render, to_signal, utf16_len

ME = Self("+15550000001", "0b0b0b0b-0000-4000-8000-000000000001")


def styled(text: str, styles: tuple[str, ...]) -> dict[str, str]:
    """style -> the characters it covers (counted back from UTF-16 units)."""
    units = text.encode("utf-16-le")
    out = {}
    for style in styles:
        start, length, kind = style.split(":")
        out[kind + ":" + units[2 * int(start):2 * (int(start) + int(length))].decode("utf-16-le")] = kind
    return out


def test_styles_cover_exactly_their_words_past_astral_characters() -> None:
    chunk = to_signal("🎉🎉 **bold** then _it_ and ~~gone~~ and `code` [site](https://example.org)")
    assert str(chunk) == "🎉🎉 bold then it and gone and code site (https://example.org)"
    assert set(styled(chunk, chunk.styles)) == {"BOLD:bold", "ITALIC:it", "STRIKETHROUGH:gone", "MONOSPACE:code"}


def test_a_code_block_is_monospace_without_its_fence_and_markup_reads_as_written() -> None:
    chunk = to_signal("Look:\n\n```python\nx = a < b & c\n```\n\n5 \\* 3 <b>&amp;</b>")
    assert str(chunk) == "Look:\n\nx = a < b & c\n\n5 * 3 <b>&</b>"
    assert styled(chunk, chunk.styles) == {"MONOSPACE:x = a < b & c": "MONOSPACE"}


def test_long_answers_are_split_under_the_limit_each_styled_on_its_own() -> None:
    markdown = "\n\n".join(f"Paragraph {i} **bold {i}** " + "word " * 60 for i in range(30))
    chunks = render(markdown)
    assert len(chunks) > 1 and all(utf16_len(c) <= MAX_CHARS for c in chunks)
    for chunk in chunks:
        for style in chunk.styles:
            start, length, _ = style.split(":")
            assert int(start) + int(length) <= utf16_len(chunk)
    assert sum(c.count("Paragraph") for c in chunks) == 30


def envelope(data: dict[str, Any], **source: Any) -> dict[str, Any]:
    who = {"sourceNumber": "+15550100001", "sourceUuid": "AAAA-1", "sourceName": "+15550100009", **source}
    return {"envelope": {"timestamp": 17, **who, "dataMessage": {"timestamp": 17, **data}}, "account": ME.number}


async def _never(_a: dict[str, Any], _c: str) -> bytes:
    raise AssertionError("not fetched")


def test_identity_is_uuid_and_number_never_the_profile_name() -> None:
    message = incoming(envelope({"message": "hi"}), ME, _never)
    assert message is not None
    assert (message.sender.user_id, message.sender.username, message.sender.display) == ("aaaa-1", "+15550100001",
                                                                                      "+15550100009")
    assert message.private and message.chat_id == "aaaa-1" and message.message_id == "aaaa-1:17"
    uuid_only = incoming(envelope({"message": "hi"}, sourceNumber=None), ME, _never)
    assert uuid_only is not None and uuid_only.sender.username is None


def test_groups_need_a_mention_a_quote_of_the_bot_or_a_command() -> None:
    group = {"groupInfo": {"groupId": "R3JvdXA="}}
    plain = incoming(envelope({"message": "chatting", **group}), ME, _never)
    assert plain is not None and not plain.addressed and plain.chat_id == "group:R3JvdXA="
    mention = {"message": "\ufffc what now", "mentions": [{"uuid": ME.uuid, "number": None, "start": 0, "length": 1}]}
    addressed = incoming(envelope({**mention, **group}), ME, _never)
    assert addressed is not None and addressed.addressed and addressed.text == "what now"
    other = {"message": "ask \ufffc", "mentions": [{"uuid": "bbbb", "number": "+1555", "start": 4, "length": 1}]}
    named = incoming(envelope({**other, **group}), ME, _never)
    assert named is not None and not named.addressed and named.text == "ask @+1555"
    quoted = incoming(envelope({"message": "and?", "quote": {"id": 5, "authorUuid": ME.uuid}, **group}), ME, _never)
    assert quoted is not None and quoted.addressed
    commands = frozenset({"status", "stop"})
    command = incoming(envelope({"message": "/status", **group}), ME, _never, commands)
    assert command is not None and command.addressed
    shrug = incoming(envelope({"message": "/shrug oh well", **group}), ME, _never, commands)
    assert shrug is not None and not shrug.addressed  # a slash alone does not address the bot


def test_receipts_timer_changes_and_reactions_are_not_messages() -> None:
    assert incoming({"envelope": {"sourceUuid": "a", "receiptMessage": {}}}, ME, _never) is None
    assert incoming(envelope({"message": None, "expiresInSeconds": 60}), ME, _never) is None
    react = envelope({"message": None, "reaction": {"emoji": "👍", "targetSentTimestamp": 99, "isRemove": False}})
    assert incoming(react, ME, _never) is None
    who, emoji, target, removed, group = reaction(react)  # type: ignore[misc]
    assert (who.user_id, emoji, target, removed, group) == ("aaaa-1", "👍", 99, False, None)


def test_the_bot_on_an_owners_own_number_is_refused_in_one_line() -> None:
    import asyncio

    import pytest

    from clawgate.channels.kit import ChannelAuthError
    from clawgate.channels.signal.adapter import _check
    from clawgate.channels.signal.rpc import SignalRpc
    from clawgate.channels.signal.settings import SignalSettings

    settings = SignalSettings(account="+15550100001", owner=["+15550100001"])
    with pytest.raises(ChannelAuthError, match="an owner's own number"):
        asyncio.run(_check(SignalRpc("http://127.0.0.1:9", settings.account, timeout=1), settings))
