"""Telegram settings as users write them, through the real daemon and the fake Bot API:
a base_url with or without its trailing /bot, and what a bad one says."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.fakes.anthropic_api import FakeAnthropic, text
from tests.fakes.telegram_api import FakeTelegram
from tests.harness import ROOT, DaemonProcess
from tests.telegram_support import CHAT, replies, telegram, tg_daemon  # noqa: F401


@pytest.mark.parametrize("suffix", ["", "/", "/bot/"])
def test_base_url_with_or_without_bot(tg_daemon, telegram: FakeTelegram, fake_model: FakeAnthropic,
                                      suffix: str) -> None:
    root = telegram.base_url.removesuffix("/bot")
    daemon = tg_daemon(base_url=root + suffix)
    fake_model.enqueue(text("Got your file."))
    telegram.inject_document(CHAT, b"numbers\n", "report.txt", mime_type="text/plain", caption="keep this")
    telegram.wait_for(lambda: "Got your file." in replies(telegram, CHAT), timeout=30)
    # the file came from the file URL beside the API (…/file/bot<token>/…), not a crash
    saved = list((daemon.workspace / "inbox").iterdir())
    assert len(saved) == 1 and saved[0].read_bytes() == b"numbers\n"
    assert "Traceback" not in daemon.log_text()


def test_a_base_url_that_is_not_http_is_one_line(tmp_path, telegram: FakeTelegram) -> None:
    proc = DaemonProcess(tmp_path / "home", anthropic_url=None, env={"TELEGRAM_BOT_TOKEN": telegram.token})
    proc.init()
    env = {**proc.env, "CLAWGATE_CHANNELS__TELEGRAM__BASE_URL": "127.0.0.1:8081/bot"}
    result = subprocess.run([sys.executable, "-m", "gateway.cli", "gateway"], env=env, cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and result.stderr.count("\n") == 1, result.stderr
    assert "channels.telegram.base_url" in result.stderr and "http://127.0.0.1:8081/bot" in result.stderr
