"""Chat commands typed on the control page, in headless Chromium against the real daemon: answered at once
during a run, shown as command replies (not model answers), and /stop stops the run."""

from __future__ import annotations

import threading

from tests.e2e.test_web_e2e import browser, expect, logged_in, screenshot  # noqa: F401
from tests.fakes.anthropic_api import text


def _type(page, line: str) -> None:  # type: ignore[no-untyped-def]
    page.fill("#chat-input", line)
    page.keyboard.press("Enter")


def test_commands_on_the_page_are_answered_at_once_as_command_replies(browser, daemon, fake_model):
    gate = threading.Event()
    fake_model.enqueue(text("the slow answer", hold=gate))
    page = logged_in(browser, daemon)
    _type(page, "take your time")
    fake_model.wait_requests(1)
    _type(page, "/status")
    status = page.locator("#messages .msg.command[data-command=status]")
    expect(status).to_contain_text("This chat: working")  # the run is still going: never queued behind it
    _type(page, "/help")
    help_reply = page.locator("#messages .msg.command[data-command=help]")
    for name in ("/new", "/status", "/stop", "/tasks", "/undo", "/approve"):
        expect(help_reply).to_contain_text(name)
    expect(page.locator("#messages .msg.user.command")).to_have_count(2)  # the typed commands, marked
    expect(page.locator("#messages .msg.command:not(.user)")).to_have_count(2)  # each answer once
    assert len(fake_model.requests) == 1  # no command reached the model
    _type(page, "/stop")
    expect(page.locator("#messages .msg.command[data-command=stop]")).to_contain_text("Stopping the current run")
    expect(page.locator("#messages .msg.assistant[data-state=final]")).to_have_text("Stopped.")
    gate.set()
    expect(page.locator("#messages .msg.assistant[data-run^=cmd_]")).to_have_count(0)  # no answer bubble for a command
    screenshot(page, "chat-commands")
    assert not page.errors, page.errors  # type: ignore[attr-defined]
