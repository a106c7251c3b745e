"""A guest's /stop and /new in the owner's Matrix room, through the real daemon, a real Synapse and real
matrix-nio clients as the people: the owner's run and conversation stay as they are."""

from __future__ import annotations

import threading

from tests.e2e.test_matrix_e2e import bot_notices
from tests.fakes.anthropic_api import FakeAnthropic, Reply, text
from tests.matrix_support import humans, log_tail, matrix_bot, mx_daemon  # noqa: F401
from tests.telegram_support import user_texts
from tests.waiting import DEFAULT_TIMEOUT


def test_a_guest_in_the_owners_room_cannot_stop_or_reset_the_owners_run(mx_daemon, matrix_bot, humans,
                                                                        fake_model: FakeAnthropic) -> None:
    alice, mallory = humans("owner"), humans("mallory")
    daemon = mx_daemon(owner=[alice.user_id], group_policy="open")
    bot = matrix_bot.user.user_id
    room = alice.room(bot, mallory.user_id)
    alice.wait(lambda: len(alice.members(room)) == 3, "everyone to join", describe=log_tail(daemon))
    release = threading.Event()

    def held(body: dict) -> Reply:
        asked = user_texts(body)[-1]
        if "owner's long job" in asked:
            release.wait(DEFAULT_TIMEOUT)
            return text("the owner's job is done")
        return text("echo: " + asked)

    fake_model.responder = held
    alice.send(room, "the owner's long job", mention=bot)
    fake_model.wait_requests(1, timeout=DEFAULT_TIMEOUT)
    mallory.send(room, "/stop", mention=bot)
    alice.wait(lambda: any("someone else's" in b for b in bot_notices(alice, room, bot)), "the guest's /stop answer",
               describe=log_tail(daemon))
    mallory.send(room, "/new", mention=bot)
    alice.wait(lambda: any(b.startswith("Only the owner can start this shared conversation")
                           for b in bot_notices(alice, room, bot)), "the guest's /new answer", describe=log_tail(daemon))
    assert not list((daemon.home / "state/sessions").glob("*.archived"))
    release.set()
    alice.wait(lambda: "the owner's job is done" in bot_notices(alice, room, bot), "the owner's answer",
               describe=log_tail(daemon))
    assert "Stopped." not in bot_notices(alice, room, bot) and len(fake_model.requests) == 1
