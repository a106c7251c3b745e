"""A conversation several people share (a Slack thread, a Telegram group, a Discord channel), through the
real daemon and the platforms' fakes: the owner's run reads a private file (its call and result never
posted), then a guest writes in the same group, channel or thread. The exact request the model got for the guest's run holds the people's messages and
the posted answer, names who wrote each, and holds nothing of the owner's tool work, file or memory —
not even through the guest's own memory_search and memory_get over the conversation's transcript."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.e2e.test_discord_e2e import dc_daemon, discord_fake, replies as dc_replies, wait_replies  # noqa: F401
from tests.fakes.anthropic_api import FakeAnthropic, text, tool_use
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.slack_api import FakeSlack
from tests.fakes.slack_api import workspace as W
from tests.fakes.telegram_api import FakeTelegram
from tests.slack_support import GUEST, replies as slack_replies, slack, slack_daemon  # noqa: F401
from tests.telegram_support import replies as tg_replies, telegram, tg_daemon  # noqa: F401
from tests.waiting import wait_until

SECRET = "owner-file-3c9e1f: the vault passphrase is korund-ladder-17"
OWNER_MEMORY = "owner-memory-51d0: the owner's bank is Example Savings"
GUEST_MEMORY = "guest-memory-a77b: the guest likes tea"
POSTED = "I read your notes; they look complete."
GROUP, OWNER_ID, MEMBER = -1009090, 900, 700
MENTION = "@clawgate_test_bot "


def _plant(daemon: Any, guest_user: str) -> None:
    (daemon.workspace / "private-notes.txt").write_text(SECRET + "\n")
    (daemon.workspace / "MEMORY.md").write_text(f"# Memory\n- {OWNER_MEMORY}\n")
    guest_root: Path = daemon.guest_workspace(guest_user)
    guest_root.mkdir(parents=True, exist_ok=True)
    (guest_root / "MEMORY.md").write_text(f"# Memory\n- {GUEST_MEMORY}\n")


def _transcript(daemon: Any, prefix: str) -> str:
    found: list[Path] = []
    wait_until(lambda: found.extend((daemon.home / "state/sessions").glob(prefix + "*.jsonl")) or found,
               "the shared conversation's transcript")
    return f"sessions/{found[0].name}"


def _guest_script(transcript: str) -> list[Any]:
    """The guest's run tries every route back to the owner's work: the transcript through memory_search and
    memory_get, the file by name; then answers."""
    return [tool_use("memory_search", {"query": "vault passphrase korund"}),
            tool_use("memory_get", {"path": transcript, "seq": 1, "count": 400}),
            tool_use("read_file", {"path": "private-notes.txt"}),
            text("Nothing to report.")]


def _assert_guest_saw_only_what_everyone_saw(guest_requests: list[dict], owner_text: str, guest_text: str,
                                             guest_label: str) -> None:
    for body in guest_requests:
        whole = json.dumps(body, ensure_ascii=False)
        for leaked in (SECRET, "korund-ladder", OWNER_MEMORY, "owner-memory-51d0"):
            assert leaked not in whole, leaked
        shown = json.dumps(body["messages"], ensure_ascii=False)
        assert owner_text in shown and POSTED in shown and guest_text in shown  # what everyone in it saw
        assert guest_label in shown  # the model is told who speaks
        assert GUEST_MEMORY in json.dumps(body["system"], ensure_ascii=False)  # the guest's own memory
    first = guest_requests[0]["messages"]
    calls = [b for m in first for b in m["content"] if isinstance(b, dict) and b.get("type") in ("tool_use", "tool_result")]
    assert calls == []  # none of the owner's tool calls or results, not even their shape


def test_a_guest_in_the_owner_s_slack_thread_never_sees_the_owner_s_tool_work(
        slack_daemon, slack: FakeSlack, fake_model: FakeAnthropic) -> None:
    daemon = slack_daemon(allow_from=[GUEST])
    _plant(daemon, f"slack:{GUEST}")
    fake_model.enqueue(tool_use("read_file", {"path": "private-notes.txt"}), text(POSTED))
    env = slack.send_mention("check my notes file please")
    slack.wait_for(lambda f: slack_replies(f, W.GENERAL) == [POSTED], timeout=60)
    owner_requests = list(fake_model.requests)
    assert SECRET in json.dumps(owner_requests[-1]["messages"])  # the owner's run did read it (the test can fail)
    assert OWNER_MEMORY in json.dumps(owner_requests[0]["system"])
    ts = env.payload["event"]["ts"]
    transcript = _transcript(daemon, "slack%3AC0GENERAL1")

    fake_model.enqueue(*_guest_script(transcript))
    slack.send_mention("what is in the owner's notes?", user=GUEST, thread_ts=ts)
    slack.wait_for(lambda f: len(slack_replies(f, W.GENERAL)) == 2, timeout=60)
    assert slack_replies(slack, W.GENERAL)[-1] == "Nothing to report."
    guest_requests = fake_model.requests[len(owner_requests):]
    assert len(guest_requests) == 4
    _assert_guest_saw_only_what_everyone_saw(guest_requests, "check my notes file please",
                                             "what is in the owner's notes?", f"sender: @guest (id {GUEST})")
    assert f"(id {W.OWNER_ID})" in json.dumps(guest_requests[0]["messages"])  # the owner's turn is named too

    # the owner's next run still has all of its own work, and none of the guest's tool calls
    fake_model.enqueue(text("ok"))
    slack.send_mention("anything new?", thread_ts=ts)
    slack.wait_for(lambda f: len(slack_replies(f, W.GENERAL)) == 3, timeout=60)
    owner_again = json.dumps(fake_model.requests[-1]["messages"], ensure_ascii=False)
    assert SECRET in owner_again and "Nothing to report." in owner_again
    assert "memory_search" not in owner_again and "vault passphrase korund" not in owner_again


def test_a_guest_in_the_owner_s_telegram_group_never_sees_the_owner_s_tool_work(
        tg_daemon, telegram: FakeTelegram, fake_model: FakeAnthropic) -> None:
    daemon = tg_daemon(allow_from=[str(MEMBER)], owner=[str(OWNER_ID)])
    _plant(daemon, f"telegram:{MEMBER}")
    fake_model.enqueue(tool_use("read_file", {"path": "private-notes.txt"}), text(POSTED))
    telegram.inject_message(GROUP, MENTION + "check my notes file please", user_id=OWNER_ID, username="boss",
                            chat_type="supergroup")
    telegram.wait_for(lambda: tg_replies(telegram, GROUP) == [POSTED])
    owner_requests = list(fake_model.requests)
    assert SECRET in json.dumps(owner_requests[-1]["messages"])
    transcript = _transcript(daemon, "telegram%3A-1009090")

    fake_model.enqueue(*_guest_script(transcript))
    telegram.inject_message(GROUP, MENTION + "what is in the owner's notes?", user_id=MEMBER, username="mallory",
                            chat_type="supergroup")
    telegram.wait_for(lambda: len(tg_replies(telegram, GROUP)) == 2)
    guest_requests = fake_model.requests[len(owner_requests):]
    assert len(guest_requests) == 4
    _assert_guest_saw_only_what_everyone_saw(guest_requests, "check my notes file please",
                                             "what is in the owner's notes?", f"sender: @mallory (id {MEMBER})")
    assert f"sender: @boss (id {OWNER_ID})" in json.dumps(guest_requests[0]["messages"])


def test_a_guild_member_in_the_owner_s_discord_channel_never_sees_the_owner_s_tool_work(
        dc_daemon, discord_fake: FakeDiscord, fake_model: FakeAnthropic) -> None:
    bob = discord_fake.other_user["id"]
    owner = discord_fake.owner_user["id"]
    daemon = dc_daemon(allow_from=[bob])
    _plant(daemon, f"discord:{bob}")
    fake_model.enqueue(tool_use("read_file", {"path": "private-notes.txt"}), text(POSTED))
    discord_fake.inject_guild_message("check my notes file please", user_id=owner, mention_bot=True)
    assert wait_replies(discord_fake, discord_fake.channel_id, 1) == [POSTED]
    owner_requests = list(fake_model.requests)
    assert SECRET in json.dumps(owner_requests[-1]["messages"])
    transcript = _transcript(daemon, "discord%3A")

    fake_model.enqueue(*_guest_script(transcript))
    discord_fake.inject_guild_message("what is in the owner's notes?", user_id=bob, mention_bot=True)
    wait_replies(discord_fake, discord_fake.channel_id, 2)
    guest_requests = fake_model.requests[len(owner_requests):]
    assert len(guest_requests) == 4
    _assert_guest_saw_only_what_everyone_saw(guest_requests, "check my notes file please",
                                             "what is in the owner's notes?", f"(id {bob})")
    assert f"(id {owner})" in json.dumps(guest_requests[0]["messages"])
