"""The conformance cases, run against every chat channel through its harness (tests/conformance/platforms/)
and the real daemon: what users of any platform can count on.

Negative checks wait past the longest retry the daemon would make (the dispatcher's first backoff, a send's
retries) before asserting that nothing more arrived.
"""

from __future__ import annotations

import json
import re
import shlex
import sqlite3

import pytest

from clawgate.agent.core.visible import visible
from clawgate.channels.kit.progress import STATUS_ARGS

from tests.conformance.conftest import DELIVERY_RETRY, RETRY_BASE
from tests.conformance.harness import PlatformHarness
from tests.fakes.anthropic_api import FakeAnthropic, text, tool_use
from tests.waiting import wait_past, wait_until


def settle_window() -> float:
    """Within this, a reply (or a retry of one) that is going to be sent has been: the dispatcher's first
    backoff (as the daemons here are configured) and a send's own retries (RETRY_BASE x (1 + 2 + 4))."""
    return DELIVERY_RETRY + RETRY_BASE * 7


def test_a_duplicate_event_is_answered_once(platform: PlatformHarness, channel_daemon, fake_model: FakeAnthropic) -> None:
    channel_daemon()
    chat = platform.dm_chat(platform.owner)
    event = platform.send_dm(platform.owner, "only once please")
    wait_until(lambda: platform.replies(chat) == ["echo: only once please"], "the reply")
    wait_until(lambda: platform.acknowledged(event), "the event acknowledged")
    platform.redeliver(event)
    marker = platform.send_dm(platform.owner, "and this")  # handled after the redelivery, in order
    wait_until(lambda: platform.acknowledged(marker), "the marker acknowledged")
    wait_until(lambda: len(platform.replies(chat)) >= 2, "the marker's reply")
    wait_past(settle_window())
    assert platform.replies(chat) == ["echo: only once please", "echo: and this"]
    assert len(fake_model.requests) == 2


@pytest.mark.slow  # kills and restarts the daemon: make test runs it, make test-fast leaves it out
def test_a_crash_between_intake_and_acknowledgement_loses_nothing(platform: PlatformHarness, channel_daemon,
                                                                  fake_model: FakeAnthropic) -> None:
    daemon = channel_daemon()
    chat = platform.dm_chat(platform.owner)
    warm = platform.send_dm(platform.owner, "warm up")
    wait_until(lambda: platform.replies(chat) == ["echo: warm up"], "the warm-up reply")
    wait_until(lambda: platform.acknowledged(warm), "the warm-up acknowledged")
    db = sqlite3.connect(daemon.home / "state/clawgate.db", timeout=1, isolation_level=None)
    wait_until(lambda: db.execute("SELECT count(*) FROM outbox WHERE status='pending'").fetchone()[0] == 0,
               "the warm-up reply marked delivered")
    db.execute("BEGIN IMMEDIATE")  # hold the write lock: the daemon receives the event but cannot accept it
    try:
        event = platform.send_dm(platform.owner, "do not lose me")
        wait_past(platform.ack_window)  # an unblocked daemon would have acknowledged it by now
        assert not platform.acknowledged(event)
        daemon.kill()  # SIGKILL: received, not accepted, not acknowledged
    finally:
        db.execute("ROLLBACK")
        db.close()
    daemon.start()
    wait_until(lambda: len(platform.replies(chat)) >= 2, "the reply after the restart")
    wait_until(lambda: platform.acknowledged(event), "the event acknowledged after the restart")
    wait_past(settle_window())
    assert platform.replies(chat) == ["echo: warm up", "echo: do not lose me"]
    asked = [json.dumps(r["messages"][-1]) for r in fake_model.requests]
    assert sum("do not lose me" in a for a in asked) == 1


def test_a_long_markdown_reply_arrives_chunked_with_its_formatting(platform: PlatformHarness, channel_daemon,
                                                                  fake_model: FakeAnthropic) -> None:
    paragraphs = [f"Paragraph {i} has **bold words {i}** and `code {i}` " + "filler " * 40 for i in range(40)]
    code = "```python\n" + "\n".join(f"value_{i} = {i}" for i in range(30)) + "\n```"
    reply = "\n\n".join(paragraphs[:20] + [code] + paragraphs[20:])
    assert len(reply) > 10_000
    fake_model.enqueue(text(reply))
    channel_daemon()
    chat = platform.dm_chat(platform.owner)
    platform.send_dm(platform.owner, "a long answer please")
    wait_until(lambda: any("Paragraph 39" in r for r in platform.replies(chat)), "the last chunk")
    wait_past(settle_window())
    chunks = platform.replies(chat)
    assert len(chunks) > 1
    if platform.max_chars:
        assert all(len(c.encode("utf-16-le")) // 2 <= platform.max_chars for c in chunks)
    joined = "\n".join(chunks)
    for i in range(40):  # every paragraph once, in order, none cut
        assert joined.count(f"Paragraph {i} has bold words {i} and code {i}") == 1
    assert [int(n) for n in re.findall(r"Paragraph (\d+) has", joined)] == list(range(40))
    holder = [c for c in chunks if "value_0 = 0" in c]
    assert len(holder) == 1 and "value_29 = 29" in holder[0]  # the code block stayed whole
    kinds = set().union(*platform.formats(chat))
    assert {"bold", "code"} <= kinds and ("pre" in kinds or "code_block" in kinds)


def test_the_access_matrix(platform: PlatformHarness, channel_daemon, fake_model: FakeAnthropic) -> None:
    channel_daemon()
    # an unpaired stranger in private gets a pairing code, and nothing reaches the model
    platform.send_dm(platform.stranger, "hello, who are you?")
    stranger = platform.dm_chat(platform.stranger)
    wait_until(lambda: f"clawgate pairing approve {platform.name}" in platform.first_reply(stranger), "the pairing reply")
    assert re.search(r"\b[A-Z2-9]{8}\b", platform.first_reply(stranger))
    # a group message without a mention is not for the bot; with one it is answered
    group = platform.group_chat()
    quiet = platform.send_group(platform.owner, "just chatting among ourselves", mention=False)
    wait_until(lambda: platform.acknowledged(quiet), "the group message acknowledged")
    platform.send_group(platform.owner, "what time is it?", mention=True)
    wait_until(lambda: platform.replies(group), "the answer in the group")
    wait_past(settle_window())
    assert platform.replies(group) == ["echo: what time is it?"]
    assert fake_model.requests and all("among ourselves" not in json.dumps(r) for r in fake_model.requests)


def test_only_an_owner_approves(platform: PlatformHarness, channel_daemon, fake_model: FakeAnthropic) -> None:
    daemon = channel_daemon()
    fake_model.enqueue(tool_use("exec", {"argv": ["touch", "approved.txt"]}), text("Created approved.txt."))
    owner_chat = platform.dm_chat(platform.owner)
    platform.send_dm(platform.owner, "make a file")
    approval = wait_until(lambda: platform.prompts(owner_chat), "the approval prompt")[0]
    platform.press_approval(platform.friend, approval, True)  # a guest of the agent, not its owner
    wait_until(lambda: platform.approval_answers(platform.friend), "the answer to the guest")
    assert "Only the owner" in platform.approval_answers(platform.friend)[0]
    assert not (daemon.workspace / "approved.txt").exists()
    platform.press_approval(platform.owner, approval, True)
    wait_until(lambda: "Created approved.txt." in platform.replies(owner_chat), "the run to finish")
    assert (daemon.workspace / "approved.txt").exists()


@pytest.mark.slow  # waits out the platform's retry-after: make test runs it, make test-fast leaves it out
def test_a_rate_limit_is_waited_out_as_asked(platform: PlatformHarness, channel_daemon, fake_model: FakeAnthropic) -> None:
    channel_daemon()
    chat = platform.dm_chat(platform.owner)
    platform.send_dm(platform.owner, "warm up")
    wait_until(lambda: platform.replies(chat) == ["echo: warm up"], "the warm-up reply")
    before = len(platform.send_attempts())
    platform.inject_429(2)
    platform.send_dm(platform.owner, "slowly")
    wait_until(lambda: "echo: slowly" in platform.replies(chat), "the reply after the rate limit")
    wait_past(settle_window())
    attempts = platform.send_attempts()[before:]
    assert len(attempts) == 2 and platform.replies(chat).count("echo: slowly") == 1
    assert attempts[1] - attempts[0] >= 2.0 - 0.05  # not retried before the platform said (a lower bound only)


def test_a_permanent_error_is_not_retried(platform: PlatformHarness, channel_daemon, fake_model: FakeAnthropic) -> None:
    channel_daemon()
    chat = platform.dm_chat(platform.owner)
    platform.send_dm(platform.owner, "warm up")
    wait_until(lambda: platform.replies(chat) == ["echo: warm up"], "the warm-up reply")
    before = len(platform.send_attempts())
    platform.inject_permanent_error()
    platform.send_dm(platform.owner, "this one is refused")
    wait_until(lambda: len(platform.send_attempts()) > before, "the refused attempt")
    # the user is told on the channel what failed and where the whole answer is: one more send, no retry
    wait_until(lambda: any("could not be delivered here" in r for r in platform.replies(chat)), "the notice")
    wait_past(settle_window())
    assert len(platform.send_attempts()) == before + 2 and "echo: this one is refused" not in platform.replies(chat)
    (notice,) = [r for r in platform.replies(chat) if "could not be delivered here" in r]
    assert "web page" in notice
    platform.send_dm(platform.owner, "still there?")  # the channel keeps serving
    wait_until(lambda: "echo: still there?" in platform.replies(chat), "the next reply")


@pytest.mark.slow  # waits out the channel's retries: make test runs it, make test-fast leaves it out
def test_a_bad_token_is_one_line_and_the_rest_keeps_serving(platform: PlatformHarness, channel_daemon,
                                                            fake_model: FakeAnthropic) -> None:
    platform.break_token()
    daemon = channel_daemon()
    wait_until(lambda: [line for line in daemon.output if f"channel {platform.name} failed" in line], "the error line")
    lines = [line for line in daemon.output if f"channel {platform.name} failed" in line]
    assert len(lines) == 1 and "Traceback" not in "\n".join(daemon.output)
    listed = json.loads(daemon.cli("channels", "--json").stdout)
    mine = next(row for row in listed if row["name"] == platform.name)
    assert mine["state"] == "failed" and mine["reason"]
    answer = daemon.cli("chat", "-m", "are you there?", "--session", "other")  # another channel: the gateway's
    assert answer.returncode == 0 and answer.stdout.strip() == "echo: are you there?"


@pytest.mark.slow  # waits out the channel's retries: make test runs it, make test-fast leaves it out
def test_a_platform_that_goes_away_is_retried_and_the_rest_keeps_serving(platform: PlatformHarness, channel_daemon,
                                                                         fake_model: FakeAnthropic) -> None:
    daemon = channel_daemon()
    chat = platform.dm_chat(platform.owner)
    platform.send_dm(platform.owner, "warm up")
    wait_until(lambda: platform.replies(chat) == ["echo: warm up"], "the warm-up reply")
    platform.stop_server()

    def state() -> str:
        rows = json.loads(daemon.cli("channels", "--json").stdout)
        return str(next(row for row in rows if row["name"] == platform.name)["state"])

    wait_until(lambda: state() == "retrying", "the channel shown as retrying")
    answer = daemon.cli("chat", "-m", "are you there?", "--session", "other")
    assert answer.returncode == 0 and answer.stdout.strip() == "echo: are you there?"
    assert daemon.alive() and state() == "retrying"


def _turn_blocks(requests: list[dict], said: str) -> str:
    """The runtime block and text of the user turn that carried `said`, in the first request that has it."""
    for body in requests:
        for message in body["messages"]:
            texts = [b.get("text", "") for b in message["content"] if isinstance(b, dict) and b.get("type") == "text"]
            if any(said in t for t in texts):
                return "\n".join(texts)
    raise AssertionError(f"no request carried {said!r}")


def test_the_model_is_told_who_speaks_in_a_shared_conversation(platform: PlatformHarness, channel_daemon,
                                                               fake_model: FakeAnthropic) -> None:
    """A group, channel or room several people share: every turn names its sender, by the id the platform
    vouches for (a display name alone can be copied); one decision, the kit's, for every platform."""
    channel_daemon()
    group = platform.group_chat()
    platform.send_group(platform.owner, "a word from the owner", mention=True)
    wait_until(lambda: platform.replies(group) == ["echo: a word from the owner"], "the owner's answer")
    platform.send_group(platform.friend, "a word from a friend", mention=True)
    wait_until(lambda: len(platform.replies(group)) == 2, "the friend's answer")
    owner_turn = _turn_blocks(fake_model.requests, "a word from the owner")
    friend_turn = _turn_blocks(fake_model.requests, "a word from a friend")
    assert "· sender: " in owner_turn and f"(id {platform.owner})" in owner_turn
    assert "· sender: " in friend_turn and f"(id {platform.friend})" in friend_turn


def test_a_private_conversation_names_no_sender(platform: PlatformHarness, channel_daemon,
                                                fake_model: FakeAnthropic) -> None:
    channel_daemon()
    chat = platform.dm_chat(platform.owner)
    platform.send_dm(platform.owner, "just between us")
    wait_until(lambda: platform.replies(chat) == ["echo: just between us"], "the answer")
    turn = _turn_blocks(fake_model.requests, "just between us")
    assert turn.startswith("[runtime] ") and "sender:" not in turn


# What a command may hold that a platform could show as something else: its markup characters, mentions
# of everyone, and a right-to-left override (which would show what follows it reversed).
SPECIALS = "& < > * _ \\ ` @everyone <@U123> <!channel> @room \u202e exe.txt "


def test_an_approval_prompt_shows_the_whole_command_as_it_is(platform: PlatformHarness, channel_daemon,
                                                             fake_model: FakeAnthropic) -> None:
    payload = (SPECIALS * (5000 // len(SPECIALS) + 1))[:5000].strip()
    fake_model.enqueue(tool_use("exec", {"argv": ["touch", payload]}), text("Not run, as you said."))
    channel_daemon()
    chat = platform.dm_chat(platform.owner)
    platform.send_dm(platform.owner, "make that file")
    approval = wait_until(lambda: platform.prompts(chat), "the approval prompt")[0]  # the buttons come last
    view = platform.approval_view(chat)
    command = "exec " + shlex.join(["touch", payload])
    assert len(command) > 5000
    assert "".join(shown.code for shown in view) == visible(command)  # every part, in order, nothing cut
    assert "<U+202E>" in view[0].code and all("\u202e" not in shown.text for shown in view)
    assert [shown.buttons for shown in view] == [False] * (len(view) - 1) + [True]
    if platform.max_chars:
        assert len(view) > 1  # 5,000 characters fit no chat message with its frame
    said = "\n".join(shown.text for shown in view)
    assert "'touch' is not on the exec allowlist (tools.exec.allowlist)" in said  # the reason, as written
    platform.press_approval(platform.owner, approval, False)
    wait_until(lambda: "Not run, as you said." in platform.replies(chat), "the run's answer after the denial")


# Every character that is markup somewhere: Slack's & < >, HTML, Markdown's marks and escapes, mentions.
REPLY = ("Specials: a < b && c > d, AT&T, <!channel> <@U123> @everyone @here @room, `code <b>&amp;</b>`, "
         "5 \\* 3, snake\\_case, \\(tools\\.exec\\.allowlist\\), back\\\\slash, a \\` tick, ~tilde | pipe # hash")
READ = ("Specials: a < b && c > d, AT&T, <!channel> <@U123> @everyone @here @room, code <b>&amp;</b>, "
        "5 * 3, snake_case, (tools.exec.allowlist), back\\slash, a ` tick, ~tilde | pipe # hash")


def test_a_reply_with_every_special_character_reads_as_written(platform: PlatformHarness, channel_daemon,
                                                               fake_model: FakeAnthropic) -> None:
    fake_model.enqueue(text(REPLY))
    channel_daemon()
    chat = platform.dm_chat(platform.owner)
    platform.send_dm(platform.owner, "show me the specials")
    wait_until(lambda: platform.replies(chat), "the reply")
    assert platform.replies(chat) == [READ]


def test_a_status_line_quotes_arguments_readably_escaped_and_short(platform: PlatformHarness, channel_daemon,
                                                                   fake_model: FakeAnthropic) -> None:
    path = "notes/" + SPECIALS * 10
    fake_model.enqueue(tool_use("read_file", {"path": path}), text("Read it."))
    channel_daemon()
    chat = platform.dm_chat(platform.owner)
    platform.send_dm(platform.owner, "read that")
    wait_until(lambda: "Read it." in platform.replies(chat), "the answer")
    wait_until(lambda: platform.status_lines(chat), "the status line")
    [line] = platform.status_lines(chat)
    frame = "⚙️ Working… step 1: read_file ()"
    assert line.startswith("⚙️ Working… step 1: read_file (path: notes/& < > * _ \\ ` @everyone <@U123> <!channel> "
                           "@room <U+202E> exe")  # key: value, hidden characters shown, nothing formatted
    assert line.endswith("…)") and len(line) <= len(frame) + STATUS_ARGS  # short, and says it is cut
    assert "{" not in line and '"' not in line and "\u202e" not in line  # no JSON, no override
