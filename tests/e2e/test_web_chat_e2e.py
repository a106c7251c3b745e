"""The control page's chat as a person uses it, in headless Chromium against the real daemon: cron
results labelled where the user chats (also when they ran while no page was open), an approval
reachable from the chat on a phone-sized screen, a step that waits for approval saying so,
messages sent during a run marked queued, a failed tool step marked failed, and no Markdown
backticks in the page's own text."""

from __future__ import annotations

import json

from tests.e2e.test_web_e2e import browser, expect, local_time, logged_in, screenshot  # noqa: F401 (browser: a fixture)
from tests.fakes.anthropic_api import text, tool_use
from tests.harness import ALLOW_PYTHON
from tests.waiting import wait_until

PHONE = {"width": 390, "height": 844}


def _add_job(daemon, name: str, message: str) -> dict:
    added = daemon.cli("cron", "add", "--every", "1h", "--name", name, "--deliver", "gateway:main", "-m", message,
                       "--json")
    assert added.returncode == 0, added.stderr
    return json.loads(added.stdout)


def _run_and_wait(daemon, job: dict) -> None:
    ran = daemon.cli("cron", "run", job["id"])
    assert ran.returncode == 0, ran.stderr
    wait_until(lambda: " ok " in daemon.cli("cron", "runs", job["id"]).stdout, "the run recorded as ok", interval=0.2)


def test_cron_results_show_in_the_chat_labelled_with_their_job(browser, daemon, fake_model):  # noqa: F811
    fake_model.enqueue_for("while away", text("Ran while nobody watched."))
    fake_model.enqueue_for("stand-up", text("Stand-up starts in 5 minutes."))
    early = _add_job(daemon, "nightly", "say what ran while away")
    _run_and_wait(daemon, early)  # no page open: the result waits for the next client of the session
    page = logged_in(browser, daemon)
    kept = page.locator("#messages .msg.assistant", has_text="Ran while nobody watched.")
    expect(kept.locator(".from")).to_have_text('from cron job "nightly" · every 1h')
    job = _add_job(daemon, "stand-up", "Remind me of the stand-up")
    ran = daemon.cli("cron", "run", job["id"])
    assert ran.returncode == 0, ran.stderr
    live = page.locator("#messages .msg.assistant[data-state=final]", has_text="Stand-up starts in 5 minutes.")
    expect(live.locator(".from")).to_have_text('from cron job "stand-up" · every 1h')
    expect(page.locator(f"#cron .job[data-id='{job['id']}'] .next-run")).to_have_text(local_time(page, job["nextRunAt"]))
    screenshot(page, "cron-in-chat")
    # After a reload both answers come from chat.history, each once, labelled, in the order they came.
    page.reload()
    expect(page.locator("body")).to_have_attribute("data-ready", "true")
    answers = page.locator("#messages .msg.assistant")
    expect(answers.locator(".text")).to_have_text(["Ran while nobody watched.", "Stand-up starts in 5 minutes."])
    expect(answers.locator(".from")).to_have_text(['from cron job "nightly" · every 1h',
                                                   'from cron job "stand-up" · every 1h'])
    assert not page.errors, page.errors  # type: ignore[attr-defined]


def test_on_a_phone_the_waiting_approval_is_in_the_chat_and_a_later_message_is_queued(browser, daemon,  # noqa: F811
                                                                                   fake_model):
    fake_model.enqueue(tool_use("exec", {"argv": ["python3", "-c", "print(6 * 7)"]}), text("It printed 42."),
                       text("Second answer."))
    page = logged_in(browser, daemon)
    page.set_viewport_size(PHONE)
    page.fill("#chat-input", "compute it")
    page.click("#chat-send")
    card = page.locator("#messages .approval")
    expect(card).to_have_count(1)
    expect(card).to_be_in_viewport()  # no scrolling past the chat to the side panels
    expect(card.locator(".asks")).to_have_text("Waiting for your approval: ")
    step = page.locator("#messages .step[data-tool=exec]")
    expect(step).to_have_attribute("data-status", "awaiting approval")
    expect(step).to_contain_text("waiting for your approval")
    expect(page.locator("#messages .steps-head").last).to_have_text("1 tool step · 1 waiting for approval")

    page.fill("#chat-input", "and then this")
    page.click("#chat-send")
    queued = page.locator("#messages .msg.user", has_text="and then this")
    expect(queued).to_have_class("msg user queued")
    expect(queued.locator(".queued-note")).to_have_text("queued: runs after the current answer")
    screenshot(page, "phone-approval")

    card.locator("button.approve").click()
    expect(page.locator("#messages .msg.assistant[data-state=final]").first).to_have_text("It printed 42.")
    expect(step).to_have_attribute("data-status", "ok")
    expect(page.locator("#messages .approval-done")).to_contain_text("exec approved")
    expect(page.locator("#messages .msg.assistant[data-state=final]").last).to_have_text("Second answer.")
    expect(queued).to_have_class("msg user")
    expect(queued.locator(".queued-note")).to_have_count(0)
    assert not page.errors, page.errors  # type: ignore[attr-defined]


def test_a_failed_step_is_marked_failed_and_page_text_has_no_backticks(browser, daemon_factory,  # noqa: F811
                                                                      fake_model):
    daemon = daemon_factory(ALLOW_PYTHON)
    fake_model.enqueue(tool_use("exec", {"argv": ["python3", "-c", "import sys; sys.exit(3)"]}), text("It failed."))
    page = logged_in(browser, daemon)
    page.fill("#chat-input", "run the failing program")
    page.click("#chat-send")
    expect(page.locator("#messages .msg.assistant[data-state=final]")).to_have_text("It failed.")
    step = page.locator("#messages .step[data-tool=exec]")
    expect(step).to_have_attribute("data-status", "failed")
    expect(step).to_have_class("step failed")
    marker = step.evaluate("(node) => getComputedStyle(node, '::marker').content")
    assert "✓" not in marker and "✗" in marker, marker
    page.reload()  # read back from the history: still failed
    expect(page.locator("body")).to_have_attribute("data-ready", "true")
    expect(page.locator("#messages .step[data-tool=exec]")).to_have_attribute("data-status", "failed")
    assert "`" not in page.inner_text("body"), page.inner_text("body")
    assert not page.errors, page.errors  # type: ignore[attr-defined]
