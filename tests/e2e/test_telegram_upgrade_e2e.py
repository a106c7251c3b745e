"""A state database written by the previous release (Telegram's own telegram_* tables) keeps working after
the upgrade to the channel kit: the update offset, owners bound by username, paired users, refused
strangers, handled commands and moved groups all carry over, through the real daemon and the fake Bot API."""

from __future__ import annotations

import json
import sqlite3
import time

from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.telegram_api import FakeTelegram
from tests.harness import DaemonProcess
from tests.telegram_support import POLL_TIMEOUT, RETRY_BASE, control_send_window, replies, telegram, wait_handled  # noqa: F401
from tests.waiting import wait_past

# The tables as the previous release created them (channels/telegram/state.py and pairing.py of 0.1.0).
SHIPPED = """
CREATE TABLE IF NOT EXISTS telegram_state (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS telegram_sent (outbound_id TEXT PRIMARY KEY, chunks INTEGER NOT NULL, updated_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS telegram_seen (key TEXT PRIMARY KEY, seen_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS telegram_refused (user_id TEXT PRIMARY KEY, refused_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS telegram_owner_ids (username TEXT PRIMARY KEY, user_id TEXT NOT NULL, bound_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS pairing_requests (channel TEXT NOT NULL, code TEXT NOT NULL, user_id TEXT NOT NULL, username TEXT,
    chat_id TEXT NOT NULL, created_at REAL NOT NULL, expires_at REAL NOT NULL, status TEXT NOT NULL DEFAULT 'pending',
    code_sent INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (channel, code));
CREATE TABLE IF NOT EXISTS pairing_allowed (channel TEXT NOT NULL, user_id TEXT NOT NULL, username TEXT, chat_id TEXT,
    approved_at REAL NOT NULL, notified INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (channel, user_id));
"""
BOSS, IMPOSTOR, FRIEND, STRANGER = 777, 888, 555, 666
OLD_GROUP, SUPERGROUP = -100100, -100200
OFFSET = 40


def write_old_state(path: str) -> None:
    db = sqlite3.connect(path, isolation_level=None)
    now = time.time()
    db.executescript(SHIPPED)
    db.execute("INSERT INTO telegram_state VALUES ('telegram:offset', ?)", (str(OFFSET),))
    db.execute("INSERT INTO telegram_state VALUES (?, ?)", (f"migrated:{SUPERGROUP}", str(OLD_GROUP)))
    db.execute("INSERT INTO telegram_owner_ids VALUES ('boss', ?, ?)", (str(BOSS), now))
    db.execute("INSERT INTO telegram_refused VALUES (?, ?)", (str(STRANGER), now))
    db.execute("INSERT INTO telegram_seen VALUES (?, ?)", (f"command:{BOSS}:1", now))  # the boss's first message
    db.execute("INSERT INTO pairing_allowed VALUES ('telegram', ?, 'friend', ?, ?, 1)", (str(FRIEND), str(FRIEND), now))
    db.close()


def test_state_of_the_previous_release_survives_the_upgrade(tmp_path, telegram: FakeTelegram,
                                                            fake_model: FakeAnthropic) -> None:
    settings = {"base_url": telegram.base_url, "poll_timeout_seconds": POLL_TIMEOUT, "dm_policy": "allowlist",
                "owner": ["@boss"], "retry_base_seconds": RETRY_BASE}
    env = {"TELEGRAM_BOT_TOKEN": telegram.token, **{f"CLAWGATE_CHANNELS__TELEGRAM__{k.upper()}": v if isinstance(v, str)
                                                     else json.dumps(v) for k, v in settings.items()}}
    daemon = DaemonProcess(tmp_path / "home", anthropic_url=fake_model.base_url, env=env)
    daemon.init()
    daemon.home.joinpath("state").mkdir(parents=True, exist_ok=True)
    write_old_state(str(daemon.home / "state" / "clawgate.db"))
    try:
        daemon.start()
        # the offset: polling resumes where the old release stopped
        telegram.wait_for(lambda: any(name == "getUpdates" for name, _ in telegram.calls))
        first_poll = next(params for name, params in telegram.calls if name == "getUpdates")
        assert int(first_poll["offset"]) == OFFSET

        # a command the old release handled (message 1 of the boss's chat) is not answered again
        handled = telegram.inject_message(BOSS, "/status", username="boss")
        wait_handled(telegram, handled)
        telegram.inject_message(BOSS, "/status", username="boss")
        telegram.wait_for(lambda: len(replies(telegram, BOSS)) == 1)
        # the owner bound by username: the id it was bound to is the owner, another id with the name is not
        telegram.inject_message(BOSS, "hello from the boss", username="boss")
        telegram.wait_for(lambda: "echo: hello from the boss" in replies(telegram, BOSS))
        telegram.inject_message(IMPOSTOR, "let me in", username="boss")
        telegram.wait_for(lambda: len(replies(telegram, IMPOSTOR)) == 1)
        assert "not on its list" in replies(telegram, IMPOSTOR)[0]
        # a paired user is still admitted; a stranger refused before stays unanswered
        telegram.inject_message(FRIEND, "still friends?", username="friend")
        telegram.wait_for(lambda: "echo: still friends?" in replies(telegram, FRIEND))
        quiet = telegram.inject_message(STRANGER, "hello again")
        wait_handled(telegram, quiet)
        wait_past(control_send_window())
        assert replies(telegram, STRANGER) == []
        # a group that became a supergroup keeps its conversation
        telegram.inject_message(SUPERGROUP, f"@{telegram.bot_user['username']} same group?", user_id=BOSS,
                                username="boss", chat_type="supergroup")
        telegram.wait_for(lambda: any("same group?" in t for t in replies(telegram, SUPERGROUP)))
        assert (daemon.home / f"state/sessions/telegram%3A{OLD_GROUP}.jsonl").exists()
    finally:
        daemon.kill()
    db = sqlite3.connect(daemon.home / "state" / "clawgate.db")
    tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert not {t for t in tables if t.startswith("telegram_")}  # carried over once, then dropped
    assert db.execute("SELECT count(*) FROM channel_owner_ids WHERE channel='telegram'").fetchone() == (1,)
