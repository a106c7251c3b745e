"""WhatsApp as a linked device end to end: the real daemon with the fake of neonize's client
(tests/fakes/whatsapp_linked) talking to the fake WhatsApp here, and the real neonize where no
network is needed (the session database, `clawgate channels login` reaching WhatsApp's address).

What the conformance suite does not cover: quoting and composing presence, read receipts when asked,
the owner's "message yourself" chat, status broadcasts never answered, nobody messaged who did not
write first, approvals by an owner's reaction, a cron result delivered, media both ways, two linked
accounts at once, linking through `clawgate channels login whatsapp`, doctor.
"""

from __future__ import annotations

import json
import re
import os
import stat
import subprocess
import sys
from typing import Any, Callable, Iterator

import pytest

from tests.conformance.platforms.whatsapp_linked import ROOT, WhatsAppLinkedHarness
from tests.e2e.test_doctor import run_doctor
from tests.fakes.anthropic_api import FakeAnthropic, text, tool_use
from tests.fakes.whatsapp.reading import plain_of
from tests.fakes.whatsapp_linked import BOT_NUMBER, GROUP, FakeWhatsAppLinked
from tests.harness import DaemonProcess
from tests.waiting import wait_past, wait_until

OWNER, FRIEND, STRANGER = WhatsAppLinkedHarness.owner, WhatsAppLinkedHarness.friend, WhatsAppLinkedHarness.stranger


def dm(user: str) -> str:
    return f"{user}@s.whatsapp.net"


@pytest.fixture
def wa() -> Iterator[WhatsAppLinkedHarness]:
    harness = WhatsAppLinkedHarness()
    harness.start()
    try:
        yield harness
    finally:
        harness.close()


@pytest.fixture
def wa_daemon(wa: WhatsAppLinkedHarness, daemon_factory: Callable[..., DaemonProcess]) -> Callable[..., DaemonProcess]:
    def make(**settings: Any) -> DaemonProcess:
        access = {"owner": [OWNER], "allow_from": [FRIEND], "dm_policy": "pairing", "retry_base_seconds": 0.05}
        daemon = daemon_factory(wa.env(**{**access, **settings}))
        wait_until(lambda: _state(daemon) == "running", "the linked device connected", describe=daemon.log_text)
        return daemon
    return make


def _state(daemon: DaemonProcess, name: str = "whatsapp") -> str:
    rows = json.loads(daemon.cli("channels", "--json").stdout)
    return str(next((r for r in rows if r["name"] == name), {}).get("state"))


def said(fake: FakeWhatsAppLinked, chat: str, account: str | None = None) -> list[str]:
    return [plain_of(s.text) for s in fake.to(chat, account)]


def test_a_person_is_answered_quoting_their_message_in_whatsapps_format_with_composing(
        wa_daemon, wa: WhatsAppLinkedHarness, fake_model: FakeAnthropic) -> None:
    wa_daemon()
    fake = wa.fake
    fake_model.enqueue(text("**Yes**, _gladly_: `ls`"))
    seq = fake.text(OWNER, "can you help?")
    wait_until(lambda: fake.to(dm(OWNER)), "the answer")
    (answer,) = fake.to(dm(OWNER))
    asked_id = json.loads(json.dumps(fake.events[seq][1]))  # the event as sent: its message id
    from neonize.events import MessageEv

    from tests.fakes.whatsapp_linked.wire import unpack

    asked = unpack(MessageEv, asked_id["data"])
    assert answer.text == "*Yes*, _gladly_: `ls`" and answer.quoted == asked.Info.ID
    assert answer.message.extendedTextMessage.contextInfo.quotedMessage.conversation == "can you help?"
    assert ("default", dm(OWNER)) in fake.presences  # composing while the agent worked
    assert not fake.reads  # read receipts are off unless asked for


def test_read_receipts_when_asked(wa_daemon, wa: WhatsAppLinkedHarness, fake_model: FakeAnthropic) -> None:
    wa_daemon(read_receipts=True)
    wa.fake.text(OWNER, "did you read this?")
    wait_until(lambda: wa.fake.reads, "the read receipt")
    assert wa.fake.reads[0][0] == dm(OWNER)


def test_the_message_yourself_chat_is_the_owners_dm_and_status_updates_are_never_answered(
        wa_daemon, wa: WhatsAppLinkedHarness, fake_model: FakeAnthropic) -> None:
    daemon = wa_daemon(owner=[BOT_NUMBER])  # the linked number is the owner's own
    fake = wa.fake
    status = fake.text(FRIEND, "my holiday photos", chat="status@broadcast")
    to_friend = fake.text(FRIEND, "see you at 8", from_me=True, chat=dm(FRIEND))  # the owner, from the phone
    wait_until(lambda: {status, to_friend} <= fake.handled, "both taken and dropped")
    fake_model.enqueue(text("noted: milk"))
    fake.text(BOT_NUMBER, "remind me to buy milk", from_me=True)
    wait_until(lambda: said(fake, dm(BOT_NUMBER)) == ["noted: milk"], "the answer in the self chat")
    wait_past(1.0)
    assert len(fake_model.requests) == 1 and not fake.to("status@broadcast") and not fake.to(dm(FRIEND))
    assert "remind me to buy milk" in json.dumps(fake_model.requests[0])
    assert "Traceback" not in daemon.log_text()


def test_nobody_is_messaged_who_did_not_write_first_and_a_cron_result_reaches_one_who_did(
        wa_daemon, wa: WhatsAppLinkedHarness, fake_model: FakeAnthropic) -> None:
    daemon = wa_daemon()
    fake = wa.fake
    fake.text(OWNER, "hello")
    wait_until(lambda: said(fake, dm(OWNER)) == ["echo: hello"], "the first answer")
    fake_model.enqueue_for("water the plants", text("Time to water the plants 🌱"))
    added = daemon.cli("cron", "add", "--at", "+1s", "--message", "Tell me to water the plants",
                       "--deliver", f"whatsapp:{dm(OWNER)}")
    assert added.returncode == 0, added.stderr
    wait_until(lambda: "Time to water the plants 🌱" in said(fake, dm(OWNER)), "the cron result")
    fake_model.enqueue_for("say hello", text("Hello there"))
    added = daemon.cli("cron", "add", "--at", "+1s", "--message", "say hello", "--deliver", f"whatsapp:{dm(STRANGER)}")
    assert added.returncode == 0, added.stderr
    line = wait_until(lambda: [x for x in daemon.output if "never wrote to this number" in x], "the refusal line")
    assert dm(STRANGER) in line[0]
    wait_past(1.0)
    assert not fake.to(dm(STRANGER)) and not [a for a in fake.attempts if False]


def test_an_owners_reaction_approves_and_a_guests_approve_is_refused(wa_daemon, wa: WhatsAppLinkedHarness,
                                                                    fake_model: FakeAnthropic) -> None:
    daemon = wa_daemon()
    fake = wa.fake
    fake_model.enqueue(tool_use("exec", {"argv": ["touch", "approved.txt"]}), text("Created approved.txt."))
    fake.text(OWNER, "make a file")
    approval = wait_until(lambda: wa.prompts(dm(OWNER)), "the prompt")[0]
    fake.text(FRIEND, f"/approve {approval}")  # a guest typing the owner's command
    wait_until(lambda: wa.approval_answers(FRIEND), "the answer to the guest")
    assert "Only the owner" in wa.approval_answers(FRIEND)[0] and not (daemon.workspace / "approved.txt").exists()
    prompt = next(s for s in fake.to(dm(OWNER)) if f"/approve {approval}" in s.text)
    fake.react(OWNER, prompt, "👍")
    wait_until(lambda: "Created approved.txt." in said(fake, dm(OWNER)), "the run to finish")
    assert (daemon.workspace / "approved.txt").exists()


def test_groups_answer_a_mention_or_a_reply_to_the_bot(wa_daemon, wa: WhatsAppLinkedHarness,
                                                       fake_model: FakeAnthropic) -> None:
    wa_daemon()
    fake = wa.fake
    fake.group_text(FRIEND, "lunch at noon?", mention=False)
    fake.group_text(FRIEND, "what is 2+2?", mention=True)
    wait_until(lambda: said(fake, GROUP) == ["echo: what is 2+2?"], "the answer to the mention")
    fake.group_text(FRIEND, "and 3+3?", mention=False, reply_to=fake.to(GROUP)[0])
    wait_until(lambda: len(said(fake, GROUP)) == 2, "the answer to the reply")
    assert said(fake, GROUP)[1] == "echo: and 3+3?" and "lunch" not in json.dumps(fake_model.requests)


def test_media_comes_in_as_images_and_inbox_files_and_goes_out_as_a_document(wa_daemon, wa: WhatsAppLinkedHarness,
                                                                            fake_model: FakeAnthropic) -> None:
    daemon = wa_daemon()
    fake = wa.fake
    png = bytes.fromhex("89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d49444154789c6300"
                        "0100000500010d0a2db40000000049454e44ae426082")
    fake_model.enqueue(text("a tiny picture"))
    fake.media_message(OWNER, "image", png, caption="what is this?", mime="image/png")
    wait_until(lambda: "a tiny picture" in said(fake, dm(OWNER)), "the answer about the image")
    assert '"type": "image"' in json.dumps(fake_model.requests[0])
    fake_model.enqueue(text("kept"))
    fake.media_message(OWNER, "file", b"quarterly numbers\n", name="report.txt", mime="text/plain", caption="keep this")
    wait_until(lambda: "kept" in said(fake, dm(OWNER)), "the answer about the file")
    saved = wait_until(lambda: list((daemon.workspace / "inbox").rglob("*report.txt")), "the saved file")
    assert saved[0].read_bytes() == b"quarterly numbers\n"
    (daemon.workspace / "summary.txt").write_bytes(b"the summary\n")
    fake_model.enqueue(tool_use("send_file", {"path": "summary.txt", "caption": "Here it is."}), text("Sent."))
    fake.text(OWNER, "send me the summary")
    wait_until(lambda: "Sent." in said(fake, dm(OWNER)), "the run's answer")
    (document,) = [s for s in fake.to(dm(OWNER)) if s.message.HasField("documentMessage")]
    doc = document.message.documentMessage
    assert (doc.fileName, doc.caption, fake.media[doc.URL]) == ("summary.txt", "Here it is.", b"the summary\n")


def test_two_linked_accounts_answer_each_through_its_own_number(wa: WhatsAppLinkedHarness,
                                                                 daemon_factory: Callable[..., DaemonProcess],
                                                                 fake_model: FakeAnthropic) -> None:
    env = {**wa.env(owner=[OWNER]), "CLAWGATE_CHANNELS__WHATSAPP__ACCOUNTS__HOME__ENABLED": "true",
           "CLAWGATE_CHANNELS__WHATSAPP__ACCOUNTS__WORK__DM_POLICY": "open"}
    daemon = daemon_factory(env)
    for name in ("whatsapp.home", "whatsapp.work"):
        wait_until(lambda name=name: _state(daemon, name) == "running", f"{name} connected", describe=daemon.log_text)
    wa.fake.text(OWNER, "to home", account="home")
    wa.fake.text(STRANGER, "to work", account="work")
    wait_until(lambda: said(wa.fake, dm(OWNER), "home") == ["echo: to home"], "home's answer")
    wait_until(lambda: said(wa.fake, dm(STRANGER), "work") == ["echo: to work"], "work's answer")
    assert not said(wa.fake, dm(OWNER), "work") and not said(wa.fake, dm(STRANGER), "home")
    sessions = {p.parent.name for p in (daemon.home / "state/whatsapp").glob("*/session.db")} | \
        {p.name for p in (daemon.home / "state/whatsapp").iterdir()}
    assert {"home", "work"} <= sessions
    _code, checks, _ = run_doctor(daemon)
    assert checks["whatsapp.home"]["status"] == "ok" and "linked device" in checks["whatsapp.home"]["detail"]
    assert checks["whatsapp.work"]["status"] == "ok", checks["whatsapp.work"]


def test_login_shows_the_qr_code_until_the_phone_links_and_a_pairing_code_for_a_number(
        wa: WhatsAppLinkedHarness, daemon_factory: Callable[..., DaemonProcess]) -> None:
    env = {**wa.env(), "CLAWGATE_CHANNELS__WHATSAPP__ACCOUNTS__WORK__ENABLED": "true"}
    daemon = daemon_factory(env)
    wa.fake.account("work").linked = False
    cli = subprocess.Popen([sys.executable, "-m", "clawgate.gateway.cli", "channels", "login", "whatsapp",
                            "--account", "work"], env=daemon.env, cwd=ROOT, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: wa.fake.account("work").conns, "the login connected")
        wa.fake.scan("work")
        out, err = cli.communicate(timeout=120)
    finally:
        cli.kill()
    assert cli.returncode == 0, err
    assert "Link a device" in out and "▀" in out and "linked as" in out and "account work" in out
    wa.fake.account("other").linked = False
    coded = subprocess.Popen([sys.executable, "-m", "clawgate.gateway.cli", "channels", "login", "whatsapp",
                              "--account", "other", "--phone", "+1 555 000 7777"],
                             env={**daemon.env, "CLAWGATE_CHANNELS__WHATSAPP__ACCOUNTS__OTHER__ENABLED": "true"},
                             cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: wa.fake.account("other").pairings, "the login asked for a pairing code")
        ((number, code),) = wa.fake.account("other").pairings
        assert number == "15550007777" and re.fullmatch(r"[1-9A-Z]{4}-[1-9A-Z]{4}", code)
        assert not wa.fake.type_code("WRONG-CODE", "other")
        wa.fake.account("other").number = number  # the phone of that number types the code it was given
        assert wa.fake.type_code(code, "other")
        out, err = coded.communicate(timeout=120)
    finally:
        coded.kill()
    assert coded.returncode == 0, err
    assert code in out and "Link with phone number" in out and "▀" not in out


def test_with_the_real_neonize_an_unlinked_device_is_one_line_and_login_reaches_whatsapps_address(
        daemon_factory: Callable[..., DaemonProcess]) -> None:
    """No fake: the installed neonize. Without a session the daemon fails the channel with the fix and never
    shows a QR code; `channels login` creates the session database user-only and dials WhatsApp, which
    cannot be reached here (no network): one line. Pairing itself needs WhatsApp (docs/whatsapp.md)."""
    env = {"CLAWGATE_CHANNELS__WHATSAPP__MODE": "linked"}
    assert "WHATSAPP_LINKED_TEST_CLIENT" not in os.environ
    daemon = daemon_factory(env)
    wait_until(lambda: _state(daemon) == "failed", "the channel failed", describe=daemon.log_text)
    rows = json.loads(daemon.cli("channels", "--json").stdout)
    reason = next(r for r in rows if r["name"] == "whatsapp")["reason"]
    assert "clawgate channels login whatsapp" in reason and "▀" not in daemon.log_text()
    code, checks, _ = run_doctor(daemon)
    assert checks["whatsapp"]["status"] == "fail" and "channels login whatsapp" in checks["whatsapp"]["fix"]
    login = daemon.cli("channels", "login", "whatsapp", timeout=120)
    assert login.returncode != 0 and "Traceback" not in login.stderr
    assert "web.whatsapp.com" in login.stderr and login.stderr.count("clawgate:") == 1
    session = daemon.home / "state/whatsapp/default/session.db"
    assert stat.S_IMODE(session.stat().st_mode) == 0o600 and stat.S_IMODE(session.parent.stat().st_mode) == 0o700
