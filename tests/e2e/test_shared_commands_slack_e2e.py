"""A guest's commands in the owner's Slack thread, through the real daemon, the real slack_sdk and FakeSlack:
a guest's /stop and /new (typed after a mention; the /clawgate slash command acts on the channel, not the
thread) leave the owner's run and conversation alone; the guest's /stop takes their own waiting message out of the queue."""

from __future__ import annotations

import threading

from tests.fakes.anthropic_api import FakeAnthropic, Reply, text
from tests.fakes.slack_api import FakeSlack
from tests.fakes.slack_api import workspace as W
from tests.commands_support import wait_queued
from tests.slack_support import GUEST, replies, slack, slack_daemon  # noqa: F401
from tests.telegram_support import user_texts
from tests.waiting import DEFAULT_TIMEOUT


def _in_thread(fake: FakeSlack, ts: str) -> list[str]:
    return [m["text"] for m in fake.posted(W.GENERAL) if m.get("thread_ts") == ts
            and not m["text"].startswith(("⚙️", "⏳"))]


def _next_in_thread(fake: FakeSlack, ts: str, count: int) -> str:
    return fake.wait_for(lambda f: len(_in_thread(f, ts)) >= count and _in_thread(f, ts), timeout=DEFAULT_TIMEOUT)[
        count - 1]


def test_a_guest_in_the_owners_thread_stops_only_their_own_message(slack_daemon, slack: FakeSlack,
                                                                   fake_model: FakeAnthropic) -> None:
    daemon = slack_daemon(allow_from=[GUEST])
    release = threading.Event()

    def held(body: dict) -> Reply:
        asked = user_texts(body)[-1]
        if "owner's long job" in asked:
            release.wait(DEFAULT_TIMEOUT)
            return text("the owner's job is done")
        return text("echo: " + asked)

    fake_model.responder = held
    env = slack.send_mention("the owner's long job")
    ts = env.payload["event"]["ts"]
    fake_model.wait_requests(1, timeout=DEFAULT_TIMEOUT)

    slack.send_mention("/stop", user=GUEST, thread_ts=ts)
    assert "someone else's" in _next_in_thread(slack, ts, 1)
    slack.send_mention("/new", user=GUEST, thread_ts=ts)
    assert _next_in_thread(slack, ts, 2).startswith("Only the owner can start this shared conversation")
    cmd = slack.slash_command("/clawgate", "stop", user=GUEST, channel=W.GENERAL)
    slack.wait_for(lambda f: cmd.acked and any(m["text"] == "Nothing is running right now." and not m.get("thread_ts")
                                               for m in f.posted(W.GENERAL)), timeout=DEFAULT_TIMEOUT)
    assert not list((daemon.home / "state/sessions").glob("*.archived"))

    slack.send_mention("the guest's question", user=GUEST, thread_ts=ts)  # waits behind the owner's run
    wait_queued(daemon, f"slack:{W.GENERAL}:{ts}")
    slack.send_mention("/stop", user=GUEST, thread_ts=ts)
    assert _next_in_thread(slack, ts, 3) == "Cancelled before it started (stopped by /stop)."
    release.set()
    assert _next_in_thread(slack, ts, 4) == "the owner's job is done"
    assert len(fake_model.requests) == 1  # the owner's run was never stopped; the guest's question never ran
    slack.send_mention("and now?", thread_ts=ts)
    assert _next_in_thread(slack, ts, 5) == "echo: and now?"
    assert any("the owner's long job" in t for t in user_texts(fake_model.requests[-1]))
    assert all("the guest's question" not in t for t in user_texts(fake_model.requests[-1]))
