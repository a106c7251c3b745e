"""A guest (an admitted Telegram user who is not the owner) and background exec.

Going to the background must not be a way around approval: the call is approved (by the owner)
before anything starts, exactly as in the foreground. A guest's job wakes a guest turn, never an
owner turn, and reports to the guest's chat.
"""

from __future__ import annotations

import json

from tests.background_support import background_exec, events_named, session_records
from tests.fakes.anthropic_api import FakeAnthropic, text, tool_use
from tests.fakes.telegram_api import FakeTelegram
from tests.harness import ALLOW_PYTHON
from tests.telegram_support import replies, telegram, tg_daemon  # noqa: F401

OWNER, GUEST = 4242, 555
KEY = f"telegram:{GUEST}"


def test_a_guest_cannot_use_background_exec_to_skip_approval(tg_daemon, telegram: FakeTelegram,
                                                             fake_model: FakeAnthropic) -> None:
    daemon = tg_daemon(owner=[str(OWNER)], allow_from=[str(GUEST)], dm_policy="allowlist",
                       env={"CLAWGATE_AGENT__STREAM": "false", **ALLOW_PYTHON})
    fake_model.enqueue_for("make a file", tool_use("exec", {"argv": ["touch", "pwned.txt"], "background": True}),
                           text("could not"))
    telegram.inject_message(GUEST, "make a file", user_id=GUEST)
    telegram.wait_for(lambda: any(m.get("reply_markup") for m in telegram.sent), timeout=30)
    [prompt] = [m for m in telegram.sent if m.get("reply_markup")]
    assert prompt["chat_id"] == OWNER and "touch" in prompt["plain_text"]  # asked before anything started
    assert "(in the background)" in prompt["plain_text"]  # the owner knows what they approve
    assert session_records(daemon.home, KEY), "the guest's session is where the job would be recorded"
    assert not (daemon.workspace / "pwned.txt").exists() and not events_named(daemon.home, "bg_job_start", KEY)
    deny = prompt["reply_markup"]["inline_keyboard"][0][1]["callback_data"]
    telegram.inject_callback(OWNER, OWNER, deny, prompt["message_id"])
    telegram.wait_for(lambda: "could not" in replies(telegram, GUEST), timeout=30)
    assert not (daemon.workspace / "pwned.txt").exists()
    assert not (daemon.guest_workspace(f"telegram:{GUEST}") / "pwned.txt").exists()
    assert not events_named(daemon.home, "bg_job_start", KEY), "a denied call never becomes a job"
    assert "not run: the user did not approve" in json.dumps(fake_model.requests[-1])

    # An allowed job of the guest runs, and its wake-up acts for the guest, in the guest's chat.
    fake_model.enqueue_for("start the build", background_exec(), text("Started it."))
    fake_model.enqueue_for("[clawgate] Background job", text("Guest build finished."))
    telegram.inject_message(GUEST, "start the build", user_id=GUEST)
    telegram.wait_for(lambda: "Started it." in replies(telegram, GUEST), timeout=30)
    # the chat sees the running job: in the progress message (kept after the answer) and in /status
    telegram.wait_for(lambda: any("⏳ In the background: job bg-" in m["plain_text"] and m["chat_id"] == GUEST
                                  for m in telegram.sent + telegram.edits), timeout=30)
    telegram.inject_message(GUEST, "/status", user_id=GUEST)
    telegram.wait_for(lambda: any("Background job bg-" in r and "python3" in r for r in replies(telegram, GUEST)),
                      timeout=30)
    (daemon.guest_workspace(f"telegram:{GUEST}") / "release").write_text("go")  # the guest's job runs in their own
    telegram.wait_for(lambda: "Guest build finished." in replies(telegram, GUEST), timeout=60)
    [wake] = [r for r in session_records(daemon.home, KEY) if r["kind"] == "user" and r.get("channel") == "background"]
    assert wake["owner"] is False and wake["deliver"] == {"channel": "telegram", "chat_id": str(GUEST)}
    assert "Guest build finished." not in replies(telegram, OWNER)
