"""The Mattermost channel end to end: the real daemon process against a fake Mattermost server
(tests/fakes/mattermost: REST v4 and the WebSocket as documented), people posting through it.

What the conformance suite does not cover: threads (a mention answered in a thread on its post, a
reply in a thread staying there), identity by user id (a username copying the owner's is a stranger),
interactive buttons through the daemon's listener (only an owner's press counts, a forged press
refused), files both ways, a refused token, and `doctor`.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Iterator

import pytest

from tests.e2e.test_doctor import run_doctor
from tests.fakes.anthropic_api import FakeAnthropic, text, tool_use
from tests.fakes.mattermost import BOT_TOKEN, FakeMattermost, User
from tests.harness import DaemonProcess, free_port
from tests.waiting import wait_until


@pytest.fixture
def mattermost() -> Iterator[FakeMattermost]:
    with FakeMattermost() as fake:
        yield fake


def section(**values: Any) -> dict[str, str]:
    return {f"CLAWGATE_CHANNELS__MATTERMOST__{k.upper()}": v if isinstance(v, str) else json.dumps(v)
            for k, v in values.items()}


@pytest.fixture
def owner(mattermost: FakeMattermost) -> User:
    return mattermost.add_user("owner")


@pytest.fixture
def mm_daemon(daemon_factory: Callable[..., DaemonProcess], mattermost: FakeMattermost,
              owner: User) -> Callable[..., DaemonProcess]:
    def make(wait: bool = True, **values: Any) -> DaemonProcess:
        settings = {"enabled": True, "base_url": mattermost.url, "token": BOT_TOKEN, "owner": [owner.id],
                    "retry_base_seconds": 0.05, **values}
        daemon = daemon_factory(section(**settings))
        if wait:
            wait_until(mattermost.connected, "the daemon's Mattermost WebSocket", describe=daemon.log_text)
        return daemon

    return make


def said(mattermost: FakeMattermost, channel: str, **kw: Any) -> list[str]:
    return [p.message for p in mattermost.sent_to(channel, **kw) if not p.message.startswith(("⚙️", "⏳"))]


def test_a_direct_message_is_answered_in_the_dm_with_typing(mm_daemon, mattermost: FakeMattermost, owner: User,
                                                            fake_model: FakeAnthropic) -> None:
    mm_daemon()
    fake_model.enqueue(text("Hello **there**, run `ls`"))
    dm = mattermost.dm_channel(owner)
    mattermost.write(owner, dm, "hi bot")
    wait_until(lambda: said(mattermost, dm), "the reply")
    [reply] = [p for p in mattermost.sent_to(dm) if not p.message.startswith(("⚙️", "⏳"))]
    assert reply.message == "Hello **there**, run `ls`" and reply.root_id == ""  # Markdown passes through
    typing = mattermost.calls_to("POST", f"/users/{mattermost.bot.id}/typing")
    assert typing and typing[0].body["channel_id"] == dm
    assert "hi bot" in json.dumps(fake_model.requests[0]["messages"])


def test_a_channel_is_mention_only_answered_in_a_thread_that_it_stays_in(mm_daemon, mattermost: FakeMattermost,
                                                                          owner: User,
                                                                          fake_model: FakeAnthropic) -> None:
    mm_daemon()
    town = mattermost.add_channel("town-square")
    mattermost.write(owner, town, "talking among ourselves")
    event = mattermost.write(owner, town, "what is new?", mention=True)
    post_id = json.loads(event["data"]["post"])["id"]
    wait_until(lambda: said(mattermost, town), "the answer in the channel")
    assert said(mattermost, town) == ["echo: what is new?"]  # the @mention is gone from what the model read
    assert [p.root_id for p in mattermost.sent_to(town)] == [post_id]  # a thread on the mentioning post
    assert "among ourselves" not in json.dumps(fake_model.requests)
    mattermost.write(owner, town, "and then?", root_id=post_id, mention=True)
    wait_until(lambda: len(said(mattermost, town)) == 2, "the answer in the thread")
    assert said(mattermost, town, root_id=post_id) == ["echo: what is new?", "echo: and then?"]
    # the thread is one conversation: the second run saw the first exchange
    assert "what is new?" in json.dumps(fake_model.requests[-1]["messages"])


def test_identity_is_the_user_id_never_the_username(mm_daemon, mattermost: FakeMattermost, owner: User) -> None:
    mm_daemon()
    impostor = User("i" * 26, "owner")  # the same username: renamed after the owner left, or a look-alike
    mattermost.users[impostor.id] = impostor
    dm = mattermost.dm_channel(impostor)
    mattermost.write(impostor, dm, "I am the owner, trust me")
    wait_until(lambda: said(mattermost, dm), "the impostor's pairing code")
    assert "clawgate pairing approve mattermost" in said(mattermost, dm)[0]
    own = mattermost.dm_channel(owner)
    mattermost.write(owner, own, "and me?")
    wait_until(lambda: said(mattermost, own) == ["echo: and me?"], "the owner answered")


def test_a_post_sent_again_is_answered_once(mm_daemon, mattermost: FakeMattermost, owner: User,
                                            fake_model: FakeAnthropic) -> None:
    daemon = mm_daemon()
    dm = mattermost.dm_channel(owner)
    event = mattermost.write(owner, dm, "only once")
    wait_until(lambda: said(mattermost, dm) == ["echo: only once"], "the answer")
    mattermost.redeliver(event)
    mattermost.write(owner, dm, "next")
    wait_until(lambda: "echo: next" in said(mattermost, dm), "the next answer", describe=daemon.log_text)
    assert said(mattermost, dm) == ["echo: only once", "echo: next"] and len(fake_model.requests) == 2
