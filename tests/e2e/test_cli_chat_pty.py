"""`clawgate chat` on a real terminal (a pty) against the real daemon and the fake Messages API:
tool steps as lines, streamed turns apart, and an approval asked as y/N instead of a silent wait."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.fakes.anthropic.request_text import tool_results
from tests.fakes.anthropic_api import FakeAnthropic, text, tool_use
from tests.harness import ROOT
from tests.pty_terminal import Terminal
from tests.waiting import wait_until

PYTHON_42 = {"argv": ["python3", "-c", "print(42)"]}  # python3 is not on the default allowlist: approval


def _tool_results(fake_model: FakeAnthropic) -> list[str]:
    return tool_results(fake_model.requests)


def test_chat_asks_yes_no_for_an_approval_and_runs_the_call(daemon, fake_model: FakeAnthropic) -> None:
    fake_model.enqueue(tool_use("exec", PYTHON_42), text("It printed 42."))
    term = Terminal(daemon, "chat", "-m", "run python for me")
    try:
        screen = term.read_until(r"\[y/N\]")
        assert "python3 -c 'print(42)'" in screen.split("[y/N]")[-2], screen
        term.type("y")
        term.read_until("It printed 42.")
        assert term.wait() == 0
    finally:
        term.close()
    assert "approved" in term.seen and re.search(r"· exec .*python3", term.seen), term.seen
    assert re.search(r"✓ exec ok \(\d+ ms\)", term.seen), term.seen
    assert any(r.strip().startswith("42") or "42" in r for r in _tool_results(fake_model))
    assert re.search(r"approval ap_\w+ waiting .*`clawgate approvals approve ap_", daemon.log_text())


def test_chat_no_at_the_prompt_denies_the_call(daemon, fake_model: FakeAnthropic) -> None:
    fake_model.enqueue(tool_use("exec", PYTHON_42), text("Fine, I did not run it."))
    term = Terminal(daemon, "chat", "-m", "run python for me")
    try:
        term.read_until(r"\[y/N\]")
        term.type("")  # Enter alone is the default: no
        term.read_until("I did not run it.")
        assert term.wait() == 0
    finally:
        term.close()
    assert "denied" in term.seen and "✗ exec denied" in term.seen, term.seen
    assert not any(r.strip() == "42" for r in _tool_results(fake_model))


def test_streamed_turns_are_separated_and_tool_steps_shown(daemon, fake_model: FakeAnthropic) -> None:
    (daemon.workspace / "notes.txt").write_text("hello\n")
    fake_model.enqueue(tool_use("read_file", {"path": "notes.txt"}, text="Step 1/2."), text("Step 2/2."))
    term = Terminal(daemon, "chat", "-m", "two steps")  # no --stream: a terminal streams by default
    try:
        term.read_until("Step 2/2.")
        assert term.wait() == 0
    finally:
        term.close()
    assert "Step 1/2.Step 2/2." not in term.seen
    lines = [line.strip() for line in term.seen.replace("\r", "").split("\n")]
    assert "Step 1/2." in lines and "Step 2/2." in lines, term.seen
    assert lines.index("Step 1/2.") < next(i for i, l in enumerate(lines) if l.startswith("· read_file")) \
        < lines.index("Step 2/2."), term.seen


def test_approvals_commands_answer_a_chat_without_a_terminal(daemon, fake_model: FakeAnthropic) -> None:
    fake_model.enqueue(tool_use("exec", PYTHON_42), text("It printed 42."))
    chat = subprocess.Popen([sys.executable, "-m", "clawgate.gateway.cli", "chat", "-m", "run python"], env=daemon.env,
                            cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        def listed_pending() -> tuple[str, list[str]] | None:
            listed = daemon.cli("approvals", "list")
            assert listed.returncode == 0, listed.stderr
            found = re.findall(r"^(ap_\w+)\s", listed.stdout, re.M)
            return (listed.stdout, found) if found else None
        listing, pending = wait_until(listed_pending, "the approval in `clawgate approvals list`", interval=0.2)
        assert "python3 -c 'print(42)'" in listing
        approved = daemon.cli("approvals", "approve", pending[0])
        assert approved.returncode == 0 and f"approved {pending[0]}" in approved.stdout
        out, err = chat.communicate(timeout=30)
    finally:
        if chat.poll() is None:
            chat.kill()
    assert chat.returncode == 0 and out.strip() == "It printed 42.", (out, err)
    assert f"clawgate approvals approve {pending[0]}" in err  # no terminal: the hint line instead of y/N
    again = daemon.cli("approvals", "deny", pending[0])
    assert again.returncode == 1 and again.stderr.count("\n") == 1 and "no pending approval" in again.stderr
    assert daemon.cli("approvals", "list").stdout.strip() == "no approvals waiting"


def test_the_interactive_chat_reads_a_file_on_stdin(daemon, fake_model: FakeAnthropic, tmp_path: Path) -> None:
    script = tmp_path / "lines.txt"
    script.write_text("hello\n/quit\n")
    fake_model.enqueue(text("Hi there."))
    with open(script) as stdin:
        out = subprocess.run([sys.executable, "-m", "clawgate.gateway.cli", "chat"], env=daemon.env, cwd=ROOT, stdin=stdin,
                             capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "agent> Hi there." in out.stdout, (out.stdout, out.stderr)


def test_the_interactive_chat_asks_for_an_approval_at_its_prompt(daemon, fake_model: FakeAnthropic) -> None:
    fake_model.enqueue(tool_use("exec", PYTHON_42), text("It printed 42."))
    term = Terminal(daemon, "chat")
    try:
        term.read_until(r"you>")
        term.type("run python for me")
        term.read_until(r"approve\? \[y/N\]")  # the prompt asks
        term.read_until(r"\? approve exec: .*python3 -c 'print\(42\)'.*answer y or n")  # above it: what
        term.type("y")
        term.read_until(r"agent> It printed 42\.")
        term.type("/quit")
        assert term.wait() == 0
    finally:
        term.close()
    # "  approved" is a line of its own. When the answer comes after the prompt was drawn again, the line
    # follows a "you>" that the prompt's escapes (left out of `text`) erase on the screen.
    assert re.search(r"^(?:you>)?\s+approved$", term.text, re.MULTILINE), term.text
    assert re.search(r"✓ exec ok \(\d+ ms\)", term.text), term.text
    assert term.text.count("It printed 42.") == 1, term.text  # streamed, then not printed again
    assert any("42" in r for r in _tool_results(fake_model))


def test_an_approval_asked_before_the_chat_opened_is_asked_at_its_prompt(daemon, fake_model: FakeAnthropic) -> None:
    """`approval` events are not resumed: a terminal opened while a run already waits for an answer lists the
    pending approvals of its session and asks, instead of leaving the run to time out as denied."""
    fake_model.enqueue(tool_use("exec", PYTHON_42), text("It printed 42."))
    sent = subprocess.Popen([sys.executable, "-m", "clawgate.gateway.cli", "chat", "-m", "run python for me"],
                            env=daemon.env, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        def pending() -> bool:
            return "exec" in daemon.cli("approvals", "list").stdout
        wait_until(pending, "the approval waiting before any terminal chat is open", interval=0.2)
        term = Terminal(daemon, "chat")
        try:
            term.read_until(r"\? exec: exec python3 -c 'print\(42\)'")
            term.read_until(r"\? approval ap_\w+ waits: /approve ap_\w+")
            approval = re.search(r"approval (ap_\w+) waits", term.text).group(1)  # type: ignore[union-attr]
            term.read_until(r"you>")
            term.type(f"/approve {approval}")
            term.read_until(r"you>\s+approved")
            term.read_until(r"agent> It printed 42\.")  # the run's answer reaches this open chat too
            term.type("/quit")
            assert term.wait() == 0
        finally:
            term.close()
        out, _ = sent.communicate(timeout=60)
        assert "It printed 42." in out
    finally:
        if sent.poll() is None:
            sent.kill()
    assert any("42" in r for r in _tool_results(fake_model))
