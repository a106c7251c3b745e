"""Who reaches the agent over Telegram, end to end: pairing, allowlist, groups and forum topics."""

from __future__ import annotations

import re

from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.telegram_api import FakeTelegram
from tests.telegram_support import control_send_window, replies, telegram, tg_daemon, user_texts, wait_handled  # noqa: F401
from tests.waiting import wait_past

STRANGER = 5551


def test_pairing_code_then_cli_approval_admits_the_user(tg_daemon, telegram: FakeTelegram,
                                                          fake_model: FakeAnthropic) -> None:
    daemon = tg_daemon(dm_policy="pairing")
    telegram.inject_message(STRANGER, "hi, who are you?", username="newbie")
    telegram.wait_for(lambda: len(replies(telegram, STRANGER)) == 1)
    code = re.search(r"\b([A-Z2-9]{8})\b", replies(telegram, STRANGER)[0]).group(1)
    assert not set(code) & set("01OIL")
    later = telegram.inject_message(STRANGER, "hello?? anyone")
    wait_handled(telegram, later)
    wait_past(control_send_window())  # a reply to it would have gone out, retries included
    assert len(replies(telegram, STRANGER)) == 1  # one reply per code, then silence
    assert fake_model.requests == []  # nothing of theirs reached the model

    listed = daemon.cli("pairing", "list")
    assert listed.returncode == 0 and code in listed.stdout and "@newbie" in listed.stdout
    wrong = daemon.cli("pairing", "approve", "telegram", "ZZZZ2222")
    assert wrong.returncode == 1 and wrong.stderr.count("\n") == 1 and "Traceback" not in wrong.stderr
    assert "pairing list" in wrong.stderr
    approved = daemon.cli("pairing", "approve", "telegram", code.lower())
    assert approved.returncode == 0, approved.stderr
    assert str(STRANGER) in approved.stdout
    telegram.wait_for(lambda: any("approved" in t for t in replies(telegram, STRANGER)))

    telegram.inject_message(STRANGER, "now can we talk?")
    telegram.wait_for(lambda: "echo: now can we talk?" in replies(telegram, STRANGER))
    assert len(fake_model.requests) == 1
    assert user_texts(fake_model.requests[0]) == ["now can we talk?"]  # earlier messages were never queued
    assert daemon.cli("pairing", "list").stdout.strip() == "no pending pairing requests"


def test_strangers_flooding_pairing_cannot_lock_out_a_real_user(tg_daemon, telegram, fake_model) -> None:
    """With room for three pending codes, a fourth stranger pushes out the oldest code instead of
    being refused; the pushed-out stranger is told once when to ask again; a real user still pairs."""
    daemon = tg_daemon(dm_policy="pairing", pairing_max_pending=3)
    for user in range(9001, 9005):
        last = telegram.inject_message(user, "let me in")
    wait_handled(telegram, last)
    telegram.wait_for(lambda: all(len(replies(telegram, u)) == 1 for u in range(9001, 9005)))
    codes = {u: re.search(r"\b([A-Z2-9]{8})\b", replies(telegram, u)[0]).group(1) for u in range(9001, 9005)}
    listed = daemon.cli("pairing", "list").stdout
    assert [c for c in codes.values() if c in listed] == [codes[9002], codes[9003], codes[9004]]
    # the first stranger, pushed out, asks twice: one notice with the wait, then silence; no new code
    for text in ("hello?", "hello??"):
        last = telegram.inject_message(9001, text)
    wait_handled(telegram, last)
    telegram.wait_for(lambda: len(replies(telegram, 9001)) == 2)
    wait_past(control_send_window())  # a reply to it would have gone out, retries included
    assert len(replies(telegram, 9001)) == 2 and "send a message again in 10 minutes" in replies(telegram, 9001)[1]
    assert daemon.cli("pairing", "approve", "telegram", codes[9001]).returncode == 1
    # a real user arriving during the flood gets a code and is admitted
    telegram.inject_message(9100, "hi, it's me", username="friend")
    telegram.wait_for(lambda: len(replies(telegram, 9100)) == 1)
    code = re.search(r"\b([A-Z2-9]{8})\b", replies(telegram, 9100)[0]).group(1)
    assert daemon.cli("pairing", "approve", "telegram", code).returncode == 0
    telegram.wait_for(lambda: any("approved" in t for t in replies(telegram, 9100)))
    telegram.inject_message(9100, "now?")
    telegram.wait_for(lambda: "echo: now?" in replies(telegram, 9100))
    assert len(fake_model.requests) == 1  # no stranger's message reached the model


def test_allowlist_refuses_once_then_stays_silent(tg_daemon, telegram, fake_model) -> None:
    tg_daemon(dm_policy="allowlist", allow_from=["111", "@Alice"])
    for text in ("hello", "hello??", "HELLO!!!"):
        last = telegram.inject_message(222, text)
    wait_handled(telegram, last)
    wait_past(control_send_window())  # a reply to it would have gone out, retries included
    assert len(replies(telegram, 222)) == 1 and "private" in replies(telegram, 222)[0]
    telegram.inject_message(111, "by id")
    telegram.inject_message(333, "by name", username="alice")
    telegram.wait_for(lambda: replies(telegram, 111) == ["echo: by id"] and replies(telegram, 333) == ["echo: by name"])
    assert sorted(user_texts(r)[-1] for r in fake_model.requests) == ["by id", "by name"]


def test_groups_answer_only_when_addressed(tg_daemon, telegram, fake_model) -> None:
    daemon = tg_daemon(allow_from=["700"])
    group = -100500
    quiet = telegram.inject_message(group, "just chatting among ourselves", user_id=700, chat_type="supergroup")
    wait_handled(telegram, quiet)
    assert fake_model.requests == []
    telegram.inject_message(group, "@clawgate_test_bot what time is it?", user_id=700, chat_type="supergroup")
    telegram.wait_for(lambda: len(replies(telegram, group)) == 1)
    first = [m for m in telegram.sent if m["chat_id"] == group][-1]
    assert first["plain_text"] == "echo: what time is it?"  # the mention itself is not sent to the model
    assert first["reply_to_message_id"] is not None  # answers quote the question in groups
    telegram.inject_message(group, "and tomorrow?", user_id=700, chat_type="supergroup",
                            reply_to_message_id=first["message_id"])
    telegram.wait_for(lambda: len(replies(telegram, group)) == 2)
    # someone not on the list mentions the bot: one refusal, no model call
    before = len(fake_model.requests)
    other = telegram.inject_message(group, "@clawgate_test_bot obey me", user_id=701, chat_type="supergroup")
    wait_handled(telegram, other)
    telegram.wait_for(lambda: len(replies(telegram, group)) == 3)
    assert "private" in replies(telegram, group)[-1] and len(fake_model.requests) == before
    # a forum topic is its own session, and replies go to the topic
    telegram.inject_message(group, "@clawgate_test_bot in the topic", user_id=700, chat_type="supergroup",
                            message_thread_id=77)
    telegram.wait_for(lambda: len(replies(telegram, group)) == 4)
    assert [m for m in telegram.sent if m["chat_id"] == group][-1]["message_thread_id"] == 77
    sessions = {p.name for p in (daemon.home / "state/sessions").glob("*.jsonl")}
    assert {"telegram%3A-100500.jsonl", "telegram%3A-100500%3A77.jsonl"} <= sessions
