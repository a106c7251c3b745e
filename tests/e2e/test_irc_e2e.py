"""The IRC channel end to end: the real daemon process on a real IRC network (InspIRCd + Anope
services, tests/irc_server.py), people writing through the tests' own socket client.

Identity is the services account in each message's `account` tag: the owner is logged in to the
account `boss` by SASL; an impostor who takes the nick `boss` without logging in is a stranger.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from tests.fakes.anthropic_api import FakeAnthropic, text, tool_use
from tests.e2e.test_doctor import run_doctor
from tests.harness import DaemonProcess
from tests.irc_server import IrcNetwork, IrcUser, client_certificate
from tests.waiting import wait_until

BOT, BOT_PASSWORD = "clawbot", "bot-password-1"
OWNER, OWNER_PASSWORD = "boss", "boss-password-1"
CHANNEL = "#team"


@pytest.fixture
def network() -> Iterator[IrcNetwork]:
    net = IrcNetwork().start()
    try:
        net.register(BOT, BOT_PASSWORD)
        net.register(OWNER, OWNER_PASSWORD)
        yield net
    finally:
        net.stop()


def section(**values: Any) -> dict[str, str]:
    return {f"CLAWGATE_CHANNELS__IRC__{k.upper()}": v if isinstance(v, str) else json.dumps(v)
            for k, v in values.items()}


@pytest.fixture
def irc_daemon(daemon_factory: Callable[..., DaemonProcess], network: IrcNetwork) -> Callable[..., DaemonProcess]:
    def make(**values: Any) -> DaemonProcess:
        settings = {"enabled": True, "host": "127.0.0.1", "port": network.port, "tls": False, "nick": BOT,
                    "sasl_password": BOT_PASSWORD, "channels": [CHANNEL], "owner": [OWNER],
                    "flood_burst": 5, "flood_lines_per_second": 5, "retry_base_seconds": 0.05, **values}
        daemon = daemon_factory(section(**settings))
        wait_until(lambda: channel_row(daemon)["state"] == "running", "the IRC channel running",
                   describe=daemon.log_text, timeout=120)
        return daemon

    return make


def channel_row(daemon: DaemonProcess) -> dict[str, Any]:
    return next(r for r in json.loads(daemon.cli("channels", "--json").stdout) if r["name"] == "irc")


def test_a_dm_and_a_channel_mention_are_answered_and_other_channel_talk_is_not(
        irc_daemon, network: IrcNetwork, fake_model: FakeAnthropic) -> None:
    daemon = irc_daemon()
    with IrcUser(network, OWNER, OWNER_PASSWORD) as boss:
        boss.say(BOT, "hello in private")
        wait_until(lambda: boss.received(BOT) == ["echo: hello in private"], "the DM answered",
                   describe=daemon.log_text)
        boss.join(CHANNEL)
        boss.say(CHANNEL, "just chatting with the team")
        boss.say(CHANNEL, f"{BOT}: what is new?")
        wait_until(lambda: boss.received(BOT, CHANNEL), "the mention answered in the channel", describe=daemon.log_text)
        assert boss.received(BOT, CHANNEL) == ["echo: what is new?"]  # the mention is gone from the text
        boss.send(f"PRIVMSG {BOT} :\x01VERSION\x01")  # CTCP: answered by NOTICE, never given to the model
        wait_until(lambda: [ln for ln in boss.lines if "NOTICE" in ln and "VERSION" in ln], "the VERSION reply")
    requests = json.dumps(fake_model.requests)
    assert len(fake_model.requests) == 2, requests
    assert "just chatting" not in requests and "VERSION" not in requests


def test_a_long_answer_is_split_under_512_bytes_with_multibyte_text_intact(
        irc_daemon, network: IrcNetwork, fake_model: FakeAnthropic) -> None:
    irc_daemon()
    answer = " ".join(f"Größe{i}→😀日本語" for i in range(240))  # 3,000+ characters, most of them multibyte
    assert len(answer) >= 3000
    fake_model.enqueue(text(answer))
    with IrcUser(network, OWNER, OWNER_PASSWORD) as boss:
        boss.say(BOT, "tell me a lot")
        wait_until(lambda: " ".join(boss.received(BOT)).split() == answer.split(), "the whole long answer",
                   timeout=180, describe=lambda: "\n".join(boss.received(BOT)))
        raw = [ln for ln in boss.lines if f":{BOT}!" in ln and " PRIVMSG " in ln]
    untagged = [ln.split(" ", 1)[1] if ln.startswith("@") else ln for ln in raw]
    assert len(untagged) > 6 and all(len(ln.encode()) + 2 <= 512 for ln in untagged), [len(ln.encode()) for ln in untagged]
    assert max(len(ln.encode()) for ln in untagged) > 400  # lines are filled, not cut short
    assert "\ufffd" not in " ".join(untagged)  # no character cut in half


def test_only_the_owner_account_approves_and_a_same_nick_impostor_is_a_stranger(
        irc_daemon, network: IrcNetwork, fake_model: FakeAnthropic) -> None:
    daemon = irc_daemon()
    with IrcUser(network, OWNER) as impostor:  # the owner's nick, not logged in to the owner's account
        impostor.say(BOT, "I am the boss, run this")
        wait_until(lambda: impostor.received(BOT), "the impostor's answer", describe=daemon.log_text)
        assert "not logged in" in impostor.received(BOT)[0]
        impostor.say(BOT, "/approve 1")
    assert not fake_model.requests  # the impostor reached nothing of the agent
    fake_model.enqueue(tool_use("exec", {"argv": ["touch", "approved.txt"]}), text("Created approved.txt."))
    with IrcUser(network, OWNER, OWNER_PASSWORD) as boss:
        boss.say(BOT, "make a file")
        prompt = wait_until(lambda: [m for m in boss.received(BOT) if "/approve " in m], "the approval prompt",
                            describe=daemon.log_text)[-1]
        approval_id = prompt.split("/approve ", 1)[1].split()[0].strip("`.,)")
        boss.say(BOT, f"!approve {approval_id}")
        wait_until(lambda: "Created approved.txt." in boss.received(BOT), "the run to finish",
                   describe=lambda: "\n".join(boss.received(BOT)))
    assert (daemon.workspace / "approved.txt").exists()


def test_the_server_restarted_the_bot_reconnects_and_rejoins(irc_daemon, network: IrcNetwork,
                                                            fake_model: FakeAnthropic) -> None:
    daemon = irc_daemon()
    network.restart()
    wait_until(lambda: channel_row(daemon)["state"] == "running" and _in_channel(network), "reconnected and re-joined",
               timeout=180, describe=daemon.log_text)
    with IrcUser(network, OWNER, OWNER_PASSWORD) as boss:
        boss.join(CHANNEL)
        boss.say(CHANNEL, f"{BOT}, are you back?")
        wait_until(lambda: boss.received(BOT, CHANNEL) == ["echo: are you back?"], "the answer after the restart",
                   describe=daemon.log_text)


def _in_channel(network: IrcNetwork) -> bool:
    with IrcUser(network, "looker") as looker:
        looker.send(f"NAMES {CHANNEL}")
        lines = looker.wait_for(lambda ln: " 366 " in ln, "NAMES")
        return any(" 353 " in ln and BOT in ln.split(" :", 1)[-1].replace("@", "").split() for ln in lines)


def test_doctor_logs_in_and_names_the_setting_when_refused(daemon_factory, network: IrcNetwork) -> None:
    good = section(enabled=True, host="127.0.0.1", port=network.port, tls=False, nick=BOT, sasl_password=BOT_PASSWORD)
    daemon = daemon_factory(good)
    # doctor reads the running daemon's state of the channel too: it warns while that is still starting
    wait_until(lambda: channel_row(daemon)["state"] == "running", "the IRC channel running", describe=daemon.log_text,
               timeout=120)
    code, checks, _ = run_doctor(daemon, env=good)
    assert checks["irc"]["status"] == "ok", checks["irc"]
    assert f"account {BOT}" in checks["irc"]["detail"]
    bad = {**good, **section(sasl_password="wrong-password")}
    code, checks, _ = run_doctor(daemon, env=bad)
    assert checks["irc"]["status"] == "fail" and "refused the SASL log-in" in checks["irc"]["detail"], checks["irc"]
    assert "sasl_password" in checks["irc"]["fix"] and "wrong-password" not in json.dumps(checks) and code == 1


def test_nickserv_identify_logs_the_bot_in_where_there_is_no_sasl(daemon_factory, network: IrcNetwork) -> None:
    env = section(enabled=True, host="127.0.0.1", port=network.port, tls=False, nick=BOT,
                  nickserv_password=BOT_PASSWORD)
    daemon = daemon_factory(env)
    wait_until(lambda: channel_row(daemon)["state"] == "running", "the IRC channel running", describe=daemon.log_text,
               timeout=120)
    code, checks, _ = run_doctor(daemon, env=env)
    assert checks["irc"]["status"] == "ok" and f"account {BOT}" in checks["irc"]["detail"], checks["irc"]


def test_tls_trusts_the_configured_ca_and_names_the_setting_when_untrusted(daemon_factory, network: IrcNetwork,
                                                                            fake_model: FakeAnthropic) -> None:
    untrusted = section(enabled=True, host="127.0.0.1", port=network.tls_port, tls=True, nick=BOT,
                        sasl_password=BOT_PASSWORD)
    daemon = daemon_factory(untrusted)
    code, checks, _ = run_doctor(daemon, env=untrusted)
    assert checks["irc"]["status"] == "fail" and "tls_ca_file" in checks["irc"]["detail"], checks["irc"]
    trusted = {**untrusted, **section(tls_ca_file=str(network.cert), owner=[OWNER])}
    daemon = daemon_factory(trusted)
    wait_until(lambda: channel_row(daemon)["state"] == "running", "the channel over TLS", describe=daemon.log_text)
    with IrcUser(network, OWNER, OWNER_PASSWORD) as boss:
        boss.say(BOT, "over TLS")
        wait_until(lambda: boss.received(BOT) == ["echo: over TLS"], "the answer over TLS", describe=daemon.log_text)


def test_a_logged_in_stranger_gets_a_pairing_code_and_nothing_reaches_the_model(
        irc_daemon, network: IrcNetwork, fake_model: FakeAnthropic) -> None:
    network.register("newcomer", "newcomer-password-1")
    daemon = irc_daemon()
    with IrcUser(network, "newcomer", "newcomer-password-1") as newcomer:
        newcomer.say(BOT, "hello, who are you?")
        wait_until(lambda: any("clawgate pairing approve irc" in ln for ln in newcomer.received(BOT)),
                   "the pairing code", describe=daemon.log_text)
        said = "\n".join(newcomer.received(BOT))
        code = re.search(r"clawgate pairing approve irc ([A-Z2-9]{8})", said)
        assert code and code.group(1) in said.split("\n")  # the code on a line of its own, as the kit wrote it
    assert not fake_model.requests


def test_sasl_external_logs_the_bot_in_by_its_certificate_and_names_the_setting_when_refused(
        daemon_factory, network: IrcNetwork, tmp_path: Path) -> None:
    cert, key = client_certificate(tmp_path, "certbot")
    network.register("certbot", "certbot-password-1", (cert, key))  # the password is never given to the bot
    env = section(enabled=True, host="127.0.0.1", port=network.tls_port, tls=True, tls_ca_file=str(network.cert),
                  nick="certbot", tls_certfile=str(cert), tls_keyfile=str(key), owner=[OWNER],
                  retry_base_seconds=0.05)
    daemon = daemon_factory(env)
    wait_until(lambda: channel_row(daemon)["state"] == "running", "the channel logged in by certificate",
               describe=daemon.log_text, timeout=120)
    code, checks, _ = run_doctor(daemon, env=env)
    assert checks["irc"]["status"] == "ok" and "account certbot" in checks["irc"]["detail"], checks["irc"]
    with IrcUser(network, OWNER, OWNER_PASSWORD) as boss:
        boss.say("certbot", "who are you logged in as?")
        wait_until(lambda: boss.received("certbot") == ["echo: who are you logged in as?"], "the answer",
                   describe=daemon.log_text)
    # a certificate on no account: refused by services, the fix named
    stray_cert, stray_key = client_certificate(tmp_path, "stray")
    code, checks, _ = run_doctor(daemon, env={**env, **section(tls_certfile=str(stray_cert), tls_keyfile=str(stray_key))})
    assert checks["irc"]["status"] == "fail" and "SASL EXTERNAL" in checks["irc"]["detail"], checks["irc"]
    assert "CERT ADD" in checks["irc"]["detail"] + checks["irc"]["fix"] and code == 1
    # a file that is no certificate: named, not retried as a network problem
    code, checks, _ = run_doctor(daemon, env={**env, **section(tls_certfile=str(tmp_path / "missing.pem"))})
    assert checks["irc"]["status"] == "fail" and "tls_certfile" in checks["irc"]["detail"], checks["irc"]


def test_the_account_is_read_per_message_so_logging_in_and_out_mid_conversation_counts_at_once(
        irc_daemon, network: IrcNetwork, fake_model: FakeAnthropic) -> None:
    """Why no WHOX / account-notify cache: the server tags each line with the account its sender is logged in to
    when it relays it, so a log-in or log-out counts from the next line on, with no window where a cache is stale."""
    daemon = irc_daemon()
    with IrcUser(network, OWNER) as boss:  # the owner's nick, not (yet) logged in
        boss.say(BOT, "before logging in")
        wait_until(lambda: any("not logged in" in ln for ln in boss.received(BOT)), "the request to log in",
                   describe=daemon.log_text)
        boss.say("NickServ", f"IDENTIFY {OWNER_PASSWORD}")
        boss.wait_for(lambda ln: " 900 " in ln, "logged in to the account")
        boss.say(BOT, "now logged in")
        wait_until(lambda: "echo: now logged in" in boss.received(BOT), "the owner answered", describe=daemon.log_text)
        boss.say("NickServ", "LOGOUT")
        boss.wait_for(lambda ln: " 901 " in ln, "logged out")
        boss.say(BOT, "after logging out")
        boss.say("NickServ", f"IDENTIFY {OWNER_PASSWORD}")
        boss.wait_for(lambda _: sum(" 900 " in ln for ln in list(boss.lines)) == 2, "logged in again")
        boss.say(BOT, "back again")
        # the server relays one sender's lines in order: once this is answered, the line before it was read
        wait_until(lambda: "echo: back again" in boss.received(BOT), "the owner answered again",
                   describe=daemon.log_text)
    requests = json.dumps(fake_model.requests)
    assert "now logged in" in requests and "back again" in requests
    assert "before logging in" not in requests and "after logging out" not in requests
