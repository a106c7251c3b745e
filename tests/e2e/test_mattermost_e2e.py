"""The Mattermost channel end to end: the real daemon process against a fake Mattermost server
(tests/fakes/mattermost: REST v4 and the WebSocket as documented), people posting through it.

What the conformance suite does not cover: threads (a mention answered in a thread on its post, a
reply in a thread staying there), identity by user id (a username copying the owner's is a stranger),
interactive buttons through the daemon's listener (only an owner's press counts, a forged press
refused), files both ways, a refused token, and `doctor`.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable, Iterator

import pytest

from tests.e2e.test_doctor import run_doctor
from tests.fakes.anthropic_api import FakeAnthropic, file_sender, text, tool_use
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
    daemon = mm_daemon()
    fake_model.enqueue(text("Hello **there**, run `ls`"))
    dm = mattermost.dm_channel(owner)
    mattermost.write(owner, dm, "hi bot")
    wait_until(lambda: said(mattermost, dm), "the reply")
    [reply] = [p for p in mattermost.sent_to(dm) if not p.message.startswith(("⚙️", "⏳"))]
    assert reply.message == "Hello **there**, run `ls`" and reply.root_id == ""  # Markdown passes through
    typing = mattermost.calls_to("POST", f"/users/{mattermost.bot.id}/typing")
    assert typing and typing[0].body["channel_id"] == dm
    assert "hi bot" in json.dumps(fake_model.requests[0]["messages"])
    code, checks, _ = run_doctor(daemon)
    assert checks["mattermost"]["status"] == "ok" and "as @clawbot (bot " in checks["mattermost"]["detail"]


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


def _prompt(mattermost: FakeMattermost, channel: str) -> Any:
    return next((p for p in mattermost.sent_to(channel) if p.props.get("attachments")), None)


def test_only_an_owner_press_on_a_button_approves_and_a_forged_press_is_refused(
        mm_daemon, mattermost: FakeMattermost, owner: User, fake_model: FakeAnthropic) -> None:
    listen = f"127.0.0.1:{free_port()}"
    friend = mattermost.add_user("friend")
    daemon = mm_daemon(actions_listen=listen, allow_from=[friend.id])
    town = mattermost.add_channel("town-square")
    fake_model.enqueue(tool_use("exec", {"argv": ["touch", "approved.txt"]}), text("Created approved.txt."))
    mattermost.write(owner, town, "make a file", mention=True)
    prompt = wait_until(lambda: _prompt(mattermost, town), "the prompt with buttons", describe=daemon.log_text)
    assert prompt.message.startswith("🔐") and prompt.root_id  # in the thread of the request
    actions = prompt.props["attachments"][0]["actions"]
    assert [a["name"] for a in actions] == ["Approve", "Deny"]
    assert actions[0]["integration"]["url"] == f"http://{listen}/mattermost/actions"
    context = actions[0]["integration"]["context"]
    forged = {"user_id": owner.id, "channel_id": town, "post_id": prompt.id,
              "context": {**context, "secret": "guessed"}}
    assert mattermost.post_action(actions[0]["integration"]["url"], forged)["status"] == 403
    answer = mattermost.press(friend, prompt, "clawgateapprove")  # a guest in the channel: not theirs to approve
    assert answer["status"] == 200 and "owner" in answer.get("ephemeral_text", "").lower(), answer
    assert not (daemon.workspace / "approved.txt").exists()
    answer = mattermost.press(owner, prompt, "clawgateapprove")
    assert answer["status"] == 200, answer
    wait_until(lambda: "Created approved.txt." in said(mattermost, town), "the run to finish")
    assert (daemon.workspace / "approved.txt").exists()
    assert not mattermost.sent_to(town)[0].props.get("attachments")  # the buttons went with the outcome's edit


def test_without_a_listener_approvals_are_answered_with_the_approve_command(
        mm_daemon, mattermost: FakeMattermost, owner: User, fake_model: FakeAnthropic) -> None:
    daemon = mm_daemon()
    dm = mattermost.dm_channel(owner)
    fake_model.enqueue(tool_use("exec", {"argv": ["touch", "approved.txt"]}), text("Created approved.txt."))
    mattermost.write(owner, dm, "make a file")
    prompt = wait_until(lambda: [p for p in mattermost.sent_to(dm) if p.message.startswith("🔐")], "the prompt")[-1]
    approval = prompt.message.split("/approve ", 1)[1].split()[0].strip("`")
    assert not prompt.props.get("attachments")
    mattermost.write(owner, dm, f"/approve {approval}")
    wait_until(lambda: "Created approved.txt." in said(mattermost, dm), "the run to finish", describe=daemon.log_text)
    assert (daemon.workspace / "approved.txt").exists()


def test_files_come_in_within_the_limit_and_go_out_as_uploads(mm_daemon, mattermost: FakeMattermost, owner: User,
                                                             fake_model: FakeAnthropic) -> None:
    daemon = mm_daemon(max_file_bytes=1000)
    dm = mattermost.dm_channel(owner)
    fake_model.enqueue(text("got the file"))
    mattermost.write(owner, dm, "keep this", files=[("notes.txt", "text/plain", b"remember the milk\n")])
    wait_until(lambda: "got the file" in said(mattermost, dm), "the answer")
    saved = wait_until(lambda: list((daemon.workspace / "inbox").rglob("*notes*")), "the saved file")
    assert [p.read_bytes() for p in saved] == [b"remember the milk\n"]
    assert len(mattermost.calls_to("GET", "/files/")) == 1
    mattermost.write(owner, dm, "", files=[("big.bin", "application/octet-stream", b"x" * 5000)])
    wait_until(lambda: len(said(mattermost, dm)) >= 2, "the refusal")
    assert "too large" in said(mattermost, dm)[1] and len(mattermost.calls_to("GET", "/files/")) == 1

    (daemon.workspace / "summary.txt").write_bytes(b"the summary\n" * 50)
    fake_model.enqueue(tool_use("send_file", {"path": "summary.txt", "caption": "Here it is."}), text("Sent."))
    mattermost.write(owner, dm, "send me the summary")
    wait_until(lambda: "Sent." in said(mattermost, dm), "the run's answer")
    [sent] = [p for p in mattermost.sent_to(dm) if p.file_ids]
    assert sent.message == "Here it is." and mattermost.file_name(sent.file_ids[0]) == "summary.txt"
    assert mattermost.file_data(sent.file_ids[0]) == b"the summary\n" * 50


def test_a_refused_token_fails_the_channel_with_the_fix_and_doctor_says_so(
        daemon_factory, mattermost: FakeMattermost) -> None:
    good = section(enabled=True, base_url=mattermost.url, token=BOT_TOKEN)
    daemon = daemon_factory(section(enabled=True, base_url=mattermost.url, token="wrong" * 5))

    def row() -> dict[str, Any]:
        return next(r for r in json.loads(daemon.cli("channels", "--json").stdout) if r["name"] == "mattermost")

    wait_until(lambda: row()["state"] == "failed", "the channel failed", describe=daemon.log_text)
    assert "refused the token" in row()["reason"] and "Bot Accounts" in row()["reason"]
    assert "wrong" not in daemon.log_text() and "Traceback" not in daemon.log_text()
    code, checks, _ = run_doctor(daemon, env=good)
    # the probe logs in with the corrected token; the running daemon still holds the refused one
    assert "as @clawbot (bot " in checks["mattermost"]["detail"] and "restart" in checks["mattermost"]["fix"]
    code, checks, _ = run_doctor(daemon, env=section(enabled=True, base_url=mattermost.url, token="wrong" * 5))
    assert checks["mattermost"]["status"] == "fail" and "channels.mattermost.token" in checks["mattermost"]["fix"]


def test_a_lost_server_is_reconnected_and_answers_again(mm_daemon, mattermost: FakeMattermost, owner: User) -> None:
    daemon = mm_daemon()
    dm = mattermost.dm_channel(owner)
    mattermost.write(owner, dm, "before")
    wait_until(lambda: said(mattermost, dm) == ["echo: before"], "the first answer")
    mattermost.stop()

    def state() -> str:
        rows = json.loads(daemon.cli("channels", "--json").stdout)
        return str(next(r for r in rows if r["name"] == "mattermost")["state"])

    wait_until(lambda: state() == "retrying", "the channel retrying", describe=daemon.log_text)
    mattermost.start()  # the same port, the same people
    wait_until(mattermost.connected, "the WebSocket again", timeout=120, describe=daemon.log_text)
    mattermost.write(owner, dm, "after")
    wait_until(lambda: said(mattermost, dm) == ["echo: before", "echo: after"], "the answer after the reconnect")


def test_two_bot_accounts_each_answer_their_own_server(daemon_factory, mattermost: FakeMattermost,
                                                       owner: User) -> None:
    """`[channels.mattermost.accounts.work]`: a second bot on a second server, its own WebSocket and chats."""
    with FakeMattermost() as work:
        boss = work.add_user("boss")
        env = {**section(enabled=True, base_url=mattermost.url, token=BOT_TOKEN, owner=[owner.id]),
               **{f"CLAWGATE_CHANNELS__MATTERMOST__ACCOUNTS__WORK__{k}": v for k, v in
                  {"BASE_URL": work.url, "TOKEN": BOT_TOKEN, "OWNER": json.dumps([boss.id])}.items()}}
        daemon = daemon_factory(env)
        wait_until(lambda: mattermost.connected() and work.connected(), "both WebSockets", describe=daemon.log_text)
        home_dm, work_dm = mattermost.dm_channel(owner), work.dm_channel(boss)
        mattermost.write(owner, home_dm, "at home")
        work.write(boss, work_dm, "at work")
        wait_until(lambda: said(mattermost, home_dm) == ["echo: at home"], "the home bot's answer")
        wait_until(lambda: said(work, work_dm) == ["echo: at work"], "the work bot's answer")
        rows = {r["name"]: r for r in json.loads(daemon.cli("channels", "--json").stdout)}
        assert rows["mattermost"]["state"] == rows["mattermost.work"]["state"] == "running", rows


def test_an_answer_the_server_took_just_before_a_kill_is_not_posted_again(
        mm_daemon, mattermost: FakeMattermost, owner: User) -> None:
    """Killed after Mattermost stored the answer and before its HTTP answer came back (so nothing recorded
    it as sent), the daemon sends the answer again after the restart, with the same pending_post_id: the
    server returns the post it made instead of making a second (its deduplicateCreatePost)."""
    daemon = mm_daemon()
    dm = mattermost.dm_channel(owner)
    mattermost.hold_post_answers()
    mattermost.write(owner, dm, "hello")
    wait_until(lambda: said(mattermost, dm) == ["echo: hello"], "the answer stored by the server")
    daemon.kill()
    mattermost.release_post_answers()
    daemon.start()
    wait_until(lambda: mattermost.post_calls("echo: hello") == 2, "the answer sent again after the restart",
               describe=daemon.log_text)
    assert said(mattermost, dm) == ["echo: hello"]


def test_a_file_the_server_took_just_before_a_kill_is_not_posted_again(
        mm_daemon, mattermost: FakeMattermost, owner: User, fake_model: FakeAnthropic) -> None:
    """As the answer above, for a file the agent sends: its post carries the file's own pending_post_id, so
    sent again after the restart (uploaded again first: an upload alone shows nobody anything) it is one
    post, and the run's answer follows it."""
    daemon = mm_daemon()
    dm = mattermost.dm_channel(owner)
    (daemon.workspace / "summary.txt").write_bytes(b"the summary\n")
    fake_model.responder = file_sender("summary.txt", "Here it is.")
    mattermost.hold_post_answers()
    mattermost.write(owner, dm, "send me the summary")
    wait_until(lambda: [p for p in mattermost.sent_to(dm) if p.file_ids], "the file's post stored by the server",
               describe=daemon.log_text)
    daemon.kill()
    mattermost.release_post_answers()
    daemon.start()
    wait_until(lambda: "Sent." in said(mattermost, dm), "the run's answer after the restart", describe=daemon.log_text)
    assert mattermost.post_calls("Here it is.") == 2  # the file's post was asked for again, and not made again
    [sent] = [p for p in mattermost.sent_to(dm) if p.file_ids]
    assert sent.message == "Here it is." and mattermost.file_data(sent.file_ids[0]) == b"the summary\n"


def test_a_mention_posted_while_the_daemon_was_down_is_answered_after_it_starts(
        mm_daemon, mattermost: FakeMattermost, owner: User, fake_model: FakeAnthropic) -> None:
    daemon = mm_daemon()
    dm, town = mattermost.dm_channel(owner), mattermost.add_channel("town-square")
    mattermost.write(owner, dm, "before")
    wait_until(lambda: said(mattermost, dm) == ["echo: before"], "the first answer")
    daemon.kill()
    wait_until(lambda: not mattermost.connected(), "the WebSocket gone with the daemon")
    event = mattermost.write(owner, town, "what did I miss?", mention=True)
    mattermost.write(owner, town, "just chatting")  # no mention: still not read
    daemon.start()
    wait_until(lambda: said(mattermost, town), "the answer after the start", describe=daemon.log_text)
    post_id = json.loads(event["data"]["post"])["id"]
    assert said(mattermost, town, root_id=post_id) == ["echo: what did I miss?"]
    assert said(mattermost, dm) == ["echo: before"]  # the first post is not answered again
    turn = json.dumps(fake_model.requests[-1]["messages"][-1])
    assert "@owner (id " + owner.id in turn and "just chatting" not in json.dumps(fake_model.requests)


def test_a_server_with_a_smaller_unadvertised_post_limit_gets_the_answer_in_halves(
        daemon_factory, fake_model: FakeAnthropic) -> None:
    """A server whose client config does not say MaxPostSize (the adapter assumes 16,383) but whose database
    holds 4,000: the refused post ("model.post.is_valid.msg") is sent again in halves, nothing lost."""
    with FakeMattermost(max_post_size=4000, advertise_post_size=False) as small:
        person = small.add_user("owner")
        paragraphs = [f"Paragraph {i} " + "words " * 60 for i in range(30)]
        assert len("\n\n".join(paragraphs)) > 10_000
        fake_model.enqueue(text("\n\n".join(paragraphs)))
        daemon = daemon_factory(section(enabled=True, base_url=small.url, token=BOT_TOKEN, owner=[person.id],
                                        retry_base_seconds=0.05))
        wait_until(small.connected, "the WebSocket", describe=daemon.log_text)
        dm = small.dm_channel(person)
        small.write(person, dm, "a long answer please")
        wait_until(lambda: any("Paragraph 29" in m for m in said(small, dm)), "the last part", describe=daemon.log_text)
        parts = said(small, dm)
        assert len(parts) >= 3 and all(len(p) <= 4000 for p in parts)
        joined = "\n".join(parts)
        assert [int(n) for n in re.findall(r"Paragraph (\d+) ", joined)] == list(range(30))
