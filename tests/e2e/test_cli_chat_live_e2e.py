"""The interactive `clawgate chat` on a pseudo-terminal, against the real daemon, for as long as a
person leaves it open: it keeps reading while idle (answers from another client, a cron job's
result, the gateway's ticks and pings), survives a dropped connection and a daemon restart and
resumes without losing or repeating an answer, and Ctrl-C stops a run instead of killing the chat."""

from __future__ import annotations

import asyncio
import json
import signal
import threading
from typing import Any

import pytest

from tests.fakes.anthropic_api import FakeAnthropic, last_user_block, text
from tests.harness import DaemonProcess
from tests.pty_terminal import Terminal
from tests.waiting import wait_until, wait_until_async

# Short keepalive so an idle minute holds many ticks and pings, and a client that stopped reading is
# found out within seconds (a send queue of 16 frames fills in eight seconds of ticks).
KEEPALIVE = {"CLAWGATE_GATEWAY__TICK_SECONDS": "0.5", "CLAWGATE_GATEWAY__PING_SECONDS": "2",
             "CLAWGATE_GATEWAY__SEND_QUEUE": "16"}
# How long the chat sits idle. The chat that dropped (it read the socket only during a run) was dropped
# by whichever came first: its send queue full of unread ticks (16 frames at 2 a second: 8 s) or a ping
# unanswered (sent every 2 s, 2 s to answer: 4 s). A minute is seven times the slower of the two, holds
# 120 ticks and 30 of the gateway's pings, and two of the client's own keepalive pings (websockets'
# default: every 20 s, 20 s to answer) answered by the gateway. Longer proves nothing more: with these
# settings every timer in play has gone round several times by then.
IDLE_SECONDS = 60.0
PROMPT = r"you>"


@pytest.fixture
def keepalive_daemon(daemon_factory) -> DaemonProcess:
    return daemon_factory(KEEPALIVE)


def _gated(fake_model: FakeAnthropic) -> threading.Event:
    """Messages naming 'gated' are answered only once the returned gate is set; others are echoed."""
    gate = threading.Event()

    def respond(body: dict[str, Any]):
        last = last_user_block(body)  # what was typed last (a stopped message may share its turn)
        if "gated" in last:
            gate.wait(120)
            return text("the gated answer")
        return text("echo " + next((w for w in last.split() if w.startswith("note-")), "?"))

    fake_model.responder = respond
    return gate


async def _idle_for(daemon: DaemonProcess, seconds: float) -> None:
    """Let `seconds` of the gateway's ticks go by (seen by a probe client): the chat sits idle meanwhile."""
    async with daemon.client(events=["tick"]) as probe:
        first: list[float] = []

        async def long_enough() -> bool:
            async for frame in probe.events():
                first.append(first[0] if first else frame["payload"]["ts"])
                return frame["payload"]["ts"] - first[0] >= seconds
            return False
        await wait_until_async(long_enough, f"{seconds:g} s of ticks", timeout=seconds + 120, interval=0)


async def _ask_from_another_client(daemon: DaemonProcess, *notes: str) -> None:
    async with daemon.client(subscribe=["main"]) as other:
        for note in notes:
            answer = await other.chat(f"please repeat {note}", session="main")
            assert answer["text"] == f"echo {note}", answer


@pytest.mark.waits
async def test_an_idle_chat_stays_connected_and_shows_answers_from_elsewhere(keepalive_daemon, fake_model) -> None:
    daemon = keepalive_daemon
    _gated(fake_model)
    term = Terminal(daemon, "chat")
    try:
        term.read_until(PROMPT)
        notes = [f"note-{n}" for n in range(1, 9)]
        await _ask_from_another_client(daemon, *notes)  # eight answers reach it while it sits at its prompt
        for note in notes:
            await asyncio.to_thread(term.read_until, rf"agent> echo {note}\b")
        assert term.text.count("(answer to a message sent from another client)") == 8, term.text
        await _idle_for(daemon, IDLE_SECONDS)
        assert term.proc.poll() is None, term.text
        term.type("still there? note-9")
        await asyncio.to_thread(term.read_until, r"agent> echo note-9\b")
        assert "closed the connection" not in term.text and "reconnect" not in term.text, term.text
        assert "too slow" not in daemon.log_text()
        term.type("/quit")
        assert await asyncio.to_thread(term.wait) == 0
    finally:
        term.close()


async def test_an_answer_arriving_while_typing_leaves_the_line_being_typed_intact(daemon, fake_model) -> None:
    _gated(fake_model)
    term = Terminal(daemon, "chat")
    try:
        term.read_until(PROMPT)
        term.press(b"half a mess")  # typed, not sent yet
        await asyncio.to_thread(term.read_until, r"half a mess")
        await _ask_from_another_client(daemon, "note-7")
        await asyncio.to_thread(term.read_until, r"agent> echo note-7\b")
        term.type("age note-8")  # the rest of the line, then Enter
        await asyncio.to_thread(term.read_until, r"agent> echo note-8\b")
        assert last_user_block(fake_model.requests[-1]) == "half a message note-8"
        term.type("/quit")
        assert await asyncio.to_thread(term.wait) == 0
    finally:
        term.close()


async def test_a_dropped_connection_is_resumed_without_loss_or_repeat(keepalive_daemon, fake_model) -> None:
    daemon = keepalive_daemon
    _gated(fake_model)
    term = Terminal(daemon, "chat")
    try:
        term.read_until(PROMPT)
        term.type("first note-1")
        await asyncio.to_thread(term.read_until, r"agent> echo note-1\b")
        # The terminal freezes (a suspended laptop): the gateway's pings go unanswered and it drops
        # the connection; an answer on the session is given meanwhile, to another client only.
        term.signal(signal.SIGSTOP)
        try:
            async with daemon.client(events=["tick"]) as probe:
                async def dropped() -> bool:
                    return (await probe.request("status"))["clients"] == 1
                await wait_until_async(dropped, "the gateway to drop the frozen chat", interval=0.2)
            await _ask_from_another_client(daemon, "note-2")
        finally:
            term.signal(signal.SIGCONT)
        await asyncio.to_thread(term.read_until, r"\(reconnected\)")
        await asyncio.to_thread(term.read_until, r"agent> echo note-2\b")
        # The daemon restarts: the chat comes back by itself and goes on.
        await asyncio.to_thread(daemon.restart)
        await asyncio.to_thread(term.read_until, r"\(reconnected\)", count=2)
        term.type("after the restart note-3")
        await asyncio.to_thread(term.read_until, r"agent> echo note-3\b")
        for note in ("note-1", "note-2", "note-3"):
            assert term.text.count(f"agent> echo {note}") == 1, term.text  # each answer once
        assert term.text.count("(the connection to the gateway dropped; reconnecting…)") == 2, term.text
        term.type("/quit")
        assert await asyncio.to_thread(term.wait) == 0
    finally:
        term.close()


def test_ctrl_c_stops_the_run_and_a_second_one_quits(daemon, fake_model) -> None:
    gate = _gated(fake_model)
    term = Terminal(daemon, "chat")
    try:
        term.read_until(PROMPT)
        term.type("a long gated job")
        wait_until(lambda: len(fake_model.requests) >= 1, "the run to reach the model")
        term.type("/new")
        term.read_until(r"still working on your last message: /stop it first")
        term.type("meanwhile note-5")
        term.read_until(r"\(queued: it runs after the current answer\)")
        term.press(b"\x03")  # Ctrl-C
        term.read_until(r"\(stopping the run; Ctrl-C again to quit\)")
        term.read_until(r"agent> Stopped\.")
        term.read_until(r"agent> echo note-5\b")  # the queued message still runs
        assert term.proc.poll() is None
        assert "the gated answer" not in term.text
        term.type("/new")
        term.read_until(r"\(started a new conversation")
        term.press(b"\x03")  # at an idle prompt: quits
        assert term.wait() == 0
    finally:
        gate.set()
        term.close()


def test_ctrl_c_stops_a_one_message_chat(daemon, fake_model) -> None:
    gate = _gated(fake_model)
    term = Terminal(daemon, "chat", "-m", "a long gated job")
    try:
        wait_until(lambda: len(fake_model.requests) >= 1, "the run to reach the model")
        term.signal(signal.SIGINT)  # what Ctrl-C sends to a program reading no keys
        term.read_until(r"\(stopping the run; Ctrl-C again to quit\)")
        term.read_until(r"Stopped\.")
        assert term.wait() == 130  # interrupted, as after any Ctrl-C that ends a command
    finally:
        gate.set()
        term.close()
    assert "the gated answer" not in term.text


def test_a_cron_result_appears_in_an_open_chat_labelled(daemon, fake_model) -> None:
    agenda = "Agenda: " + ", ".join(f"item {n}" for n in range(1, 40)) + "."
    fake_model.enqueue_for("stand-up", text(f"Stand-up starts in 5 minutes.\n\n{agenda}"))
    term = Terminal(daemon, "chat")
    try:
        term.read_until(PROMPT)
        added = daemon.cli("cron", "add", "--every", "1h", "--name", "stand-up", "--deliver", "gateway:main",
                           "-m", "Remind me of the stand-up", "--json")
        assert added.returncode == 0, added.stderr
        job = json.loads(added.stdout)
        ran = daemon.cli("cron", "run", job["id"])
        assert ran.returncode == 0, ran.stderr
        screen = term.read_until(r"item 39\.")
        assert "agent> Stand-up starts in 5 minutes." in screen, screen
        assert '(from cron job "stand-up", every 1h)' in screen, screen
        term.type("/quit")
        assert term.wait() == 0
    finally:
        term.close()
    def recorded() -> str | None:  # the run is recorded once its answer is
        listed = daemon.cli("cron", "runs", job["id"])
        return listed.stdout if " ok " in listed.stdout else None
    runs = wait_until(recorded, "the run recorded as ok", interval=0.2)
    (line,) = runs.strip().splitlines()  # one line per run, the result folded onto it and cut
    assert "Stand-up starts in 5 minutes. Agenda: item 1, item 2" in line and line.endswith("…"), line
    whole = json.loads(daemon.cli("cron", "runs", job["id"], "--json").stdout)
    assert [r["result"] for r in whole] == [f"Stand-up starts in 5 minutes.\n\n{agenda}"], whole


def test_a_chat_command_is_answered_once_in_the_terminal(daemon, fake_model) -> None:
    """The gateway answers a command in the chat.send response and, to the asking connection, as a `chat`
    event right behind it: `chat -m /status` must end with the answer (not wait for a run that never comes),
    and the prompt must print it once, not a second time as someone else's."""
    one = daemon.cli("chat", "-m", "/status", timeout=60)
    assert one.returncode == 0, one.stderr
    assert "This chat: idle" in one.stdout and one.stdout.count("This chat:") == 1, one.stdout
    term = Terminal(daemon, "chat")
    try:
        term.read_until(PROMPT)
        term.type("/status")
        term.read_until(r"This chat: idle")
        term.type("/tasks")
        term.read_until(r"No active tasks in this chat\.")
        term.type("/quit")
        assert term.wait() == 0
    finally:
        term.close()
    assert term.text.count("This chat: idle") == 1, term.text
    assert "sent from another client" not in term.text
    assert not fake_model.requests  # commands never reach the model
