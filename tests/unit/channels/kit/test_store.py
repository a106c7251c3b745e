"""The kit's per-channel store: channels do not see each other's rows, and older releases' rows carry over once."""

from __future__ import annotations

import sqlite3

from clawgate.agent.core.schema import STATE, migrate
from clawgate.channels.kit.store import ChannelStore


def fresh() -> sqlite3.Connection:
    db = sqlite3.connect(":memory:", isolation_level=None)
    migrate(db, STATE)
    return db


def test_each_channel_has_its_own_rows() -> None:
    db = fresh()
    telegram, discord = ChannelStore(db, "telegram"), ChannelStore(db, "discord")
    telegram.save_cursor("41")
    assert telegram.cursor() == "41" and discord.cursor() is None
    assert telegram.first_time("command:1:2") and not telegram.first_time("command:1:2")
    assert discord.first_time("command:1:2")  # the same platform id on another channel is another event
    telegram.mark_refused("9")
    assert telegram.refused_before("9") and not discord.refused_before("9")
    telegram.record_chunk("out_1", 2)
    assert telegram.chunks_sent("out_1") == 2 and discord.chunks_sent("out_1") == 0
    telegram.bind_owner("boss", "7")
    telegram.bind_owner("boss", "8")  # bound once, for good
    assert telegram.owner_ids() == {"boss": "7"} and discord.owner_ids() == {}
    telegram.record_migration("-1", "-100")
    telegram.record_migration("-100", "-200")
    assert telegram.session_chat("-200") == "-1" and discord.session_chat("-200") == "-200"
    discord.kv_set("resume", "abc")
    assert discord.kv_get("resume") == "abc" and telegram.kv_get("resume") is None
    discord.set_owner_chat("u1", "dm1")
    assert discord.owner_chats() == {"u1": "dm1"} and telegram.owner_chats() == {}


def test_telegram_s_own_tables_of_earlier_versions_carry_over_once() -> None:
    """A file at schema 3 (Telegram's telegram_* tables) reaches the channel tables by migration 4."""
    db = sqlite3.connect(":memory:", isolation_level=None)
    db.executescript("""
CREATE TABLE telegram_state (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE telegram_sent (outbound_id TEXT PRIMARY KEY, chunks INTEGER NOT NULL, updated_at REAL NOT NULL);
CREATE TABLE telegram_seen (key TEXT PRIMARY KEY, seen_at REAL NOT NULL);
CREATE TABLE telegram_refused (user_id TEXT PRIMARY KEY, refused_at REAL NOT NULL);
CREATE TABLE telegram_owner_ids (username TEXT PRIMARY KEY, user_id TEXT NOT NULL, bound_at REAL NOT NULL);
INSERT INTO telegram_state VALUES ('telegram:offset', '1234'), ('migrated:-5', '-1005');
INSERT INTO telegram_sent VALUES ('out_1', 2, 1.0);
INSERT INTO telegram_seen VALUES ('callback:9', 1.0);
INSERT INTO telegram_refused VALUES ('666', 1.0);
INSERT INTO telegram_owner_ids VALUES ('boss', '7', 1.0);
PRAGMA user_version = 3;
""")
    migrate(db, STATE)
    telegram = ChannelStore(db, "telegram")
    assert telegram.cursor() == "1234" and telegram.session_chat("-5") == "-1005"
    assert telegram.chunks_sent("out_1") == 2 and not telegram.first_time("callback:9")
    assert telegram.refused_before("666") and telegram.owner_ids() == {"boss": "7"}
    assert not {"telegram_state", "telegram_sent", "telegram_seen", "telegram_refused", "telegram_owner_ids"} & {
        row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    telegram.save_cursor("1300")
    migrate(db, STATE)  # every start: nothing carried over twice
    assert ChannelStore(db, "telegram").cursor() == "1300"
