"""The web page's live preview when a model call is retried after part of its answer was shown: the
preview starts again, and the answer left on the page is the retry's whole one. Headless Chromium
against the real daemon and the fake Messages API (the browser setup of tests/e2e/test_web_e2e.py)."""

from __future__ import annotations

import threading

from tests.fakes.anthropic_api import text
from tests.e2e.test_web_e2e import RECORD_ANSWER, browser, expect, logged_in  # noqa: F401 (fixture)
from tests.waiting import wait_until


def test_a_cut_answer_is_replaced_by_the_retried_whole_one(browser, daemon, fake_model):  # noqa: F811
    cut = "This first attempt breaks off somewhere in the middle of its sentence"
    whole = "The retried answer, complete."
    gate = threading.Event()  # the cut stream waits after its first delta until the page shows it
    fake_model.enqueue(text(cut, cut="midway", hold=gate), text(whole))
    page = logged_in(browser, daemon)
    page.evaluate(RECORD_ANSWER)
    page.fill("#chat-input", "say something")
    page.keyboard.press("Enter")
    wait_until(lambda: page.evaluate("window.__answers.length") > 0, "the first part of the cut answer")
    gate.set()
    expect(page.locator("#messages .msg.assistant[data-state=final]")).to_have_text(whole)
    seen: list[str] = page.evaluate("window.__answers")
    assert cut.startswith(seen[0]) and seen[0] != cut  # the cut attempt was shown in part
    # after the restart the preview holds only the retry's text: never the two run together
    assert all(cut.startswith(s) or whole.startswith(s) for s in seen), seen
    assert not page.errors, page.errors  # type: ignore[attr-defined]
