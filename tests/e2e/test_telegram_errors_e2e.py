"""Bot API errors the daemon must live through, end to end against FakeTelegram speaking the real protocol:
a group that became a supergroup (400 with `parameters.migrate_to_chat_id`) and another instance
polling the same token (getUpdates 409 Conflict)."""

from __future__ import annotations

import threading

from tests.fakes.anthropic_api import FakeAnthropic, Reply, text
from tests.fakes.telegram_api import FakeTelegram
from tests.telegram_support import replies, telegram, tg_daemon, user_texts, wait_handled  # noqa: F401
from tests.waiting import DEFAULT_TIMEOUT

GROUP, SUPERGROUP, MEMBER = -4242, -1004242, 700
MENTION = "@clawgate_test_bot "


def test_a_reply_to_a_migrated_group_goes_to_the_supergroup_and_the_conversation_follows(
        tg_daemon, telegram: FakeTelegram, fake_model: FakeAnthropic) -> None:
    daemon = tg_daemon(allow_from=[str(MEMBER)])
    telegram.inject_message(GROUP, MENTION + "remember: apples", user_id=MEMBER, chat_type="group")
    telegram.wait_for(lambda: replies(telegram, GROUP) == ["echo: remember: apples"])
    release = threading.Event()

    def held(body: dict) -> Reply:  # the group is upgraded while the answer is being written
        release.wait(DEFAULT_TIMEOUT)
        return text("echo: " + user_texts(body)[-1])

    fake_model.responder = held
    telegram.inject_message(GROUP, MENTION + "and pears", user_id=MEMBER, chat_type="group")
    fake_model.wait_requests(2, timeout=DEFAULT_TIMEOUT)
    # the service messages may come after the reply: the error alone must be enough
    telegram.migrate_group(GROUP, SUPERGROUP, user_id=MEMBER, announce=False)
    release.set()
    telegram.wait_for(lambda: replies(telegram, SUPERGROUP) == ["echo: and pears"])
    refused = [p for name, p in telegram.calls if name == "sendMessage" and p.get("chat_id") == GROUP]
    assert len(refused) == 2  # the first answer, then the one Telegram redirected
    assert replies(telegram, GROUP) == ["echo: remember: apples"]

    telegram.inject_message(SUPERGROUP, MENTION + "what did I say?", user_id=MEMBER, chat_type="supergroup")
    telegram.wait_for(lambda: len(replies(telegram, SUPERGROUP)) == 2)
    assert user_texts(fake_model.requests[-1]) == ["remember: apples", "and pears", "what did I say?"]
    assert len([p for name, p in telegram.calls if name == "sendMessage" and p.get("chat_id") == GROUP]) == 2
    sessions = {p.name for p in (daemon.home / "state/sessions").glob("*.jsonl")}
    assert sessions == {"telegram%3A-4242.jsonl"}  # one conversation, kept across the upgrade


def test_the_service_messages_of_an_upgrade_move_the_conversation_too(tg_daemon, telegram, fake_model) -> None:
    daemon = tg_daemon(allow_from=[str(MEMBER)])
    telegram.inject_message(GROUP, MENTION + "remember: apples", user_id=MEMBER, chat_type="group")
    telegram.wait_for(lambda: len(replies(telegram, GROUP)) == 1)
    telegram.migrate_group(GROUP, SUPERGROUP, user_id=MEMBER)
    telegram.inject_message(SUPERGROUP, MENTION + "what did I say?", user_id=MEMBER, chat_type="supergroup")
    telegram.wait_for(lambda: replies(telegram, SUPERGROUP) == ["echo: what did I say?"])
    assert user_texts(fake_model.requests[-1]) == ["remember: apples", "what did I say?"]
    assert "became supergroup" in daemon.log_text()


def test_another_instance_polling_is_one_clear_line_and_polling_recovers(tg_daemon, telegram, fake_model) -> None:
    daemon = tg_daemon()
    telegram.wait_for(lambda: any(name == "getUpdates" for name, _ in telegram.calls))
    telegram.fail_next("getUpdates", status=409, times=3)  # Telegram's answer while another instance polls
    uid = telegram.inject_message(4242, "are you still there?")
    wait_handled(telegram, uid)
    telegram.wait_for(lambda: replies(telegram, 4242) == ["echo: are you still there?"])
    conflicts = [line for line in daemon.log_text().splitlines() if "getUpdates failed" in line]
    assert len(conflicts) == 1, conflicts  # three refused polls, one line
    assert "another bot instance or a webhook is using this token" in conflicts[0]
    assert "retry 1 in 1.0s" in conflicts[0]  # it backs off instead of hammering the API
    assert "Traceback" not in daemon.log_text()
