"""What the IRC adapter hands the kit: the account as the id, the msgid as the dedupe key, mention-only
channels, CTCP and strangers kept away. The kit and the connection are recorders here; the whole path runs
against a real server in tests/e2e/test_irc_e2e.py."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from clawgate.channels.irc.adapter import NOT_LOGGED_IN, IrcAdapter
from clawgate.channels.irc.protocol import parse
from clawgate.channels.irc.settings import IrcSettings


class RecordingKit:
    def __init__(self) -> None:
        self.received: list[Any] = []
        self.log = logging.getLogger("test.irc")

    async def receive(self, incoming: Any) -> bool:
        self.received.append(incoming)
        return True

    def command_names(self) -> list[tuple[str, str]]:
        return [("/status", "status"), ("/stop", "stop")]


class RecordingConnection:
    nick = "clawbot"

    def __init__(self) -> None:
        self.sent: list[str] = []

    async def send(self, raw: str, *, paced: bool = True) -> None:
        self.sent.append(raw)


def feed(raw: str, **settings: Any) -> tuple[RecordingKit, RecordingConnection]:
    kit, connection = RecordingKit(), RecordingConnection()
    adapter = IrcAdapter(IrcSettings(host="irc.test", **settings), kit)  # type: ignore[arg-type]
    message = parse(raw)
    assert message is not None
    asyncio.run(adapter._on_message(connection, message))  # type: ignore[arg-type]
    return kit, connection


def test_a_dm_is_the_account_and_the_msgid_its_key() -> None:
    kit, _ = feed("@account=Alice;msgid=m-1 :al!u@h PRIVMSG clawbot :hello")
    [incoming] = kit.received
    assert (incoming.sender.user_id, incoming.chat_id, incoming.message_id) == ("alice", "alice", "m-1")
    assert incoming.private and incoming.addressed and incoming.text == "hello"


def test_a_channel_line_is_read_only_after_the_bots_nick() -> None:
    kit, _ = feed("@account=alice;msgid=m-2 :al!u@h PRIVMSG #Team :just talking")
    assert kit.received == []
    kit, _ = feed("@account=alice;msgid=m-3 :al!u@h PRIVMSG #Team :clawbot, !status")
    [incoming] = kit.received
    assert (incoming.chat_id, incoming.private, incoming.text) == ("#team", False, "/status")


def test_ctcp_never_reaches_the_kit_and_version_is_answered_by_notice() -> None:
    kit, connection = feed("@account=alice :al!u@h PRIVMSG clawbot :\x01VERSION\x01")
    assert kit.received == [] and connection.sent == ["NOTICE al :\x01VERSION clawgate\x01"]
    kit, connection = feed("@account=alice :al!u@h PRIVMSG clawbot :\x01ACTION waves\x01")
    assert kit.received == [] and connection.sent == []


def test_a_nick_without_an_account_is_a_stranger() -> None:
    kit, connection = feed(":boss!u@h PRIVMSG clawbot :I am the owner", owner=["boss"])
    assert kit.received == [] and connection.sent == [f"PRIVMSG boss :{NOT_LOGGED_IN}"]
    kit, _ = feed(":boss!u@h PRIVMSG clawbot :hi", owner=["boss"], dm_policy="open")
    [incoming] = kit.received  # an open bot talks to them, as `~boss`: never the owner `boss`
    assert incoming.sender.user_id == "~boss" and incoming.chat_id == "~boss"
    assert incoming.message_id.startswith("local-")  # no msgid from the server: a fresh id (at most once)
