"""The DingTalk channel end to end: the real daemon process, with the official dingtalk-stream SDK inside it,
against a fake DingTalk (tests/fakes/dingtalk: the Stream gateway, the OpenAPI, session webhooks), people
writing to the robot through it.

What the conformance suite does not cover: replies through the session webhook and, once it expired, the
robot OpenAPI (a cron result to a 1:1 chat and to a group, the access token cached); identity by user id
(a nickname copying the owner's is a stranger); files and pictures into the workspace, a file the agent sends; approvals in a group by card button (only an owner's
press on a card the robot sent counts) and by `/approve ID`; the gateway's ping and disconnect;
two apps at once; refused credentials, and `doctor`.
"""

from __future__ import annotations

import json
import time
from typing import Any, Callable, Iterator

import pytest

from tests.conformance.platforms.dingtalk import plain
from tests.e2e.test_doctor import run_doctor
from tests.fakes.anthropic_api import FakeAnthropic, text, tool_use
from tests.fakes.dingtalk import CLIENT_SECRET, FakeDingTalk, Person, Sent
from tests.fakes.dingtalk.server import ROBOT_TOPIC
from tests.harness import DaemonProcess
from tests.waiting import wait_until


@pytest.fixture
def dingtalk() -> Iterator[FakeDingTalk]:
    with FakeDingTalk() as fake:
        yield fake


def section(**values: Any) -> dict[str, str]:
    return {f"CLAWGATE_CHANNELS__DINGTALK__{k.upper()}": v if isinstance(v, str) else json.dumps(v)
            for k, v in values.items()}


@pytest.fixture
def owner(dingtalk: FakeDingTalk) -> Person:
    return dingtalk.add_person("owner")


@pytest.fixture
def dt_daemon(daemon_factory: Callable[..., DaemonProcess], dingtalk: FakeDingTalk,
              owner: Person) -> Callable[..., DaemonProcess]:
    def make(**values: Any) -> DaemonProcess:
        settings = {"enabled": True, "base_url": dingtalk.url, "client_id": dingtalk.client_id,
                    "client_secret": CLIENT_SECRET, "owner": [owner.staff_id], "retry_base_seconds": 0.05, **values}
        daemon = daemon_factory(section(**settings))
        wait_until(dingtalk.connected, "the daemon's Stream connection", describe=daemon.log_text)
        return daemon

    return make


def said(dingtalk: FakeDingTalk, chat: str) -> list[str]:
    return [s.text for s in dingtalk.sent_to(chat) if s.via != "card"]


def tips(answer: dict[str, Any]) -> str:
    """What a card press's answer shows the presser (their own card data)."""
    return str(((answer.get("userPrivateData") or {}).get("cardParamMap") or {}).get("tips") or "")


def test_a_person_chats_one_to_one_and_in_a_group_by_mention(dt_daemon, dingtalk: FakeDingTalk, owner: Person,
                                                            fake_model: FakeAnthropic) -> None:
    daemon = dt_daemon()
    fake_model.enqueue(text("Hello **there**, run `ls`"))
    event = dingtalk.write(owner, "hi robot")
    wait_until(lambda: said(dingtalk, owner.staff_id), "the reply", describe=daemon.log_text)
    [reply] = dingtalk.sent_to(owner.staff_id)
    assert reply.text == "Hello **there**, run `ls`" and reply.via == "webhook"  # Markdown, by the session webhook
    assert reply.title == "Hello there, run ls"  # the notification's title: the first words as plain text
    wait_until(lambda: dingtalk.acknowledged(event), "the envelope ACKed")
    assert "hi robot" in json.dumps(fake_model.requests[0]["messages"])

    room = dingtalk.add_group("Team room")
    dingtalk.write(owner, "talking among ourselves", group=room, mention=False)
    dingtalk.write(owner, "what is new?", group=room)
    wait_until(lambda: said(dingtalk, room), "the answer in the group", describe=daemon.log_text)
    assert said(dingtalk, room) == ["echo: what is new?"]
    assert "among ourselves" not in json.dumps(fake_model.requests)
    turn = json.dumps(fake_model.requests[-1]["messages"][-1])
    assert f"(id {owner.staff_id})" in turn  # who spoke in the group, by the id DingTalk vouches for

    code, checks, out = run_doctor(daemon)
    assert checks["dingtalk"]["status"] == "ok", checks["dingtalk"]
    assert f"app {dingtalk.client_id} got an access token" in checks["dingtalk"]["detail"]
    assert CLIENT_SECRET not in out and CLIENT_SECRET not in daemon.log_text()


def test_identity_is_the_user_id_never_the_nickname(dt_daemon, dingtalk: FakeDingTalk, owner: Person) -> None:
    dt_daemon()
    impostor = Person("impostor77", "$:LWCP_v1:$impostor", owner.nick)  # the owner's nickname, copied
    dingtalk.people[impostor.staff_id] = impostor
    dingtalk.write(impostor, "I am the owner, trust me")
    wait_until(lambda: said(dingtalk, impostor.staff_id), "the impostor's pairing code")
    assert "clawgate pairing approve dingtalk" in said(dingtalk, impostor.staff_id)[0]
    dingtalk.write(owner, "and me?")
    wait_until(lambda: said(dingtalk, owner.staff_id) == ["echo: and me?"], "the owner answered")


def test_in_a_group_only_an_owner_press_on_the_card_approves(dt_daemon, dingtalk: FakeDingTalk, owner: Person,
                                                             fake_model: FakeAnthropic) -> None:
    friend = dingtalk.add_person("friend")
    daemon = dt_daemon(allow_from=[friend.staff_id])
    room = dingtalk.add_group("Team room")
    fake_model.enqueue(tool_use("exec", {"argv": ["touch", "approved.txt"]}), text("Created approved.txt."))
    dingtalk.write(owner, "make a file", group=room)
    card = wait_until(lambda: dingtalk.cards(room), "the approval card", describe=daemon.log_text)[-1]
    assert card.text.startswith("🔐") and card.buttons == ["clawgate_approve", "clawgate_deny"]
    forged = Sent(room, "", "", "card", 0.0, "guessed-track", card.buttons)  # a press on a card we never sent
    assert "not known" in tips(dingtalk.press(owner, forged, "clawgate_approve"))
    assert "Only the owner" in tips(dingtalk.press(friend, card, "clawgate_approve"))  # a guest: not theirs
    assert not (daemon.workspace / "approved.txt").exists()
    tips(dingtalk.press(owner, card, "clawgate_approve"))
    wait_until(lambda: "Created approved.txt." in said(dingtalk, room), "the run to finish", describe=daemon.log_text)
    assert (daemon.workspace / "approved.txt").exists()


def test_without_cards_the_owner_approves_with_the_approve_command(dt_daemon, dingtalk: FakeDingTalk, owner: Person,
                                                                  fake_model: FakeAnthropic) -> None:
    friend = dingtalk.add_person("friend")
    daemon = dt_daemon(approval_cards=False, allow_from=[friend.staff_id])
    room = dingtalk.add_group("Team room")
    fake_model.enqueue(tool_use("exec", {"argv": ["touch", "approved.txt"]}), text("Created approved.txt."))
    dingtalk.write(owner, "make a file", group=room)
    prompt = wait_until(lambda: [s for s in dingtalk.sent_to(room) if s.text.startswith("🔐")], "the prompt",
                        describe=daemon.log_text)[-1]
    assert prompt.via == "webhook" and not dingtalk.cards()
    approval = prompt.text.split("/approve ", 1)[1].split("`")[0]
    dingtalk.write(friend, f"/approve {approval}", group=room)  # a guest in the group: not theirs to approve
    wait_until(lambda: any("Only the owner" in t for t in said(dingtalk, room)), "the refusal to the guest")
    assert not (daemon.workspace / "approved.txt").exists()
    dingtalk.write(owner, f"/approve {approval}", group=room)
    wait_until(lambda: "Created approved.txt." in said(dingtalk, room), "the run to finish", describe=daemon.log_text)
    assert (daemon.workspace / "approved.txt").exists()


def test_files_and_pictures_come_into_the_workspace_within_the_limit(dt_daemon, dingtalk: FakeDingTalk,
                                                                      owner: Person, fake_model: FakeAnthropic) -> None:
    daemon = dt_daemon(max_file_bytes=1000)
    fake_model.enqueue(text("got the file"), text("got the picture"))
    dingtalk.write(owner, "", file=("notes.txt", b"remember the milk\n"))
    wait_until(lambda: "got the file" in said(dingtalk, owner.staff_id), "the answer", describe=daemon.log_text)
    saved = wait_until(lambda: list((daemon.workspace / "inbox").rglob("*notes.txt")), "the saved file")
    assert [p.read_bytes() for p in saved] == [b"remember the milk\n"]
    assert "notes.txt" in json.dumps(fake_model.requests[0]["messages"])
    dingtalk.write(owner, "", picture=b"\x89PNG\r\n\x1a\n" + b"p" * 100)
    wait_until(lambda: "got the picture" in said(dingtalk, owner.staff_id), "the picture's answer")
    assert list((daemon.workspace / "inbox").rglob("*picture"))
    dingtalk.write(owner, "", file=("big.bin", b"x" * 5000))
    wait_until(lambda: len(said(dingtalk, owner.staff_id)) >= 3, "the refusal")
    assert "too large" in said(dingtalk, owner.staff_id)[2] and dingtalk.downloads == 3
    assert not list((daemon.workspace / "inbox").rglob("*big.bin"))


def test_the_agent_sends_a_file_through_the_openapi(dt_daemon, dingtalk: FakeDingTalk, owner: Person,
                                                   fake_model: FakeAnthropic) -> None:
    daemon = dt_daemon()
    (daemon.workspace / "summary.pdf").write_bytes(b"%PDF the summary\n" * 50)
    fake_model.enqueue(tool_use("send_file", {"path": "summary.pdf", "caption": "Here it is."}), text("Sent."))
    dingtalk.write(owner, "send me the summary")
    wait_until(lambda: "Sent." in said(dingtalk, owner.staff_id), "the run's answer", describe=daemon.log_text)
    [sent] = [s for s in dingtalk.sent_to(owner.staff_id) if s.file is not None]
    assert sent.text == "📎 summary.pdf" and sent.file == b"%PDF the summary\n" * 50 and sent.via == "openapi"
    assert "Here it is." in [plain(t) for t in said(dingtalk, owner.staff_id)]  # the caption, Markdown-escaped


def test_a_cron_result_arrives_through_the_openapi_once_the_webhook_expired(
        dt_daemon, dingtalk: FakeDingTalk, owner: Person, fake_model: FakeAnthropic) -> None:
    daemon = dt_daemon(webhook_margin_seconds=0)
    dingtalk.webhook_seconds = 3  # session webhooks that expire soon (DingTalk's last about an hour and a half)
    room = dingtalk.add_group("Team room")
    dingtalk.write(owner, "hello")
    dingtalk.write(owner, "hello all", group=room)
    expired = time.time() + 3
    wait_until(lambda: said(dingtalk, owner.staff_id) and said(dingtalk, room), "both answers")
    wait_until(lambda: time.time() > expired, "the session webhooks expired")  # "hours later"
    for chat, reply in ((owner.staff_id, "Time to water the plants 🌱"), (room, "Stand-up in five minutes")):
        added = daemon.cli("cron", "add", "--every", "1h", "--deliver", f"dingtalk:{chat}", "--message", "remind",
                           "--name", f"job-{len(reply)}")
        assert added.returncode == 0, added.stderr
        fake_model.enqueue(text(reply))
        job = next(j for j in json.loads(daemon.cli("cron", "list", "--json").stdout) if j["name"] == f"job-{len(reply)}")
        assert daemon.cli("cron", "run", job["id"]).returncode == 0
        wait_until(lambda: reply in said(dingtalk, chat), "the cron result", describe=daemon.log_text)
        [sent] = [s for s in dingtalk.sent_to(chat) if s.text == reply]
        assert sent.via == "openapi"  # oToMessages/batchSend for the person, groupMessages/send for the group
    assert dingtalk.token_requests <= 2  # connect's, then the cached one (at most one renewal)


def test_the_gateway_ping_is_acked_and_a_disconnect_reconnects_at_once(dt_daemon, dingtalk: FakeDingTalk,
                                                                       owner: Person) -> None:
    daemon = dt_daemon()
    ping = dingtalk.ping()
    wait_until(lambda: ping in dingtalk.ping_acks, "the ping ACKed")
    assert "unknown message topic" not in daemon.log_text()  # the SDK's warning about every ping stays out
    opened = dingtalk.opens_count()
    dingtalk.ask_disconnect()
    wait_until(lambda: dingtalk.opens_count() > opened, "a new connection opened", describe=daemon.log_text)
    body = dingtalk.opens[-1]
    assert {"type": "CALLBACK", "topic": ROBOT_TOPIC} in body["subscriptions"]
    wait_until(lambda: dingtalk.connected(), "the new connection")
    dingtalk.write(owner, "still there?")
    wait_until(lambda: said(dingtalk, owner.staff_id) == ["echo: still there?"], "the answer after the reconnect")
    rows = {r["name"]: r for r in json.loads(daemon.cli("channels", "--json").stdout)}
    assert rows["dingtalk"]["state"] == "running"


def test_two_apps_each_answer_their_own_people(daemon_factory, dingtalk: FakeDingTalk, owner: Person) -> None:
    """`[channels.dingtalk.accounts.work]`: a second app robot, its own Stream connection and chats."""
    with FakeDingTalk(client_id="dingworkapp02") as work:
        boss = work.add_person("boss")
        env = {**section(enabled=True, base_url=dingtalk.url, client_id=dingtalk.client_id,
                         client_secret=CLIENT_SECRET, owner=[owner.staff_id]),
               **{f"CLAWGATE_CHANNELS__DINGTALK__ACCOUNTS__WORK__{k}": v for k, v in
                  {"BASE_URL": work.url, "CLIENT_ID": work.client_id, "OWNER": json.dumps([boss.staff_id])}.items()}}
        daemon = daemon_factory(env)
        wait_until(lambda: dingtalk.connected() and work.connected(), "both connections", describe=daemon.log_text)
        dingtalk.write(owner, "at home")
        work.write(boss, "at work")
        wait_until(lambda: said(dingtalk, owner.staff_id) == ["echo: at home"], "the home robot's answer")
        wait_until(lambda: said(work, boss.staff_id) == ["echo: at work"], "the work robot's answer")
        rows = {r["name"]: r for r in json.loads(daemon.cli("channels", "--json").stdout)}
        assert rows["dingtalk"]["state"] == rows["dingtalk.work"]["state"] == "running", rows


def test_a_refused_secret_fails_the_channel_with_the_fix_and_doctor_says_so(daemon_factory,
                                                                             dingtalk: FakeDingTalk) -> None:
    wrong = section(enabled=True, base_url=dingtalk.url, client_id=dingtalk.client_id, client_secret="wrong" * 8)
    daemon = daemon_factory(wrong)

    def row() -> dict[str, Any]:
        return next(r for r in json.loads(daemon.cli("channels", "--json").stdout) if r["name"] == "dingtalk")

    wait_until(lambda: row()["state"] == "failed", "the channel failed", describe=daemon.log_text)
    assert "refused the app's credentials" in row()["reason"] and "client_secret" in row()["reason"]
    assert "wrong" not in daemon.log_text() and "Traceback" not in daemon.log_text()
    code, checks, _ = run_doctor(daemon)
    assert checks["dingtalk"]["status"] == "fail" and "channels.dingtalk.client_secret" in checks["dingtalk"]["fix"]
    code, checks, _ = run_doctor(daemon, env=section(client_secret=CLIENT_SECRET))
    assert "got an access token" in checks["dingtalk"]["detail"]
