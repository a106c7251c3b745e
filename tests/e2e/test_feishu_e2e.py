"""The Feishu / Lark channel end to end: the real daemon with the real lark-oapi SDK against a fake Open
Platform (tests/fakes/feishu: the token and message API, and the long connection speaking the SDK's own
protobuf frames), people writing through it.

What the conformance suite does not cover: a reply to the message answered, groups mention-only with the
`@_user_1` placeholder gone, threads (`reply_in_thread`), identity by open_id, approval cards (only an
owner's press counts, a press without the prompt's secret refused, the buttons gone with the outcome), a
cron result delivered to a Feishu chat, a file sent, refused credentials and `doctor`, a lost connection
shown as retrying and made again, and two apps as two accounts at once.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Iterator

import pytest

from tests.conformance.platforms.feishu import markdown_of, plain
from tests.e2e.test_doctor import run_doctor
from tests.fakes.anthropic_api import FakeAnthropic, file_sender, text, tool_use
from tests.fakes.feishu import APP_ID, APP_SECRET, FakeFeishu, Message, User
from tests.harness import DaemonProcess
from tests.waiting import wait_until

STATUS = ("⚙️", "⏳")


@pytest.fixture
def feishu() -> Iterator[FakeFeishu]:
    with FakeFeishu() as fake:
        yield fake


def section(prefix: str = "CLAWGATE_CHANNELS__FEISHU__", **values: Any) -> dict[str, str]:
    return {f"{prefix}{k.upper()}": v if isinstance(v, str) else json.dumps(v) for k, v in values.items()}


@pytest.fixture
def owner(feishu: FakeFeishu) -> User:
    return feishu.add_user("owner")


@pytest.fixture
def fs_daemon(daemon_factory: Callable[..., DaemonProcess], feishu: FakeFeishu,
              owner: User) -> Callable[..., DaemonProcess]:
    def make(**values: Any) -> DaemonProcess:
        settings = {"enabled": True, "domain": feishu.url, "app_id": APP_ID, "app_secret": APP_SECRET,
                    "owner": [owner.open_id], "retry_base_seconds": 0.05, **values}
        daemon = daemon_factory(section(**settings))
        wait_until(feishu.connected, "the daemon's Feishu long connection", describe=daemon.log_text)
        return daemon

    return make


def answers(feishu: FakeFeishu, chat: str) -> list[Message]:
    return [m for m in feishu.sent_to(chat) if m.msg_type == "post" and not markdown_of(m).startswith(STATUS)]


def said(feishu: FakeFeishu, chat: str) -> list[str]:
    return [markdown_of(m) for m in answers(feishu, chat)]


def test_a_private_message_is_answered_as_a_reply_in_rich_text(fs_daemon, feishu: FakeFeishu, owner: User,
                                                               fake_model: FakeAnthropic) -> None:
    daemon = fs_daemon()
    fake_model.enqueue(text("Hello **there**, run `ls`"))
    chat = feishu.p2p_chat(owner)
    event = feishu.write(owner, chat, "hi bot")
    wait_until(lambda: said(feishu, chat), "the reply", describe=daemon.log_text)
    [reply] = answers(feishu, chat)
    assert reply.msg_type == "post" and markdown_of(reply) == "Hello **there**, run `ls`"
    assert reply.parent_id == event["event"]["message"]["message_id"]  # a reply to the message answered
    assert "hi bot" in json.dumps(fake_model.requests[0]["messages"])
    assert feishu.acknowledged(event)
    code, checks, _ = run_doctor(daemon)
    assert checks["feishu"]["status"] == "ok" and "as the bot 'clawbot'" in checks["feishu"]["detail"], checks["feishu"]
    assert APP_SECRET not in daemon.log_text()


def test_a_group_is_mention_only_and_answered_in_a_thread(fs_daemon, feishu: FakeFeishu, owner: User,
                                                          fake_model: FakeAnthropic) -> None:
    daemon = fs_daemon(reply_in_thread=True)
    group = feishu.add_group("team")
    quiet = feishu.write(owner, group, "talking among ourselves")
    wait_until(lambda: feishu.acknowledged(quiet), "the unaddressed message acknowledged")
    event = feishu.write(owner, group, "what is new?", mention=True)
    wait_until(lambda: said(feishu, group), "the answer in the group", describe=daemon.log_text)
    assert said(feishu, group) == ["echo: what is new?"]  # the @_user_1 placeholder is gone
    [reply] = answers(feishu, group)
    asked = event["event"]["message"]["message_id"]
    assert reply.parent_id == asked and reply.thread_id  # a thread on the message that mentioned the bot
    assert "among ourselves" not in json.dumps(fake_model.requests)
    turn = json.dumps(fake_model.requests[-1]["messages"][-1])
    assert f"@owner (id {owner.open_id})" in turn  # named by the open_id Feishu vouches for, and the name
    feishu.write(owner, group, "and then?", mention=True, root_id=asked, thread_id=reply.thread_id)  # in the thread
    wait_until(lambda: len(said(feishu, group)) == 2, "the answer in the thread", describe=daemon.log_text)
    later = answers(feishu, group)[1]
    assert later.root_id == asked and later.thread_id == reply.thread_id  # it stays in the thread
    assert "what is new?" in json.dumps(fake_model.requests[-1]["messages"])  # one conversation: the thread's


def test_identity_is_the_open_id_never_the_name(fs_daemon, feishu: FakeFeishu, owner: User) -> None:
    fs_daemon()
    impostor = feishu.add_user("owner")  # the same name, another person
    chat = feishu.p2p_chat(impostor)
    feishu.write(impostor, chat, "I am the owner, trust me")
    wait_until(lambda: said(feishu, chat), "the impostor's pairing code")
    assert "clawgate pairing approve feishu" in said(feishu, chat)[0]


def _card(feishu: FakeFeishu, chat: str) -> Message | None:
    return next((m for m in feishu.sent_to(chat) if m.msg_type == "interactive"), None)


def test_only_an_owner_press_on_a_card_approves_and_a_forged_press_is_refused(
        fs_daemon, feishu: FakeFeishu, owner: User, fake_model: FakeAnthropic) -> None:
    friend = feishu.add_user("friend")
    daemon = fs_daemon(allow_from=[friend.open_id])
    group = feishu.add_group("team")
    fake_model.enqueue(tool_use("exec", {"argv": ["touch", "approved.txt"]}), text("Created approved.txt."))
    feishu.write(owner, group, "make a file", mention=True)
    card = wait_until(lambda: _card(feishu, group), "the approval card", describe=daemon.log_text)
    assert markdown_of(card).startswith("🔐")
    buttons = [b for el in json.loads(card.content)["elements"] if el["tag"] == "action" for b in el["actions"]]
    assert [b["text"]["content"] for b in buttons] == ["Approve", "Deny"]
    forged = feishu.deliver("card.action.trigger", {
        "operator": {"open_id": owner.open_id}, "action": {"tag": "button", "value": {**buttons[0]["value"],
                                                                                      "secret": "guessed"}},
        "context": {"open_message_id": card.id, "open_chat_id": group}})
    wait_until(lambda: feishu.acknowledged(forged), "the forged press answered")
    assert feishu.answers[forged["header"]["event_id"]]["data"]["toast"]["content"] == "Unknown prompt."
    answer = feishu.press(friend, card, True)  # a guest in the group: not theirs to approve
    assert "owner" in answer["data"]["toast"]["content"].lower(), answer
    assert not (daemon.workspace / "approved.txt").exists()
    feishu.press(owner, card, True)
    wait_until(lambda: "Created approved.txt." in said(feishu, group), "the run to finish", describe=daemon.log_text)
    assert (daemon.workspace / "approved.txt").exists()
    edited = wait_until(lambda: [m for m in feishu.sent_to(group) if m.id == card.id and m.edits], "the outcome")[0]
    assert not [el for el in json.loads(edited.content)["elements"] if el["tag"] == "action"]  # buttons gone


def test_a_cron_result_and_a_file_reach_a_feishu_chat(fs_daemon, feishu: FakeFeishu, owner: User,
                                                      fake_model: FakeAnthropic) -> None:
    daemon = fs_daemon()
    chat = feishu.p2p_chat(owner)
    added = daemon.cli("cron", "add", "--every", "1h", "--deliver", f"feishu:{chat}", "--message",
                       "Tell me to water the plants", "--name", "plants")
    assert added.returncode == 0, added.stderr
    fake_model.enqueue(text("Time to water the plants 🌱"))
    job = json.loads(daemon.cli("cron", "list", "--json").stdout)[0]
    assert daemon.cli("cron", "run", job["id"]).returncode == 0
    wait_until(lambda: "Time to water the plants 🌱" in said(feishu, chat), "the cron result", describe=daemon.log_text)

    (daemon.workspace / "summary.txt").write_bytes(b"the summary\n" * 50)
    fake_model.enqueue(tool_use("send_file", {"path": "summary.txt", "caption": "Here it is."}), text("Sent."))
    feishu.write(owner, chat, "send me the summary")
    wait_until(lambda: "Sent." in said(feishu, chat), "the run's answer", describe=daemon.log_text)
    [sent] = [m for m in feishu.sent_to(chat) if m.msg_type == "file"]
    key = json.loads(sent.content)["file_key"]
    assert feishu.files[key] == {"name": "summary.txt", "data": b"the summary\n" * 50}
    assert "Here it is." in [plain(m) for m in said(feishu, chat)]  # the caption, escaped as plain text


def test_files_people_send_are_saved_and_one_over_the_limit_refused(fs_daemon, feishu: FakeFeishu,
                                                                          owner: User,
                                                                          fake_model: FakeAnthropic) -> None:
    daemon = fs_daemon(max_file_bytes=1000)
    chat = feishu.p2p_chat(owner)
    fake_model.enqueue(text("got the file"))
    feishu.write_file(owner, chat, "notes.txt", b"remember the milk\n")
    wait_until(lambda: "got the file" in said(feishu, chat), "the answer", describe=daemon.log_text)
    saved = wait_until(lambda: list((daemon.workspace / "inbox").rglob("*notes*")), "the saved file")
    assert [p.read_bytes() for p in saved] == [b"remember the milk\n"]
    assert len(feishu.calls_to("GET", "/im/v1/messages/")) == 1
    feishu.write_file(owner, chat, "big.bin", b"x" * 5000)
    wait_until(lambda: len(said(feishu, chat)) >= 2, "the refusal", describe=daemon.log_text)
    assert "too large" in plain(said(feishu, chat)[1])
    # Feishu's event gives no size: the file is fetched, then refused, and nothing of it kept
    assert not list((daemon.workspace / "inbox").rglob("*big*"))


def test_refused_credentials_fail_the_channel_with_the_fix_and_doctor_says_so(daemon_factory,
                                                                             feishu: FakeFeishu) -> None:
    wrong = "w" * 32
    good = section(enabled=True, domain=feishu.url, app_id=APP_ID, app_secret=APP_SECRET)
    daemon = daemon_factory(section(enabled=True, domain=feishu.url, app_id=APP_ID, app_secret=wrong))

    def row() -> dict[str, Any]:
        listed = daemon.cli("channels", "--json")
        try:  # the CLI may answer before the daemon's control socket is up: asked again
            return next(r for r in json.loads(listed.stdout) if r["name"] == "feishu")
        except ValueError:
            return {"state": f"no answer: {listed.stderr.strip()}"}

    wait_until(lambda: row()["state"] == "failed", "the channel failed", describe=daemon.log_text)
    assert "refused the app's credentials" in row()["reason"] and "app_secret" in row()["reason"]
    assert wrong not in daemon.log_text() and "Traceback" not in daemon.log_text()
    code, checks, _ = run_doctor(daemon, env=good)
    assert "as the bot 'clawbot'" in checks["feishu"]["detail"], checks["feishu"]
    code, checks, _ = run_doctor(daemon, env=section(enabled=True, domain=feishu.url, app_id=APP_ID, app_secret=wrong))
    assert checks["feishu"]["status"] == "fail" and "channels.feishu.app_secret" in checks["feishu"]["fix"]


def test_a_lost_connection_is_shown_retrying_and_made_again(fs_daemon, feishu: FakeFeishu, owner: User) -> None:
    daemon = fs_daemon()
    chat = feishu.p2p_chat(owner)
    feishu.write(owner, chat, "before")
    wait_until(lambda: said(feishu, chat) == ["echo: before"], "the first answer")
    feishu.stop()

    def state() -> str:
        rows = json.loads(daemon.cli("channels", "--json").stdout)
        return str(next(r for r in rows if r["name"] == "feishu")["state"])

    wait_until(lambda: state() == "retrying", "the channel retrying", describe=daemon.log_text)
    feishu.start()  # the same port, the same people
    wait_until(feishu.connected, "the long connection again", timeout=120, describe=daemon.log_text)
    feishu.write(owner, chat, "after")
    wait_until(lambda: said(feishu, chat) == ["echo: before", "echo: after"], "the answer after the reconnect")


def test_an_answer_feishu_took_just_before_a_kill_is_not_sent_again(fs_daemon, feishu: FakeFeishu,
                                                                     owner: User) -> None:
    """Killed after Feishu stored the answer and before its HTTP answer came back (so nothing recorded it
    as sent), the daemon sends the answer again after the restart with the same `uuid`: Feishu answers with
    the message it made instead of sending a second."""
    daemon = fs_daemon()
    chat = feishu.p2p_chat(owner)
    feishu.hold_message_answers()
    feishu.write(owner, chat, "hello")
    wait_until(lambda: said(feishu, chat) == ["echo: hello"], "the answer stored by Feishu")
    daemon.kill()
    feishu.release_message_answers()
    daemon.start()

    def asked() -> int:
        return sum("echo: hello" in str(c.body.get("content")) for c in feishu.send_requests(chat))

    wait_until(lambda: asked() == 2, "the answer sent again after the restart", describe=daemon.log_text)
    assert said(feishu, chat) == ["echo: hello"]


def test_a_file_feishu_took_just_before_a_kill_is_not_sent_again(fs_daemon, feishu: FakeFeishu, owner: User,
                                                                 fake_model: FakeAnthropic) -> None:
    """A file the agent sends is two messages, its caption and the file, each with a `uuid` of its own
    (derived from the file's send_key): killed after Feishu stored the caption, the daemon sends the file
    again after the restart, and there is one caption and one file."""
    daemon = fs_daemon()
    chat = feishu.p2p_chat(owner)
    (daemon.workspace / "summary.txt").write_bytes(b"the summary\n")
    fake_model.responder = file_sender("summary.txt", "Here it is.")
    feishu.hold_message_answers()
    feishu.write(owner, chat, "send me the summary")
    wait_until(lambda: "Here it is." in [plain(m) for m in said(feishu, chat)], "the caption stored by Feishu",
               describe=daemon.log_text)
    daemon.kill()
    feishu.release_message_answers()
    daemon.start()
    wait_until(lambda: "Sent." in said(feishu, chat), "the run's answer after the restart", describe=daemon.log_text)
    captions = [c for c in feishu.send_requests(chat) if "Here it is" in str(c.body.get("content"))]
    assert len(captions) >= 2  # asked for again after the restart (and maybe on the held request's timeout)
    assert [plain(m) for m in said(feishu, chat)].count("Here it is.") == 1
    [sent] = [m for m in feishu.sent_to(chat) if m.msg_type == "file"]
    assert feishu.files[json.loads(sent.content)["file_key"]]["data"] == b"the summary\n"


def test_two_apps_each_answer_their_own_people(daemon_factory, feishu: FakeFeishu, owner: User) -> None:
    """`[channels.feishu.accounts.work]`: a second app on a second Open Platform, its own connection and chats."""
    with FakeFeishu() as work:
        work.app_id = "cli_90f8e7d6c5b4a392"
        boss = work.add_user("boss")
        env = {**section(enabled=True, domain=feishu.url, app_id=APP_ID, app_secret=APP_SECRET,
                         owner=[owner.open_id]),
               **section("CLAWGATE_CHANNELS__FEISHU__ACCOUNTS__WORK__", domain=work.url, app_id=work.app_id,
                         app_secret=APP_SECRET, owner=[boss.open_id])}
        daemon = daemon_factory(env)
        wait_until(lambda: feishu.connected() and work.connected(), "both long connections", describe=daemon.log_text)
        home_chat, work_chat = feishu.p2p_chat(owner), work.p2p_chat(boss)
        feishu.write(owner, home_chat, "at home")
        work.write(boss, work_chat, "at work")
        wait_until(lambda: said(feishu, home_chat) == ["echo: at home"], "the home bot's answer")
        wait_until(lambda: said(work, work_chat) == ["echo: at work"], "the work bot's answer")
        rows = {r["name"]: r for r in json.loads(daemon.cli("channels", "--json").stdout)}
        assert rows["feishu"]["state"] == rows["feishu.work"]["state"] == "running", rows
