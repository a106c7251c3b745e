"""Channels as plugins, end to end: `clawgate channels` lists what is installed (a third-party channel
installed with pip included), config sections are checked against the installed channels in one line,
and with `[channels] owner_shared_session` the owner's private chats on two channels share one session."""

from __future__ import annotations

import json
import os
import re

from tests.conformance.platforms.echochat import EchoChatHarness
from tests.conformance.platforms.telegram import TelegramHarness
from tests.fakes.anthropic_api import FakeAnthropic, text, tool_use
from tests.harness import DaemonProcess
from tests.waiting import wait_until


def plugin_env(harness: EchoChatHarness, **access: object) -> dict[str, str]:
    return {**harness.env(owner=[harness.owner], **access), "PYTHONPATH": os.pathsep.join(harness.python_path())}


def test_an_installed_plugin_is_listed_and_runs(daemon_factory) -> None:
    echo = EchoChatHarness()
    echo.start()
    try:
        daemon: DaemonProcess = daemon_factory(plugin_env(echo))
        wait_until(lambda: '"running"' in daemon.cli("channels", "--json").stdout, "echochat running")
        rows = {row["name"]: row for row in json.loads(daemon.cli("channels", "--json").stdout)}
        assert rows["echochat"]["installed"] == "clawgate_echochat:EchoChatAdapter" and rows["echochat"]["enabled"]
        assert rows["telegram"]["installed"] == "clawgate.channels.telegram:TelegramAdapter"
        assert not rows["telegram"]["enabled"]  # no bot token
        text = daemon.cli("channels").stdout
        assert "echochat" in text and "running" in text
        status = daemon.cli("status").stdout
        assert "echochat: running" in status
    finally:
        echo.close()


def test_a_section_for_a_channel_that_is_not_installed_is_one_line(daemon_factory, tmp_path) -> None:
    daemon = DaemonProcess(tmp_path / "home", anthropic_url=None, env={"CLAWGATE_CHANNELS__DISCROD__TOKEN": "x"})
    daemon.init()
    started = daemon.cli("gateway", timeout=60)
    assert started.returncode == 2 and started.stderr.count("\n") == 1 and "Traceback" not in started.stderr
    assert re.search(r"\[channels\.discrod\] names no installed channel \(installed: (\w+, )*discord, (\w+, )*telegram(, \w+)*\)",
                     started.stderr), started.stderr
    doctor = json.loads(daemon.cli("doctor", "--json", "--offline").stdout)
    [check] = [c for c in doctor["checks"] if c["name"] == "channels"]
    assert check["status"] == "fail" and "discrod" in check["detail"]


def test_a_bad_key_in_a_plugin_section_is_one_line(tmp_path) -> None:
    echo = EchoChatHarness()
    echo.start()
    try:
        env = {**plugin_env(echo), "CLAWGATE_CHANNELS__ECHOCHAT__DM_POLICY": "everyone"}
        daemon = DaemonProcess(tmp_path / "home", anthropic_url=None, env=env)
        daemon.init()
        started = daemon.cli("gateway", timeout=60)
    finally:
        echo.close()
    assert started.returncode == 2 and started.stderr.count("\n") == 1
    assert "channels.echochat.dm_policy" in started.stderr and "CLAWGATE_CHANNELS__ECHOCHAT__DM_POLICY" in started.stderr


def test_the_owner_can_share_one_session_across_channels(daemon_factory, fake_model: FakeAnthropic) -> None:
    echo, telegram = EchoChatHarness(), TelegramHarness()
    echo.start()
    telegram.start()
    try:
        env = {**plugin_env(echo, allow_from=[echo.friend]), **telegram.env(owner=[telegram.owner]),
               "CLAWGATE_CHANNELS__OWNER_SHARED_SESSION": "true"}
        daemon = daemon_factory(env)
        telegram.send_dm(telegram.owner, "remember the word pelican")
        wait_until(lambda: telegram.replies(telegram.dm_chat(telegram.owner)), "the Telegram reply")
        echo.send_dm(echo.owner, "which word?")
        wait_until(lambda: echo.replies(echo.dm_chat(echo.owner)), "the EchoChat reply")
        assert echo.replies(echo.dm_chat(echo.owner)) == ["echo: which word?"]  # answered where it was asked
        history = json.dumps(fake_model.requests[-1]["messages"])
        assert "pelican" in history  # the same conversation
        assert (daemon.home / "state/sessions/owner%3Adm.jsonl").exists()
        # a guest's chat stays its own
        echo.send_dm(echo.friend, "hello")
        wait_until(lambda: echo.replies(echo.dm_chat(echo.friend)) == ["echo: hello"], "the guest's reply")
        assert len(fake_model.requests) == 3 and "pelican" not in json.dumps(fake_model.requests[-1]["messages"])
    finally:
        echo.close()
        telegram.close()


def test_pairing_works_the_same_on_a_plugin_channel(daemon_factory, fake_model: FakeAnthropic) -> None:
    echo = EchoChatHarness()
    echo.start()
    try:
        daemon = daemon_factory(plugin_env(echo, dm_policy="pairing", pairing_check_seconds=0.2))
        chat = echo.dm_chat(echo.stranger)
        echo.send_dm(echo.stranger, "hi, can I use this?")
        wait_until(lambda: echo.replies(chat), "the pairing code")
        code = re.search(r"\b([A-Z2-9]{8})\b", echo.replies(chat)[0]).group(1)  # type: ignore[union-attr]
        listed = daemon.cli("pairing", "list", "echochat")
        assert listed.returncode == 0 and code in listed.stdout and "echochat" in listed.stdout
        approved = daemon.cli("pairing", "approve", "echochat", code)
        assert approved.returncode == 0, approved.stderr
        wait_until(lambda: any("You're approved" in m["text"] for m in echo.fake.sent if m["chat"] == chat),
                   "the approval notice")
        echo.send_dm(echo.stranger, "thanks!")
        wait_until(lambda: "echo: thanks!" in echo.replies(chat), "the answer to the paired user")
        wrong = daemon.cli("pairing", "approve", "nosuchchat", code)
        assert wrong.returncode == 2 and "echochat" in wrong.stderr and "telegram" in wrong.stderr
    finally:
        echo.close()


def test_a_cron_job_made_in_a_plugin_channels_chat_reports_back_there(daemon_factory, fake_model: FakeAnthropic) -> None:
    echo = EchoChatHarness()
    echo.start()
    try:
        daemon_factory(plugin_env(echo))
        fake_model.enqueue_for("remind me to stretch",
                               tool_use("cron", {"action": "add", "message": "Remind the user to stretch", "at": "+1s"}),
                               text("Sure, I will remind you."))
        fake_model.enqueue_for("Remind the user to stretch", text("Time to stretch!"))
        chat = echo.dm_chat(echo.owner)
        echo.send_dm(echo.owner, "remind me to stretch in a second")
        wait_until(lambda: echo.replies(chat) == ["Sure, I will remind you.", "Time to stretch!"], "the reminder")
    finally:
        echo.close()
