"""The Telegram channel end to end: the real daemon process, real python-telegram-bot, FakeTelegram.

Each test injects what a person would send, and reads what the bot really sent over HTTP.
"""

from __future__ import annotations

import re
import sqlite3
import threading

from tests.fakes.anthropic_api import FakeAnthropic, Reply, text, tool_use
from tests.fakes.telegram_api import MAX_MESSAGE_LENGTH, FakeTelegram
from tests.telegram_support import (  # noqa: F401
    CHAT,
    POLL_TIMEOUT,
    replies,
    resend_window,
    telegram,
    tg_daemon,
    user_texts,
    wait_handled,
)
from tests.waiting import DEFAULT_TIMEOUT, wait_past


# conversation -------------------------------------------------------------------------------------
def test_conversation_with_a_tool_call(tg_daemon, telegram: FakeTelegram, fake_model: FakeAnthropic) -> None:
    daemon = tg_daemon()
    own = daemon.guest_workspace(f"telegram:{CHAT}")  # no owner configured: the chat is a guest's, with its own files
    own.mkdir(parents=True)
    (own / "notes.txt").write_text("hello")
    fake_model.enqueue(tool_use("list_dir", {"path": "."}), text("I see **notes.txt** in `.`"))
    telegram.inject_message(CHAT, "what is in my workspace?")
    telegram.wait_for(lambda: len(replies(telegram, CHAT)) == 1)
    reply = [m for m in telegram.sent if m["chat_id"] == CHAT][-1]
    assert reply["plain_text"] == "I see notes.txt in ."
    assert {(e["type"], e["offset"], e["length"]) for e in reply["entities"]} == {("bold", 6, 9), ("code", 19, 1)}
    tool_result = fake_model.requests[-1]["messages"][-1]["content"][0]
    assert tool_result["type"] == "tool_result" and "notes.txt" in tool_result["content"]
    assert user_texts(fake_model.requests[0]) == ["what is in my workspace?"]
    # while it worked: typing, and a status message naming the step that was removed afterwards
    assert any(a["chat_id"] == CHAT and a["action"] == "typing" for a in telegram.actions)
    status = [m for m in telegram.sent if m["text"].startswith("⚙️")]
    assert len(status) == 1 and "list_dir" in status[0]["text"]
    telegram.wait_for(lambda: {"chat_id": CHAT, "message_id": status[0]["message_id"]} in telegram.deleted)
    assert (daemon.home / "state/sessions/telegram%3A4242.jsonl").exists()
    names = [c["command"] for c in telegram.commands[-1]["commands"]]
    assert names == ["start", "help", "new", "status", "stop", "tasks", "undo"]


def test_typing_is_refreshed_while_busy_and_stops_after(tg_daemon, telegram, fake_model) -> None:
    tg_daemon(typing_interval_seconds=0.3)
    typing = lambda: [a for a in telegram.actions if a["chat_id"] == CHAT]  # noqa: E731
    answer = threading.Event()

    def think(body: dict) -> Reply:  # the model answers once typing was refreshed: no race with a clock
        answer.wait(DEFAULT_TIMEOUT)
        return text("done thinking")

    fake_model.responder = think
    telegram.inject_message(CHAT, "think hard")
    telegram.wait_for(lambda: len(typing()) >= 3)
    answer.set()
    telegram.wait_for(lambda: replies(telegram, CHAT) == ["done thinking"])
    count = len(typing())
    wait_past(0.3)  # the typing interval
    assert len(typing()) <= count + 1  # at most one tick that was already under way


def test_progress_edits_are_throttled(tg_daemon, telegram, fake_model) -> None:
    tg_daemon(progress_interval_seconds=5)  # four edits would need 15 s of steps: far more than five list_dirs take
    fake_model.enqueue(*[tool_use("list_dir", {"path": "."}) for _ in range(5)], text("five looks"))
    telegram.inject_message(CHAT, "look five times")
    telegram.wait_for(lambda: replies(telegram, CHAT) == ["five looks"])
    status = [m for m in telegram.sent if m["text"].startswith("⚙️")]
    assert len(status) == 1
    edits = [e for e in telegram.edits if e["message_id"] == status[0]["message_id"]]
    assert len(edits) < 4  # coalesced, not one edit per step
    telegram.wait_for(lambda: any(d["message_id"] == status[0]["message_id"] for d in telegram.deleted))


# replies --------------------------------------------------------------------------------------------
def test_long_reply_arrives_as_ordered_chunks(tg_daemon, telegram, fake_model) -> None:
    tg_daemon()
    paragraphs = [f"Paragraph {i}: " + ("lorem ipsum dolor sit amet " * 14).strip() for i in range(22)]
    code = "```python\n" + "\n".join(f"print('line {i}')" for i in range(60)) + "\n```"
    body = "\n\n".join(paragraphs[:11] + [code] + paragraphs[11:])
    assert len(body) > 9000
    fake_model.enqueue(text(body))
    telegram.inject_message(CHAT, "write a lot")
    telegram.wait_for(lambda: "Paragraph 21:" in "\n".join(replies(telegram, CHAT)))  # the last chunk
    chunks = replies(telegram, CHAT)
    assert 3 <= len(chunks) <= 4
    assert all(len(c) <= MAX_MESSAGE_LENGTH for c in chunks)
    joined = "\n".join(chunks)
    order = [int(n) for n in re.findall(r"Paragraph (\d+):", joined)]
    assert order == list(range(22))  # every paragraph exactly once, in order
    holder = [c for c in chunks if "print('line 0')" in c]
    assert len(holder) == 1 and "print('line 59')" in holder[0]  # the code block was kept whole
    sent = [m for m in telegram.sent if m["chat_id"] == CHAT]
    assert any(e["type"] == "pre" for m in sent for e in m.get("entities") or [])


def test_rejected_formatting_is_resent_as_plain_text(tg_daemon, telegram, fake_model) -> None:
    tg_daemon()
    telegram.fail_next("sendMessage", status=400,
                       description="Bad Request: can't parse entities: Can't find end of the entity starting at byte offset 0")
    fake_model.enqueue(text("**important** news"))
    telegram.inject_message(CHAT, "tell me")
    telegram.wait_for(lambda: len(replies(telegram, CHAT)) == 1)
    attempts = [p for name, p in telegram.calls if name == "sendMessage" and p.get("chat_id") == CHAT]
    assert len(attempts) == 2
    assert attempts[0].get("entities") and not attempts[1].get("entities")
    assert replies(telegram, CHAT) == ["important news"]


def test_flood_wait_is_honoured_and_the_reply_arrives_once(tg_daemon, telegram, fake_model) -> None:
    tg_daemon()
    telegram.fail_next("sendMessage", status=429, retry_after=1)
    fake_model.enqueue(text("patience pays"))
    telegram.inject_message(CHAT, "hurry")
    telegram.wait_for(lambda: len(replies(telegram, CHAT)) == 1)
    wait_past(resend_window(retry_after=1))  # a duplicate would come after the flood wait or a retry's backoff
    assert replies(telegram, CHAT) == ["patience pays"]
    attempts = [i for i, (name, p) in enumerate(telegram.calls) if name == "sendMessage"]
    assert len(attempts) == 2


def test_server_errors_are_retried_and_a_failing_chat_does_not_delay_others(tg_daemon, telegram, fake_model) -> None:
    tg_daemon()
    telegram.fail_next("sendMessage", status=502, times=2)
    telegram.inject_message(1, "first")
    telegram.wait_for(lambda: replies(telegram, 1) == ["echo: first"])
    assert sum(1 for name, p in telegram.calls if name == "sendMessage" and p.get("chat_id") == 1) == 3
    # chat 2 waits out a long flood limit; chat 3 is answered meanwhile (before chat 2: order, not a clock)
    telegram.fail_next("sendMessage", status=429, retry_after=5)
    telegram.inject_message(2, "slow lane")
    telegram.wait_for(lambda: any(name == "sendMessage" and p.get("chat_id") == 2 for name, p in telegram.calls))
    telegram.inject_message(3, "fast lane")
    telegram.wait_for(lambda: replies(telegram, 3) == ["echo: fast lane"])
    telegram.wait_for(lambda: replies(telegram, 2) == ["echo: slow lane"])
    order = [m["chat_id"] for m in telegram.sent if m["chat_id"] in (2, 3)]
    assert order == [3, 2]


def test_a_reply_the_channel_gave_up_on_is_retried_after_the_configured_delay(tg_daemon, telegram, fake_model) -> None:
    daemon = tg_daemon(send_retries=0, env={"CLAWGATE_CHANNELS__DELIVERY_RETRY_SECONDS": "0.3"})
    telegram.fail_next("sendMessage", status=502)  # the channel's own send: no retries, handed back at once
    telegram.inject_message(1, "try again")
    telegram.wait_for(lambda: replies(telegram, 1) == ["echo: try again"])
    assert sum(1 for name, p in telegram.calls if name == "sendMessage" and p.get("chat_id") == 1) == 2
    retried = [line for line in daemon.output if "not delivered" in line]
    assert len(retried) == 1 and "attempt 1, next in 0.3s" in retried[0], retried  # channels.delivery_retry_seconds


def test_blocked_by_user_is_permanent_and_not_retried(tg_daemon, telegram, fake_model) -> None:
    daemon = tg_daemon()
    telegram.fail_next("sendMessage", status=403)
    uid = telegram.inject_message(CHAT, "hi")
    wait_handled(telegram, uid)
    telegram.wait_for(lambda: "failed for good" in daemon.log_text())
    wait_past(resend_window())  # a retry would come after the dispatcher's backoff
    # the answer once, then the one notice saying it was not delivered (here the fake lets it through)
    sends = [p for name, p in telegram.calls if name == "sendMessage" and p.get("chat_id") == CHAT]
    assert len(sends) == 2 and "could not be delivered here" in str(sends[1].get("text")), sends
    assert daemon.log_text().count("failed for good") == 1


# delivery you can trust -----------------------------------------------------------------------------
def test_the_same_update_delivered_twice_is_answered_once(tg_daemon, telegram, fake_model) -> None:
    tg_daemon()
    uid = telegram.inject_message(CHAT, "only once please")
    telegram.wait_for(lambda: len(replies(telegram, CHAT)) == 1)
    telegram.redeliver(uid)
    telegram.wait_for(lambda: telegram.pending_updates() == 0)
    wait_handled(telegram, uid)
    marker = telegram.inject_message(CHAT, "and this")  # handled after the redelivery, in order
    telegram.wait_for(lambda: len(replies(telegram, CHAT)) == 2)
    wait_handled(telegram, marker)
    assert replies(telegram, CHAT) == ["echo: only once please", "echo: and this"]
    assert [user_texts(r)[-1] for r in fake_model.requests] == ["only once please", "and this"]


def test_crash_between_receive_and_accept_loses_nothing(tg_daemon, telegram, fake_model) -> None:
    daemon = tg_daemon()
    warm = telegram.inject_message(CHAT, "warm up")
    telegram.wait_for(lambda: len(replies(telegram, CHAT)) == 1)
    wait_handled(telegram, warm)
    db = sqlite3.connect(daemon.home / "state/clawgate.db", timeout=1, isolation_level=None)
    pending = lambda: db.execute("SELECT count(*) FROM outbox WHERE status='pending'").fetchone()[0]  # noqa: E731
    telegram.wait_for(lambda: pending() == 0)  # the warm-up reply is marked delivered
    # Hold the database's write lock: the daemon receives the next update but cannot accept it.
    db.execute("BEGIN IMMEDIATE")
    try:
        polls = sum(1 for name, _ in telegram.calls if name == "getUpdates")
        uid = telegram.inject_message(CHAT, "do not lose me")
        wait_past(POLL_TIMEOUT)  # an unblocked daemon would have polled again within one long poll
        assert sum(1 for name, _ in telegram.calls if name == "getUpdates") == polls
        assert telegram.confirmed_offset <= uid
        daemon.kill()  # SIGKILL: received, not accepted, offset not confirmed
    finally:
        db.execute("ROLLBACK")
        db.close()
    daemon.start()
    telegram.wait_for(lambda: len(replies(telegram, CHAT)) == 2, timeout=15)
    wait_handled(telegram, uid)
    wait_past(resend_window())  # a duplicate would come after the dispatcher's backoff
    assert replies(telegram, CHAT) == ["echo: warm up", "echo: do not lose me"]
    assert [user_texts(r)[-1] for r in fake_model.requests].count("do not lose me") == 1


def test_token_never_appears_in_the_log(tg_daemon, fake_model) -> None:
    token = "7012345678:AAF0-secretSECRETsecretSECRET_x9"
    with FakeTelegram(token=token) as fake:
        daemon = tg_daemon(fake, env={"CLAWGATE_LOG__LEVEL": "debug"})
        fake.fail_next("getUpdates", status=502)
        fake.fail_next("sendMessage", status=429, retry_after=1)
        fake.inject_message(CHAT, "hello")
        fake.wait_for(lambda: len(replies(fake, CHAT)) == 1)
        daemon.terminate()
    log = daemon.log_text()
    assert "getUpdates failed" in log and "rate-limited" in log  # the failures were logged ...
    assert token not in log and "secretSECRET" not in log  # ... without the token
