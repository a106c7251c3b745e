"""The control page in headless Chromium against the real daemon and the fake Messages API.

Debian's `chromium` driven by Playwright for Python (`make test` installs both where it can).
Without a browser each test fails with one line naming the package; it never skips silently.
Screenshots land in build/web-screenshots/ (ignored by git) so a person can look at the page.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests import checkpoint_rows as rows
from tests.fakes.anthropic_api import text, tool_use, tool_uses
from tests.harness import ALLOW_PYTHON, ROOT, TOKEN, DaemonProcess
from tests.scripted_job import ScriptedJob
from tests.waiting import wait_until


def _chromium() -> str | None:
    configured = os.environ.get("CLAWGATE_TEST_CHROMIUM")
    if configured:
        return configured if os.access(configured, os.X_OK) else None
    return shutil.which("chromium") or shutil.which("chromium-browser")


from playwright.sync_api import BrowserContext, Page, sync_playwright
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import expect as _expect

CHROMIUM = _chromium()
NO_CHROMIUM = ("no Chromium found: install Debian's package `chromium` (`make test` does, as root), "
               "or set CLAWGATE_TEST_CHROMIUM to a Chromium binary")

WAIT_MS = 60_000  # generous: a loaded 2-core machine runs a browser, the daemon and the fake at once
SHOTS = ROOT / "build" / "web-screenshots"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def expect(target: Any) -> Any:
    return _expect(target)


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[BrowserContext]:
    """A fresh profile per test: nothing (a token in storage, a cache) leaks between tests."""
    if CHROMIUM is None:  # a missing browser is a failure naming the package, never a silent skip
        pytest.fail(NO_CHROMIUM, pytrace=False)
    with sync_playwright() as playwright:
        try:
            context = playwright.chromium.launch_persistent_context(
                str(tmp_path / "chromium-profile"), executable_path=CHROMIUM, headless=True, args=ARGS,
                viewport={"width": 1280, "height": 800})
        except PlaywrightError as exc:  # a browser that cannot start here is no browser (same reason each time)
            pytest.fail(f"{CHROMIUM} does not start: {str(exc).splitlines()[0][:160]} (reinstall Debian's `chromium`)",
                        pytrace=False)
        context.set_default_timeout(WAIT_MS)
        _expect.set_options(timeout=WAIT_MS)
        try:
            yield context
        finally:
            context.close()


def screenshot(page: Page, name: str) -> Path:
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    page.screenshot(path=str(path))
    return path


def open_page(browser: BrowserContext, daemon: DaemonProcess) -> Page:
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.errors = errors  # type: ignore[attr-defined]
    page.goto(f"http://127.0.0.1:{daemon.port}/")
    return page


def log_in(page: Page, token: str = TOKEN) -> None:
    page.fill("#token", token)
    page.click("#login-form button[type=submit]")


def logged_in(browser: BrowserContext, daemon: DaemonProcess) -> Page:
    page = open_page(browser, daemon)
    log_in(page)
    expect(page.locator("body")).to_have_attribute("data-ready", "true")
    return page


# Records every text the streaming answer bubble shows, as the page changes it.
RECORD_ANSWER = """() => {
  window.__answers = [];
  new MutationObserver(() => {
    for (const node of document.querySelectorAll('#messages .msg.assistant[data-run] .text')) {
      const seen = window.__answers;
      if (node.textContent && seen[seen.length - 1] !== node.textContent) seen.push(node.textContent);
    }
  }).observe(document.querySelector('#messages'), {childList: true, subtree: true, characterData: true});
}"""


def test_login_and_an_answer_that_streams(browser, daemon, fake_model):
    page = open_page(browser, daemon)
    log_in(page, "not-the-token")
    expect(page.locator("#login-error")).to_contain_text("wrong gateway token")
    expect(page.locator("#app")).to_be_hidden()
    log_in(page)
    expect(page.locator("body")).to_have_attribute("data-ready", "true")
    expect(page.locator("#conn-state")).to_contain_text("connected")
    assert TOKEN not in page.url
    assert page.evaluate("sessionStorage.getItem('clawgate.token')") == TOKEN

    answer = "Streaming works: " + " ".join(f"word{i}" for i in range(60)) + "."
    gate = threading.Event()  # the model's stream waits after its first delta until the page shows it
    fake_model.enqueue(text(answer, hold=gate))
    page.evaluate(RECORD_ANSWER)
    page.fill("#chat-input", "tell me something long")
    page.keyboard.press("Enter")
    wait_until(lambda: page.evaluate("window.__answers.length") > 0, "the first part of the answer")
    gate.set()
    expect(page.locator("#messages .msg.user").last).to_have_text("tell me something long")
    final = page.locator("#messages .msg.assistant[data-state=final]")
    expect(final).to_have_text(answer)
    seen: list[str] = page.evaluate("window.__answers")
    partial = [s for s in seen if s != answer]
    assert partial, f"the answer never showed partly streamed: {seen[:3]}"
    assert all(answer.startswith(s) for s in partial)  # deltas in order, nothing lost or doubled
    # The reload keeps the session (token in sessionStorage) and shows the history.
    page.reload()
    expect(page.locator("body")).to_have_attribute("data-ready", "true")
    expect(page.locator("#messages .msg.assistant").last).to_have_text(answer)
    expect(page.locator("#status dt:text-is('tokens today') + dd")).to_contain_text(" out")
    assert int(page.locator("#status dt:text-is('model calls today') + dd").inner_text()) >= 1
    expect(page.locator("#status dt:text-is('providers') + dd")).to_have_text("anthropic ok")
    expect(page.locator("#sessions")).to_contain_text("main")
    screenshot(page, "chat")
    assert not page.errors, page.errors  # type: ignore[attr-defined]


def test_a_five_step_task_turns_done_step_by_step(browser, daemon_factory, fake_model):
    job = ScriptedJob(steps=5, delay=0.25)
    fake_model.responder = job
    daemon = daemon_factory(ALLOW_PYTHON)
    page = logged_in(browser, daemon)
    page.fill("#chat-input", "run the job")
    page.click("#chat-send")

    task = page.locator("#tasks .task").first
    expect(task.locator(".task-step")).to_have_count(5)
    done_counts: list[int] = []

    def finished() -> bool:
        done = task.locator(".task-step[data-status=done]").count()
        if not done_counts or done_counts[-1] != done:
            done_counts.append(done)
        return task.get_attribute("data-status") == "completed"

    wait_until(finished, "the task to complete on the page")
    expect(task.locator(".task-step[data-status=done]")).to_have_count(5)
    assert done_counts == sorted(done_counts), done_counts  # steps only ever turn done
    assert any(0 < n < 5 for n in done_counts), f"never saw the steps turn done one by one: {done_counts}"
    expect(task.locator(".progress")).to_have_text("5/5")
    expect(task.locator(".session")).to_have_text("in main")
    # The live tool steps of the run: five exec calls, each marked ok.
    expect(page.locator("#messages .step[data-tool=exec][data-status=ok]")).to_have_count(5)
    expect(page.locator("#messages .msg.assistant[data-state=final]")).to_contain_text("All 5 steps are done")
    assert (daemon.workspace / "log.txt").read_text().splitlines() == [f"step {k}" for k in range(1, 6)]
    screenshot(page, "task")
    assert not page.errors, page.errors  # type: ignore[attr-defined]


def _tool_results(fake_model) -> list[str]:
    out = []
    for body in fake_model.requests:
        for message in body["messages"]:
            for block in message["content"] if isinstance(message["content"], list) else []:
                if block.get("type") == "tool_result":
                    content = block["content"]
                    out.append(content if isinstance(content, str) else "".join(b.get("text", "") for b in content))
    return out


def test_approve_and_deny_an_exec_from_the_page(browser, daemon, fake_model):
    # python3 is not on the default allowlist: running it needs the owner's yes.
    fake_model.enqueue(tool_use("exec", {"argv": ["python3", "-c", "print(6 * 7)"]}), text("It printed 42."))
    page = logged_in(browser, daemon)
    page.fill("#chat-input", "compute it")
    page.click("#chat-send")
    card = page.locator("#approvals .approval")
    expect(card).to_have_count(1)
    expect(card.locator(".tool")).to_have_text("exec")
    expect(card.locator(".summary")).to_contain_text("python3")
    expect(page.locator("#approvals-count")).to_have_text("1")
    expect(page.locator("#messages .step[data-tool=exec]")).to_have_attribute("data-status", "awaiting approval")
    screenshot(page, "approval")
    card.locator("button.approve").click()
    expect(page.locator("#messages .msg.assistant[data-state=final]")).to_have_text("It printed 42.")
    expect(page.locator("#messages .step[data-tool=exec]")).to_have_attribute("data-status", "ok")
    expect(card).to_have_count(0)
    expect(page.locator("#approvals")).to_contain_text("Nothing waits")
    assert any(r.startswith("exit code 0") and "42" in r for r in _tool_results(fake_model))

    # Deny: the tool does not run and the model is told so.
    marker = daemon.workspace / "denied.txt"
    # with a right-to-left override in it: the card shows it as <U+202E>, the command as it runs
    fake_model.enqueue(tool_use("exec", {"argv": ["python3", "-c", f"open({str(marker)!r}, 'w') # \u202efdp.exe"]}),
                       text("Not run."))
    page.fill("#chat-input", "write the file")
    page.click("#chat-send")
    expect(card).to_have_count(1)
    expect(card.locator(".summary")).to_contain_text("# <U+202E>fdp.exe")
    assert "\u202e" not in card.locator(".summary").inner_text()
    card.locator("button.deny").click()
    expect(page.locator("#messages .msg.assistant[data-state=final]").last).to_have_text("Not run.")
    expect(page.locator("#messages .step[data-tool=exec]").last).not_to_have_attribute("data-status", "ok")
    assert not marker.exists()
    assert not page.errors, page.errors  # type: ignore[attr-defined]


def local_time(page: Page, seconds: float) -> str:
    """How the page shows every time: the browser's local date and time."""
    return page.evaluate("(s) => new Intl.DateTimeFormat(undefined, {dateStyle: 'medium', timeStyle: 'medium'})"
                         ".format(new Date(s * 1000))", seconds)


def test_cron_jobs_show_their_next_run_and_history(browser, daemon, fake_model):
    added = daemon.cli("cron", "add", "--name", "standup", "--cron", "30 9 * * *", "--tz", "UTC",
                       "-m", "say good morning", "--json")
    assert added.returncode == 0, added.stderr
    job = json.loads(added.stdout)
    assert job["nextRun"]
    page = logged_in(browser, daemon)
    card = page.locator(f"#cron .job[data-id='{job['id']}']")
    expect(card.locator(".name")).to_have_text("standup")
    expect(card.locator(".next-run")).to_have_text(local_time(page, job["nextRunAt"]))

    # A job added while the page is open appears by itself (cron event), and a run shows in its history.
    second = json.loads(daemon.cli("cron", "add", "--name", "hourly", "--every", "1h", "-m", "check in", "--json").stdout)
    second_card = page.locator(f"#cron .job[data-id='{second['id']}']")
    expect(second_card.locator(".next-run")).to_have_text(local_time(page, second["nextRunAt"]))
    ran = daemon.cli("cron", "run", second["id"])
    assert ran.returncode == 0, ran.stderr
    expect(second_card.locator(".last")).to_contain_text("ok")
    second_card.locator(".history summary").click()
    expect(second_card.locator(".runs .run")).to_have_count(1)
    expect(second_card.locator(".runs .run .status")).to_have_text("ok")
    screenshot(page, "cron")
    assert not page.errors, page.errors  # type: ignore[attr-defined]


def test_the_page_reconnects_after_a_daemon_restart(browser, daemon, fake_model):
    page = logged_in(browser, daemon)
    daemon.kill()  # a crash: the page notices and keeps trying
    expect(page.locator("#conn-state")).to_contain_text("reconnecting")
    daemon.start()  # same port
    expect(page.locator("#conn-state")).to_contain_text("connected ·")
    fake_model.enqueue(text("Back again."))
    page.fill("#chat-input", "are you there?")
    page.click("#chat-send")
    expect(page.locator("#messages .msg.assistant[data-state=final]")).to_have_text("Back again.")
    # (failed reconnection attempts log console errors; those are expected here)

    # The token changed while the daemon was down: the page forgets it and asks again.
    daemon.kill()
    daemon.env["CLAWGATE_GATEWAY__TOKEN"] = "a-new-token-0123456789"
    daemon.start()
    expect(page.locator("#login")).to_be_visible()
    expect(page.locator("#login-error")).to_contain_text("wrong gateway token")
    assert page.evaluate("sessionStorage.getItem('clawgate.token')") is None
    log_in(page, "a-new-token-0123456789")
    expect(page.locator("body")).to_have_attribute("data-ready", "true")


def _notes_task(fake_model) -> None:
    """Three steps, each writing a new version of out/notes.txt (and its own file); a message is
    sent during step 2, which a restore to step 1 cannot take back."""
    fake_model.enqueue(tool_use("task", {"action": "plan", "goal": "write three versions of the notes",
                                         "steps": [f"write version {i}" for i in (1, 2, 3)]}))
    for i in (1, 2, 3):
        calls = [("write_file", {"path": "out/notes.txt", "content": f"version {i}"}),
                 ("write_file", {"path": f"out/step{i}.txt", "content": f"step {i}"}),
                 ("task", {"action": "complete", "step": i, "verification": f"read back version {i}"})]
        if i == 2:
            calls.insert(0, ("message", {"text": "halfway there"}))
        fake_model.enqueue(tool_uses(*calls))
    fake_model.enqueue(tool_use("task", {"action": "finish", "status": "completed", "result": "three versions"}),
                       text("Three versions written."))


def _wait_idle(daemon: DaemonProcess, session: str) -> None:
    """Right after an answer the session may still run its after-run bookkeeping (a restore is refused then)."""
    def idle() -> bool:
        out = daemon.cli("status", "--json")
        return out.returncode == 0 and session not in json.loads(out.stdout).get("activeSessions", [])
    wait_until(idle, f"session {session} to be idle")


def test_checkpoint_timeline_restore_and_fork(browser, daemon, fake_model):
    _notes_task(fake_model)
    page = logged_in(browser, daemon)
    page.fill("#session-key", "notes")
    page.click("#open-session button")
    expect(page.locator("#checkpoints-session")).to_have_text("notes")
    expect(page.locator("#checkpoints")).to_contain_text("No checkpoints in this session yet.")
    hostile = '<img src=x onerror="window.__pwned=1"> write the notes'
    page.fill("#chat-input", hostile)
    page.click("#chat-send")
    expect(page.locator("#messages .msg.assistant[data-state=final]")).to_have_text("Three versions written.")

    # the timeline, newest first: three verified steps, each with the files it changed
    steps = page.locator("#checkpoints .checkpoint[data-kind=step]")
    expect(steps).to_have_count(3)
    assert [steps.nth(i).get_attribute("data-step") for i in range(3)] == ["3", "2", "1"]
    assert [steps.nth(i).get_attribute("data-verified") for i in range(3)] == ["true"] * 3
    expect(steps.nth(0).locator(".files")).to_have_text(" · 2 files")
    expect(steps.nth(0).locator(".label")).to_contain_text("step 3/3 done")
    turn = page.locator("#checkpoints .checkpoint[data-kind=turn]").first
    expect(turn.locator(".label")).to_contain_text('<img src=x onerror="window.__pwned=1">')  # text, not markup
    assert page.evaluate("window.__pwned") is None

    # details of step 1, then Restore: the method reports the message sent since, the dialog lists it
    step1 = page.locator("#checkpoints .checkpoint[data-kind=step][data-step='1']")
    step1.locator(".cp-row").click()
    details = step1.locator(".cp-details")
    expect(details.locator(".would-change")).to_have_text("files: 1 written back, 2 removed")
    expect(details.locator(".task-step[data-status=done]")).to_have_count(1)
    expect(details.locator(".irreversible-note")).to_contain_text("1 effect(s)")
    screenshot(page, "checkpoints-details")
    _wait_idle(daemon, "notes")
    details.locator("button.restore").click()
    dialog = page.locator("#restore-dialog")
    expect(dialog).to_be_visible()
    expect(dialog.locator(".target")).to_contain_text("step 1/3 done")
    expect(dialog.locator("input[value=both]")).to_be_checked()
    expect(dialog.locator(".would-change")).to_have_text("files: 1 written back, 2 removed")
    dialog.locator("input[value=conversation]").check()
    expect(dialog.locator(".would-change")).to_have_text("files: left as they are")
    dialog.locator("input[value=both]").check()
    dialog.locator(".do-restore").click()
    expect(dialog.locator(".irreversible li")).to_have_count(1)
    expect(dialog.locator(".irreversible li")).to_contain_text("message sent: text=halfway there")
    expect(dialog.locator(".do-restore")).to_have_text("Restore anyway")
    ws = daemon.workspace
    assert (ws / "out/notes.txt").read_text() == "version 3"  # nothing changed before the second yes
    screenshot(page, "checkpoints-restore-dialog")
    dialog.locator(".do-restore").click()
    expect(dialog).to_be_hidden()
    expect(page.locator("#checkpoints-status")).to_contain_text("Restored both to step 1/3 done")
    expect(page.locator("#checkpoints-status")).to_contain_text("1 written back, 2 removed")
    assert (ws / "out/notes.txt").read_text() == "version 1"
    assert (ws / "out/step1.txt").exists() and not (ws / "out/step2.txt").exists()
    # the timeline now shows steps 2 and 3 on the abandoned branch; the chat lost the later answer
    expect(page.locator("#checkpoints .checkpoint[data-kind=step][data-branch=abandoned]")).to_have_count(2)
    expect(step1).to_have_attribute("data-branch", "live")
    expect(page.locator("#messages")).not_to_contain_text("Three versions written.")
    task = page.locator("#tasks .task").first  # the plan went back too (a task event)
    expect(task).to_have_attribute("data-status", "in_progress")
    expect(task.locator(".progress")).to_have_text("1/3")
    screenshot(page, "checkpoints-restored")

    # Fork from step 1: a new session, and the page switches to it. Its details are opened and read
    # back as they are after the restore (nothing left to change) before Fork is pressed.
    step1.locator(".cp-row").click()
    expect(step1).to_have_class(re.compile(r"\bopen\b"))
    expect(details.locator(".would-change")).to_have_text("no files to change")
    step1.locator("button.fork").click()
    expect(page.locator("#chat-session")).to_contain_text("notes~")
    forked = page.locator("#chat-session").inner_text()
    expect(page.locator("#checkpoints-session")).to_have_text(forked)
    expect(page.locator("#checkpoints-status")).to_contain_text(f"Forked {forked} from step 1/3 done")
    expect(page.locator("#sessions").get_by_role("button", name=forked, exact=True)).to_be_visible()
    expect(page.locator("#messages .msg.user").first).to_contain_text("write the notes")
    assert (daemon.home / "state/sessions" / f"{forked}.jsonl").exists()
    screenshot(page, "checkpoints-forked")

    # an error from a method is one line in the page: a checkpoint removed while the page shows it
    page.locator("#sessions").get_by_role("button", name="notes", exact=True).click()
    expect(page.locator("#checkpoints-session")).to_have_text("notes")
    step2 = page.locator("#checkpoints .checkpoint[data-kind=step][data-step='2']")
    step2.locator(".cp-row").click()
    expect(step2.locator("button.fork")).to_be_visible()
    # a redraw (a new checkpoint arrives) changes the timeline in place: the open details and their
    # buttons stay the very nodes a person is about to press
    fork_button = step2.locator("button.fork").element_handle()
    before = page.locator("#checkpoints .checkpoint").count()
    page.fill("#chat-input", "one more thing")
    page.click("#chat-send")
    wait_until(lambda: page.locator("#checkpoints .checkpoint").count() > before, "the new turn's checkpoint shown")
    assert fork_button.evaluate("node => node.isConnected")
    expect(step2).to_have_class(re.compile(r"\bopen\b"))
    gone = step2.get_attribute("data-id")
    rows.remove(daemon.home / "state/checkpoints", gone)
    step2.locator("button.fork").click()
    expect(page.locator("#error")).to_have_text(f"no checkpoint {gone!r}; `clawgate checkpoints list` shows the ids")
    assert "\n" not in page.locator("#error").inner_text()
    assert not page.errors, page.errors  # type: ignore[attr-defined]
