"""The Signal channel end to end: the real daemon process against a fake signal-cli daemon
(tests/fakes/signal, its JSON-RPC and SSE interface as documented), people writing through it.

What the conformance suite does not cover: identities (an owner named by phone number, a person
known only by UUID, a profile name that copies the owner's number), replies quoting, typing, styles,
attachments both ways, mention-only groups, signal-cli down at start, `doctor` and `channels login`.
"""

from __future__ import annotations

import json
import time
from typing import Any, Callable, Iterator

import pytest

from tests.fakes.anthropic_api import FakeAnthropic, text, tool_use
from tests.fakes.signal import BOT_NUMBER, FakeSignalCli, Person
from tests.e2e.test_doctor import run_doctor
from tests.harness import DaemonProcess, free_port
from tests.waiting import wait_until

OWNER_NUMBER = "+15550100001"


@pytest.fixture
def signal() -> Iterator[FakeSignalCli]:
    with FakeSignalCli(keepalive_seconds=2.0) as fake:
        yield fake


def section(**values: Any) -> dict[str, str]:
    return {f"CLAWGATE_CHANNELS__SIGNAL__{k.upper()}": v if isinstance(v, str) else json.dumps(v)
            for k, v in values.items()}


@pytest.fixture
def signal_daemon(daemon_factory: Callable[..., DaemonProcess], signal: FakeSignalCli) -> Callable[..., DaemonProcess]:
    def make(wait: bool = True, **values: Any) -> DaemonProcess:
        settings = {"enabled": True, "account": BOT_NUMBER, "base_url": signal.url, "owner": [OWNER_NUMBER],
                    "retry_base_seconds": 0.05, **values}
        daemon = daemon_factory(section(**settings))
        if wait:
            wait_until(signal.connected, "the daemon's signal-cli event stream", describe=daemon.log_text)
        return daemon

    return make


def said(signal: FakeSignalCli, chat: str) -> list[str]:
    return [m.message for m in signal.sent_to(chat)]


def test_the_owner_named_by_number_is_answered_quoted_styled_with_typing(signal_daemon, signal: FakeSignalCli,
                                                                       fake_model: FakeAnthropic) -> None:
    owner = signal.add_person("owner", number=OWNER_NUMBER)
    signal_daemon()
    fake_model.enqueue(text("Hello **there**, run `ls` 😀 and *look*"))
    event = signal.write(owner, "hi bot")
    wait_until(lambda: said(signal, owner.uuid), "the reply")
    [reply] = signal.sent_to(owner.uuid)  # a DM is answered to the sender's UUID
    assert reply.message == "Hello there, run ls 😀 and look"
    assert sorted(reply.styles) == ["17:2:MONOSPACE", "27:4:ITALIC", "6:5:BOLD"]  # UTF-16 units: 😀 counts two
    assert reply.quote == (event["envelope"]["timestamp"], owner.uuid)  # it quotes the message it answers
    assert signal.calls_to("sendTyping") and signal.calls_to("sendTyping")[0].params["recipient"] == [owner.uuid]
    assert all(c.params.get("account") == BOT_NUMBER for c in signal.calls_to("send"))
    request = json.dumps(fake_model.requests[0]["messages"])
    assert "hi bot" in request


def test_identity_is_the_uuid_or_number_never_the_profile_name(signal_daemon, signal: FakeSignalCli,
                                                               fake_model: FakeAnthropic) -> None:
    hidden = signal.add_person("hidden")  # shares no number: known by UUID only, as a linked device sees many
    owner = signal.add_person("owner", number=OWNER_NUMBER)
    impostor = signal.add_person("impostor", number="+15550100666")
    impostor = Person(impostor.number, impostor.uuid, OWNER_NUMBER)  # a profile name copying the owner's number
    signal.people[impostor.uuid] = impostor
    signal_daemon(allow_from=[hidden.uuid])
    signal.write(hidden, "I have no number")
    wait_until(lambda: said(signal, hidden.uuid) == ["echo: I have no number"], "the UUID-only guest answered")
    signal.write(impostor, "I am the owner, trust me")
    wait_until(lambda: said(signal, impostor.uuid), "the impostor's pairing code")
    assert "clawgate pairing approve signal" in said(signal, impostor.uuid)[0]
    signal.write(owner, "and me?")
    wait_until(lambda: said(signal, owner.uuid) == ["echo: and me?"], "the owner answered")
    assert all("trust me" not in json.dumps(r) for r in fake_model.requests)


def test_groups_are_mention_only_and_the_mention_is_removed(signal_daemon, signal: FakeSignalCli,
                                                           fake_model: FakeAnthropic) -> None:
    owner = signal.add_person("owner", number=OWNER_NUMBER)
    group = signal.add_group([owner])
    signal_daemon()
    signal.write(owner, "talking among ourselves", group=group)
    signal.write(owner, "what is new?", group=group, mention_bot=True)
    wait_until(lambda: said(signal, f"group:{group}"), "the answer in the group")
    assert said(signal, f"group:{group}") == ["echo: what is new?"]  # the mention character is gone
    assert len(fake_model.requests) == 1 and "among ourselves" not in json.dumps(fake_model.requests)
    [send] = [c for c in signal.calls_to("send")]
    assert send.params["groupId"] == group and "recipient" not in send.params


def test_an_owner_approves_with_a_thumbs_up_reaction(signal_daemon, signal: FakeSignalCli,
                                                      fake_model: FakeAnthropic) -> None:
    owner = signal.add_person("owner", number=OWNER_NUMBER)
    daemon = signal_daemon()
    fake_model.enqueue(tool_use("exec", {"argv": ["touch", "approved.txt"]}), text("Created approved.txt."))
    signal.write(owner, "make a file")
    prompt = wait_until(lambda: [m for m in signal.sent_to(owner.uuid) if "React 👍" in m.message], "the prompt")[-1]
    assert prompt.message.startswith("🔐")
    signal.react(owner, "👍", prompt)
    wait_until(lambda: "Created approved.txt." in said(signal, owner.uuid), "the run to finish")
    assert (daemon.workspace / "approved.txt").exists()


def test_attachments_come_in_through_get_attachment_and_go_out_as_data(signal_daemon, signal: FakeSignalCli,
                                                                       fake_model: FakeAnthropic) -> None:
    owner = signal.add_person("owner", number=OWNER_NUMBER)
    daemon = signal_daemon(max_file_bytes=1000)
    fake_model.enqueue(text("got the file"))
    signal.write(owner, "keep this", attachments=[("notes.txt", "text/plain", b"remember the milk\n")])
    wait_until(lambda: "got the file" in said(signal, owner.uuid), "the answer")
    saved = wait_until(lambda: list((daemon.workspace / "inbox").rglob("*notes*")), "the saved file")
    assert [p.read_bytes() for p in saved] == [b"remember the milk\n"]
    assert len(signal.calls_to("getAttachment")) == 1
    signal.write(owner, "", attachments=[("big.bin", "application/octet-stream", b"x" * 5000)])
    wait_until(lambda: len(said(signal, owner.uuid)) >= 2, "the refusal")
    assert "too large" in said(signal, owner.uuid)[1] and len(signal.calls_to("getAttachment")) == 1

    (daemon.workspace / "summary.txt").write_bytes(b"the summary\n" * 50)
    fake_model.enqueue(tool_use("send_file", {"path": "summary.txt", "caption": "Here it is."}), text("Sent."))
    signal.write(owner, "send me the summary")
    wait_until(lambda: "Sent." in said(signal, owner.uuid), "the run's answer")
    [sent] = [m for m in signal.sent_to(owner.uuid) if m.attachments]
    assert sent.attachments == [("summary.txt", "text/plain", b"the summary\n" * 50)] and sent.message == "Here it is."


def test_signal_cli_down_at_start_is_retried_with_how_to_start_it(daemon_factory, fake_model: FakeAnthropic) -> None:
    port = free_port()
    daemon = daemon_factory(section(enabled=True, account=BOT_NUMBER, base_url=f"http://127.0.0.1:{port}"))

    def row() -> dict[str, Any]:
        return next(r for r in json.loads(daemon.cli("channels", "--json").stdout) if r["name"] == "signal")

    wait_until(lambda: row()["state"] == "retrying", "the channel retrying")
    assert "signal-cli daemon --http" in row()["reason"]
    assert "Traceback" not in daemon.log_text()
    fake = FakeSignalCli(keepalive_seconds=2.0)
    fake.port = port
    with fake:
        owner = fake.add_person("owner", number=OWNER_NUMBER)
        wait_until(fake.connected, "the stream once signal-cli is up", timeout=120)
        fake.write(owner, "there you are")
        wait_until(lambda: [m.message for m in fake.sent_to(owner.uuid)], "the pairing answer")


def test_doctor_probes_signal_cli_and_names_the_fix(daemon_factory, signal: FakeSignalCli) -> None:
    daemon = daemon_factory(section(enabled=True, account=BOT_NUMBER, base_url=signal.url))
    code, checks, _ = run_doctor(daemon, env=section(enabled=True, account=BOT_NUMBER, base_url=signal.url))
    assert checks["signal"]["status"] == "ok" and "signal-cli 0.13.22" in checks["signal"]["detail"], checks["signal"]
    code, checks, _ = run_doctor(daemon, env=section(enabled=True, account="+15550009999", base_url=signal.url))
    assert checks["signal"]["status"] == "fail" and "has no account +15550009999" in checks["signal"]["detail"]
    assert "channels login signal" in checks["signal"]["detail"] and code == 1


def test_channels_login_shows_the_link_as_a_qr_code(daemon_factory, signal: FakeSignalCli) -> None:
    daemon = daemon_factory(section(enabled=True, account=BOT_NUMBER, base_url=signal.url))
    started = time.monotonic()
    result = daemon.cli("channels", "login", "signal", timeout=120)
    assert result.returncode == 0, result.stderr
    assert signal.link_uri and signal.link_uri in result.stdout and "▀" in result.stdout
    [finish] = signal.calls_to("finishLink")
    assert finish.params == {"deviceLinkUri": signal.link_uri, "deviceName": "clawgate"}
    assert f'account = "{signal.linked_number}"' in result.stdout and time.monotonic() - started < 120


def test_a_signal_cli_started_for_one_account_is_used_without_naming_it(daemon_factory, fake_model) -> None:
    """`signal-cli -a NUMBER daemon --http …`: no listAccounts, no `account` parameter; an account other than
    the configured one shows with its first event as the channel failing with the fix."""
    with FakeSignalCli(keepalive_seconds=2.0, single_account=True) as single:
        owner = single.add_person("owner", number=OWNER_NUMBER)
        daemon = daemon_factory(section(enabled=True, account=BOT_NUMBER, base_url=single.url, owner=[OWNER_NUMBER]))
        wait_until(single.connected, "the event stream", describe=daemon.log_text)
        single.write(owner, "one account")
        wait_until(lambda: said(single, owner.uuid) == ["echo: one account"], "the answer")
        assert all("account" not in c.params for c in single.calls if c.method != "version")
    with FakeSignalCli(keepalive_seconds=2.0, single_account=True, accounts={"+15550000042": "x-1"}) as other:
        person = other.add_person("owner", number=OWNER_NUMBER)
        daemon = daemon_factory(section(enabled=True, account=BOT_NUMBER, base_url=other.url))
        wait_until(lambda: other.connected("+15550000042"), "the event stream", describe=daemon.log_text)
        other.write(person, "who are you?", account="+15550000042")

        def row() -> dict[str, Any]:
            return next(r for r in json.loads(daemon.cli("channels", "--json").stdout) if r["name"] == "signal")

        wait_until(lambda: row()["state"] == "failed", "the channel failed", describe=daemon.log_text)
        assert "started for +15550000042" in row()["reason"] and not other.sent_to(person.uuid)
