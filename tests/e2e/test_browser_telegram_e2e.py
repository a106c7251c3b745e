"""A screenshot the browser took reaches a Telegram chat: the real daemon, the fake Bot API, the real Chromium.

The page taints the run, so send_file (a workspace file leaving) asks the owner, who approves it with the
prompt's button; the document that arrives is the PNG the browser saved in the workspace."""

from __future__ import annotations

import json

from tests.fakes.anthropic_api import FakeAnthropic, text, tool_use
from tests.fakes.loopback import html, web_page
from tests.fakes.telegram_api import FakeTelegram
from tests.telegram_support import replies, telegram, tg_daemon  # noqa: F401

OWNER = 4242


def test_a_screenshot_is_sent_to_the_chat_after_the_owner_approves(tg_daemon, telegram: FakeTelegram,  # noqa: F811
                                                                  fake_model: FakeAnthropic) -> None:
    with web_page(lambda path, port: html("<title>Menu</title><h1>Today's menu</h1>")) as (port, hits):
        daemon = tg_daemon(owner=[str(OWNER)], dm_policy="allowlist", env={
            "CLAWGATE_AGENT__STREAM": "false",
            "CLAWGATE_TOOLS__BROWSER__ALLOWED_PRIVATE_HOSTS": json.dumps(["127.0.0.1"])})
        fake_model.enqueue(tool_use("browser", {"action": "navigate", "url": f"http://127.0.0.1:{port}/menu"}),
                           tool_use("browser", {"action": "screenshot", "path": "menu.png"}),
                           tool_use("send_file", {"path": "menu.png", "caption": "The menu."}),
                           text("Sent the menu."))
        telegram.inject_message(OWNER, "show me the menu", user_id=OWNER)
        telegram.wait_for(lambda: any(m.get("reply_markup") for m in telegram.sent), timeout=90)
        [prompt] = [m for m in telegram.sent if m.get("reply_markup")]
        assert prompt["chat_id"] == OWNER and "send_file" in prompt["plain_text"]
        assert "untrusted content entered this run" in prompt["plain_text"]
        approve = prompt["reply_markup"]["inline_keyboard"][0][0]["callback_data"]
        telegram.inject_callback(OWNER, OWNER, approve, prompt["message_id"])
        telegram.wait_for(lambda: len(telegram.documents) == 1, timeout=90)
        telegram.wait_for(lambda: "Sent the menu." in replies(telegram, OWNER), timeout=90)
    [doc] = telegram.documents
    assert doc["chat_id"] == OWNER and doc["file_name"] == "menu.png" and doc["caption"] == "The menu."
    assert doc["content"].startswith(b"\x89PNG") and doc["content"] == (daemon.workspace / "menu.png").read_bytes()
    assert hits[0] == "/menu"
