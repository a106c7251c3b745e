"""IRC lines: tags unescaped, trailing parameters, byte budgets and UTF-8-safe splitting, mentions, CTCP."""

from __future__ import annotations

import asyncio
import time

import pytest

from clawgate.channels.irc.client import TokenBucket
from clawgate.channels.irc.protocol import addressed_text, ctcp, line, parse, split_bytes, text_budget
from clawgate.channels.irc.render import render


def test_a_tagged_privmsg_is_read_with_its_account_and_msgid() -> None:
    message = parse(r"@account=alice;msgid=a\:b\sc;time=2026-01-01T00:00:00Z :al!u@h PRIVMSG #team :bot: hi : there")
    assert message is not None
    assert (message.command, message.nick, message.params) == ("PRIVMSG", "al", ("#team", "bot: hi : there"))
    assert message.tags == {"account": "alice", "msgid": "a;b c", "time": "2026-01-01T00:00:00Z"}
    assert parse("PING :irc.test").params == ("irc.test",)  # type: ignore[union-attr]
    assert parse("") is None


def test_a_line_never_carries_a_second_command() -> None:
    assert line("PRIVMSG", "#x", "hello there") == "PRIVMSG #x :hello there"
    assert line("JOIN", "#x") == "JOIN #x"
    with pytest.raises(ValueError):
        line("PRIVMSG", "#x", "hi\r\nQUIT :gone")


def test_split_by_bytes_keeps_multibyte_characters_whole() -> None:
    text = "日本語😀 " * 200
    budget = text_budget("bot!~u@some.host.example", "PRIVMSG", "#team")
    pieces = split_bytes(text, budget)
    assert len(pieces) > 1 and all(len(p.encode()) <= budget for p in pieces)
    assert " ".join(pieces).split() == text.split()  # cut at spaces, nothing lost or broken
    one_word = "ü" * 600  # no space to cut at: cut between characters
    assert "".join(split_bytes(one_word, 101)) == one_word
    assert all(len(p.encode()) <= 101 for p in split_bytes(one_word, 101))


def test_the_budget_counts_the_prefix_the_server_adds() -> None:
    budget = text_budget("bot!~u@h", "PRIVMSG", "#t")
    relayed = f":bot!~u@h PRIVMSG #t :{'x' * budget}\r\n"
    assert len(relayed.encode()) == 512


def test_only_the_bots_nick_first_addresses_it() -> None:
    assert addressed_text("ClawBot: do it", "clawbot") == "do it"
    assert addressed_text("clawbot, do it", "clawbot") == "do it"
    assert addressed_text("clawbotx: do it", "clawbot") is None
    assert addressed_text("hey clawbot: do it", "clawbot") is None


def test_ctcp_requests_are_recognised() -> None:
    assert ctcp("\x01VERSION\x01") == ("VERSION", "")
    assert ctcp("\x01ACTION waves\x01") == ("ACTION", "waves")
    assert ctcp("plain") is None


def test_markdown_becomes_plain_lines_without_blank_ones() -> None:
    [chunk] = render("**Bold** and `code`\n\n- one\n- two\n\n[site](https://example.org)")
    assert chunk == "Bold and code\n- one\n- two\nsite (https://example.org)"


def test_the_token_bucket_paces_after_the_burst() -> None:
    async def main() -> float:
        bucket = TokenBucket(burst=2, rate=20.0)
        start = time.monotonic()
        for _ in range(4):
            await bucket.take()
        return time.monotonic() - start

    assert asyncio.run(main()) >= 2 / 20.0 * 0.9  # two lines at once, then one per 1/20 s
