"""Chat commands on every channel, through its harness (tests/conformance/platforms/) and the real daemon: each
command of the router's set is answered by the router (never by the model), at once even while a run is busy,
and in a shared conversation a guest's /stop and /new leave the owner's run and history alone."""

from __future__ import annotations

import json
import re
import threading
from typing import Callable

import pytest

from tests.conformance.harness import PlatformHarness
from tests.conformance.test_conformance import settle_window
from tests.fakes.anthropic.request_text import last_user_text
from tests.fakes.anthropic_api import FakeAnthropic, Reply, text
from tests.waiting import DEFAULT_TIMEOUT, wait_past, wait_until

# Each command as a person sends it, and what shows that the router (not the model) answered it.
EXPECTED: list[tuple[str, Callable[[str], bool]]] = [
    ("/help", lambda a: a.startswith("Commands (answered at once") and "/status" in a and "/undo" in a),
    ("/start", lambda a: a.startswith("Hi, I'm ") and "/help" in a),
    ("/new", lambda a: a.startswith("Started a new conversation.")),
    ("/status", lambda a: bool(re.search(r"· model \S+ · provider ", a)) and "This chat: idle" in a),
    ("/tasks", lambda a: a == "No active tasks in this chat."),
    ("/undo", lambda a: a.startswith(("Cannot undo", "Checkpoints are not available"))),
    ("/undo 2", lambda a: a.startswith(("Cannot undo", "Checkpoints are not available"))),
    ("/approve nosuchrequest", lambda a: a.startswith("This request is no longer pending")),
    ("/deny nosuchrequest", lambda a: a.startswith("This request is no longer pending")),
    ("/stop", lambda a: a == "Nothing is running right now."),
]


def _answer_to(platform: PlatformHarness, chat: str, user: str, command: str, *, group: bool = False) -> str:
    """Send `command` and wait for the answer it gets in `chat` (every part of it, where it is long for the
    platform's messages)."""
    before = len(platform.command_answers(chat))
    platform.send_command(user, command, group=group)
    wait_until(lambda: platform.command_answers(chat)[before:], f"the answer to {command}")
    wait_past(settle_window())
    return "\n".join(platform.command_answers(chat)[before:])


def _held(release: threading.Event, marker: str, answer: str) -> Callable[[dict], Reply]:
    """A model that keeps the run asked about `marker` busy until `release` is set; echoes the rest."""

    def respond(body: dict) -> Reply:
        asked = last_user_text(body)
        if marker in asked:
            release.wait(DEFAULT_TIMEOUT)
            return text(answer)
        return text("echo: " + asked)

    return respond


@pytest.mark.slow  # a round trip per command: make test runs it, make test-fast leaves it out
def test_every_chat_command_is_answered_by_the_router(platform: PlatformHarness, channel_daemon,
                                                      fake_model: FakeAnthropic) -> None:
    channel_daemon()
    chat = platform.dm_chat(platform.owner)
    for command, is_the_routers in EXPECTED:
        answer = _answer_to(platform, chat, platform.owner, command)
        assert is_the_routers(answer), f"{command} was answered {answer!r}"
    assert fake_model.requests == []  # no command reached the model
    platform.send_dm(platform.owner, "an ordinary question")  # the model hears what is not a command
    wait_until(lambda: "echo: an ordinary question" in platform.replies(chat), "the model's answer")
    asked = json.dumps([r["messages"] for r in fake_model.requests])
    assert not [c for c, _ in EXPECTED if c.split()[0] in asked]


def test_a_command_is_answered_while_a_run_is_busy(platform: PlatformHarness, channel_daemon,
                                                   fake_model: FakeAnthropic) -> None:
    release = threading.Event()
    fake_model.responder = _held(release, "a long job", "the long job is done")
    channel_daemon()
    chat = platform.dm_chat(platform.owner)
    try:
        platform.send_dm(platform.owner, "a long job")
        fake_model.wait_requests(1, timeout=DEFAULT_TIMEOUT)
        status = _answer_to(platform, chat, platform.owner, "/status")
        assert "This chat: working" in status
        assert "the long job is done" not in platform.replies(chat)  # answered before the run's answer
    finally:
        release.set()
    wait_until(lambda: "the long job is done" in platform.replies(chat), "the run's answer")
    assert len(fake_model.requests) == 1


def test_a_guest_cannot_stop_or_reset_the_owners_shared_conversation(platform: PlatformHarness, channel_daemon,
                                                                      fake_model: FakeAnthropic) -> None:
    release = threading.Event()
    whole = "the owner's long job is done: " + " ".join(f"part {i}" for i in range(20))
    fake_model.responder = _held(release, "the owner's long job", whole)
    daemon = channel_daemon()
    group = platform.group_chat()
    try:
        platform.send_group(platform.owner, "the owner's long job", mention=True)
        fake_model.wait_requests(1, timeout=DEFAULT_TIMEOUT)
        stop = _answer_to(platform, group, platform.friend, "/stop", group=True)
        assert stop == "Nothing of yours is running or waiting; the run going on here is someone else's."
        new = _answer_to(platform, group, platform.friend, "/new", group=True)
        assert new.startswith("Only the owner can start this shared conversation afresh")
    finally:
        release.set()
    wait_until(lambda: whole in platform.replies(group), "the owner's whole answer")
    wait_past(settle_window())
    assert len(fake_model.requests) == 1  # the owner's run was never stopped nor started again
    assert not list((daemon.home / "state/sessions").glob("*.archived"))  # the history was not reset
