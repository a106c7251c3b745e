"""The web page restores and forks a checkpoint of another agent than the default by naming that agent (the
daemon refuses a client that names none; headless Chromium, the real daemon)."""

from __future__ import annotations

import json

from tests.e2e.test_web_e2e import _wait_idle, browser, expect, logged_in  # noqa: F401  (browser: a fixture)
from tests.fakes.anthropic_api import text, tool_use

AGENTS = json.dumps({"home": {"default": True}, "work": {}})


def test_the_page_restores_and_forks_a_checkpoint_of_another_agents_session(browser, daemon_factory, fake_model):
    daemon = daemon_factory({"CLAWGATE_AGENTS": AGENTS})
    work_space = daemon.home / "agents" / "work" / "workspace"
    fake_model.enqueue(tool_use("write_file", {"path": "plan.txt", "content": "v1"}), text("written"))

    page = logged_in(browser, daemon)
    page.fill("#session-key", "agent:work:main")  # a session of agent work, by its key
    page.click("#open-session button")
    expect(page.locator("#checkpoints-session")).to_have_text("agent:work:main")
    page.fill("#chat-input", "write the plan")
    page.click("#chat-send")
    expect(page.locator("#messages .msg.assistant[data-state=final]")).to_have_text("written")
    assert (work_space / "plan.txt").exists() and not (daemon.workspace / "plan.txt").exists()
    expect(page.locator("#checkpoints .checkpoint").first).to_be_visible()
    first = page.locator("#checkpoints .checkpoint").last  # the oldest: before the file was written
    first.locator(".cp-row").click()
    _wait_idle(daemon, "agent:work:main")  # its after-run bookkeeping done (a busy session refuses a restore)
    first.locator("button.restore").click()
    dialog = page.locator("#restore-dialog")
    expect(dialog).to_be_visible()
    dialog.locator(".do-restore").click()
    expect(dialog).to_be_hidden()
    expect(page.locator("#checkpoints-status")).to_contain_text("Restored both")
    assert not (work_space / "plan.txt").exists()

    first.locator(".cp-row").click()
    first.locator("button.fork").click()
    expect(page.locator("#chat-session")).to_contain_text("agent:work:main~")
    assert not page.errors, page.errors  # type: ignore[attr-defined]
