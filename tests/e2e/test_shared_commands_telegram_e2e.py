"""A guest's /stop and /new in a Telegram group the owner works in, through the real daemon and the fake
Bot API: the owner's run and history stay as they are; the guest's /stop reaches only the guest's own
message (queued or running), and every answer lands on the command it answers."""

from __future__ import annotations

import threading

from tests.fakes.anthropic_api import FakeAnthropic, Reply, text
from tests.fakes.telegram_api import FakeTelegram
from tests.commands_support import wait_queued
from tests.telegram_support import telegram, tg_daemon, user_texts, wait_handled  # noqa: F401
from tests.waiting import DEFAULT_TIMEOUT, wait_until

GROUP, OWNER, GUEST = -100777, 700, 701
BOT = "@clawgate_test_bot"


def _said(telegram: FakeTelegram) -> list[dict]:
    return [m for m in telegram.sent if m["chat_id"] == GROUP and not m["text"].startswith(("⚙️", "⏳"))]


def _message_id(telegram: FakeTelegram, update_id: int) -> int:
    return int(telegram._updates[update_id]["message"]["message_id"])


def _answer_to(telegram: FakeTelegram, update_id: int) -> dict:
    """The bot's message that replies to the message of `update_id`."""
    mid = _message_id(telegram, update_id)
    telegram.wait_for(lambda: any(m["reply_to_message_id"] == mid for m in _said(telegram)))
    return next(m for m in _said(telegram) if m["reply_to_message_id"] == mid)


def test_a_guest_stops_only_their_own_work_and_cannot_reset_the_owners_group(tg_daemon, telegram,
                                                                            fake_model: FakeAnthropic) -> None:
    daemon = tg_daemon(owner=[str(OWNER)], allow_from=[str(GUEST)])
    owner_done, guest_done = threading.Event(), threading.Event()

    def held(body: dict) -> Reply:
        asked = user_texts(body)[-1]
        if "owner's long job" in asked:
            owner_done.wait(DEFAULT_TIMEOUT)
            return text("the owner's job is done")
        if "guest's long job" in asked:
            guest_done.wait(DEFAULT_TIMEOUT)
            return text("this guest answer comes too late")
        return text("echo: " + asked)

    fake_model.responder = held
    owners = telegram.inject_message(GROUP, f"{BOT} the owner's long job", user_id=OWNER, chat_type="supergroup")
    fake_model.wait_requests(1, timeout=DEFAULT_TIMEOUT)

    # the guest's /stop while the owner's run goes: it says so, and the owner's run goes on
    stop = telegram.inject_message(GROUP, "/stop", user_id=GUEST, chat_type="supergroup")
    assert "someone else's" in _answer_to(telegram, stop)["plain_text"]
    # the guest's /new: one line, nothing archived
    new = telegram.inject_message(GROUP, f"/new@{BOT[1:]}", user_id=GUEST, chat_type="supergroup")
    assert _answer_to(telegram, new)["plain_text"].startswith("Only the owner can start this shared conversation")
    assert not list((daemon.home / "state/sessions").glob("*.archived"))

    # the guest's own message waits behind the owner's run; their /stop takes it out of the queue
    queued = telegram.inject_message(GROUP, f"{BOT} the guest's question", user_id=GUEST, chat_type="supergroup")
    wait_handled(telegram, queued)
    wait_queued(daemon, f"telegram:{GROUP}")
    queued_stop = telegram.inject_message(GROUP, "/stop", user_id=GUEST, chat_type="supergroup")
    assert _answer_to(telegram, queued_stop)["plain_text"] == "Cancelled before it started (stopped by /stop)."

    owner_done.set()
    assert _answer_to(telegram, owners)["plain_text"] == "the owner's job is done"  # never stopped
    assert all("the guest's question" not in user_texts(body) for body in fake_model.requests)

    # the guest's own run: their /stop stops it, and "Stopped." answers that /stop
    guests = telegram.inject_message(GROUP, f"{BOT} the guest's long job", user_id=GUEST, chat_type="supergroup")
    fake_model.wait_requests(2, timeout=DEFAULT_TIMEOUT)
    running_stop = telegram.inject_message(GROUP, "/stop", user_id=GUEST, chat_type="supergroup")
    assert _answer_to(telegram, running_stop)["plain_text"] == "Stopped."
    guest_done.set()
    # the chat goes on, and the owner's exchange is still in the conversation the next run sees
    after = telegram.inject_message(GROUP, f"{BOT} still there?", user_id=OWNER, chat_type="supergroup")
    assert _answer_to(telegram, after)["plain_text"] == "echo: still there?"
    seen = user_texts(fake_model.requests[-1])
    assert any("the owner's long job" in t for t in seen) and "this guest answer comes too late" not in str(
        fake_model.requests[-1])
    wait_until(lambda: all(m["plain_text"] != "this guest answer comes too late" for m in _said(telegram)),
               "no late answer")
