"""Commands and approval buttons on Telegram, end to end through the real daemon."""

from __future__ import annotations

import threading

from tests.fakes.anthropic_api import FakeAnthropic, Reply, text, tool_use
from tests.fakes.telegram_api import FakeTelegram
from tests.telegram_support import CHAT, replies, telegram, tg_daemon, user_texts, wait_handled  # noqa: F401
from tests.waiting import DEFAULT_TIMEOUT


def test_new_starts_a_fresh_session(tg_daemon, telegram: FakeTelegram, fake_model: FakeAnthropic) -> None:
    daemon = tg_daemon()
    telegram.inject_message(CHAT, "remember: apples")
    telegram.wait_for(lambda: len(replies(telegram, CHAT)) == 1)
    telegram.inject_message(CHAT, "/new")
    telegram.wait_for(lambda: len(replies(telegram, CHAT)) == 2)
    assert replies(telegram, CHAT)[1].startswith("Started a new conversation")
    telegram.inject_message(CHAT, "what did I say?")
    telegram.wait_for(lambda: len(replies(telegram, CHAT)) == 3)
    assert user_texts(fake_model.requests[-1]) == ["what did I say?"]  # "apples" is gone from the context
    assert len(fake_model.requests) == 2  # the command itself never reached the model
    assert list((daemon.home / "state/sessions").glob("telegram%3A4242.*.archived"))


def test_stop_cancels_the_running_turn_and_the_chat_goes_on(tg_daemon, telegram, fake_model) -> None:
    tg_daemon()
    late = threading.Event()

    def held(body: dict) -> Reply:  # the first answer is held until /stop was answered: it never waited for it
        if "take your time" in user_texts(body):
            late.wait(DEFAULT_TIMEOUT)
            return text("this answer comes too late")
        return text("echo: " + user_texts(body)[-1])

    fake_model.responder = held
    telegram.inject_message(CHAT, "take your time")
    fake_model.wait_requests(1, timeout=DEFAULT_TIMEOUT)
    telegram.inject_message(CHAT, "/stop")
    telegram.wait_for(lambda: replies(telegram, CHAT) == ["Stopped."])
    late.set()
    telegram.inject_message(CHAT, "/stop")
    telegram.wait_for(lambda: len(replies(telegram, CHAT)) == 2)
    assert replies(telegram, CHAT)[1] == "Nothing is running right now."
    telegram.inject_message(CHAT, "still there?")
    telegram.wait_for(lambda: len(replies(telegram, CHAT)) == 3)
    assert replies(telegram, CHAT)[2] == "echo: still there?"
    assert "this answer comes too late" not in replies(telegram, CHAT)


def test_start_status_and_tasks(tg_daemon, telegram, fake_model) -> None:
    tg_daemon()
    for command in ("/start", "/status", "/tasks"):
        uid = telegram.inject_message(CHAT, command)
        wait_handled(telegram, uid)
    telegram.wait_for(lambda: len(replies(telegram, CHAT)) == 3)
    start, status, tasks = replies(telegram, CHAT)
    assert "/new" in start and "/stop" in start
    assert "idle" in status and "claude" in status
    assert tasks == "No active tasks in this chat."
    assert fake_model.requests == []


def _prompt(telegram: FakeTelegram, n: int = 1) -> dict:
    telegram.wait_for(lambda: len([m for m in telegram.sent if m.get("reply_markup")]) >= n)
    return [m for m in telegram.sent if m.get("reply_markup")][n - 1]


def _button(prompt: dict, label: str) -> str:
    return next(b["callback_data"] for row in prompt["reply_markup"]["inline_keyboard"] for b in row if label in b["text"])


def test_approval_granted_runs_the_tool(tg_daemon, telegram, fake_model) -> None:
    daemon = tg_daemon(owner=[str(CHAT)])
    fake_model.enqueue(tool_use("exec", {"argv": ["touch", "approved.txt"]}), text("Created approved.txt."))
    telegram.inject_message(CHAT, "make a file")
    prompt = _prompt(telegram)
    assert "touch approved.txt" in prompt["plain_text"] and not (daemon.workspace / "approved.txt").exists()
    # someone else pressing the button in this private chat is refused
    telegram.inject_callback(CHAT, 9999, _button(prompt, "Approve"), prompt["message_id"])
    telegram.wait_for(lambda: len(telegram.callback_answers) == 1)
    assert "Only the owner" in telegram.callback_answers[0]["text"]
    telegram.inject_callback(CHAT, CHAT, _button(prompt, "Approve"), prompt["message_id"])
    telegram.wait_for(lambda: "Created approved.txt." in replies(telegram, CHAT))
    assert (daemon.workspace / "approved.txt").exists()
    assert telegram.callback_answers[-1]["text"] == "Approved."
    telegram.wait_for(lambda: any(e["message_id"] == prompt["message_id"] for e in telegram.edits))
    edit = [e for e in telegram.edits if e["message_id"] == prompt["message_id"]][-1]
    assert "Approved" in edit["plain_text"] and edit["reply_markup"] is None


def test_approval_denied_does_not_run_the_tool(tg_daemon, telegram, fake_model) -> None:
    daemon = tg_daemon(owner=[str(CHAT)])
    fake_model.enqueue(tool_use("exec", {"argv": ["touch", "denied.txt"]}), text("OK, I did not create it."))
    telegram.inject_message(CHAT, "make a file")
    prompt = _prompt(telegram)
    telegram.inject_callback(CHAT, CHAT, _button(prompt, "Deny"), prompt["message_id"])
    telegram.wait_for(lambda: "OK, I did not create it." in replies(telegram, CHAT))
    assert not (daemon.workspace / "denied.txt").exists()
    result = fake_model.requests[-1]["messages"][-1]["content"][0]
    assert result["is_error"] and "did not approve" in result["content"]
    telegram.wait_for(lambda: any("Denied" in e["plain_text"] for e in telegram.edits))


def test_an_approval_prompt_that_times_out_counts_as_denied(tg_daemon, telegram, fake_model) -> None:
    """Nobody answers: the call is refused to the model as not approved, and the chat is told on the prompt."""
    daemon = tg_daemon(owner=[str(CHAT)], env={"CLAWGATE_TOOLS__APPROVAL_TIMEOUT_SECONDS": "2"})
    fake_model.enqueue(tool_use("exec", {"argv": ["touch", "late.txt"]}), text("No answer, so I left it."))
    telegram.inject_message(CHAT, "make another")
    second = _prompt(telegram)
    telegram.wait_for(lambda: "No answer, so I left it." in replies(telegram, CHAT))
    assert not (daemon.workspace / "late.txt").exists()
    result = fake_model.requests[-1]["messages"][-1]["content"][0]
    assert result["is_error"] and "did not approve this call (timeout)" in result["content"]
    telegram.wait_for(lambda: any(e["message_id"] == second["message_id"] and "No answer in time" in e["plain_text"]
                                  for e in telegram.edits))
    # a late press is answered, and changes nothing
    telegram.inject_callback(CHAT, CHAT, _button(second, "Approve"), second["message_id"])
    telegram.wait_for(lambda: telegram.callback_answers and "no longer pending" in telegram.callback_answers[-1]["text"])
