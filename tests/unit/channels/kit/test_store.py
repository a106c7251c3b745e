"""The kit's per-channel store: channels do not see each other's rows, and older releases' rows carry over once."""

from __future__ import annotations

import sqlite3

from clawgate.channels.kit.store import ChannelStore, create_tables


def fresh() -> sqlite3.Connection:
    db = sqlite3.connect(":memory:", isolation_level=None)
    create_tables(db)
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


def test_the_oldest_offset_in_the_shared_kv_table_carries_over_once() -> None:
    db = sqlite3.connect(":memory:", isolation_level=None)
    db.execute("CREATE TABLE kv (key TEXT PRIMARY KEY, value TEXT)")
    db.execute("INSERT INTO kv VALUES ('telegram:offset', '1234'), ('other', 'kept')")
    create_tables(db)
    assert ChannelStore(db, "telegram").cursor() == "1234"
    assert db.execute("SELECT key FROM kv").fetchall() == [("other",)]
    ChannelStore(db, "telegram").save_cursor("1300")
    create_tables(db)  # every start: nothing carried over twice
    assert ChannelStore(db, "telegram").cursor() == "1300"
