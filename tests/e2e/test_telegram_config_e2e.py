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
    saved = list((daemon.guest_workspace(f"telegram:{CHAT}") / "inbox").iterdir())  # the sender's own workspace
    assert len(saved) == 1 and saved[0].read_bytes() == b"numbers\n"
    assert "Traceback" not in daemon.log_text()


def test_a_base_url_that_is_not_http_is_one_line(tmp_path, telegram: FakeTelegram) -> None:
    proc = DaemonProcess(tmp_path / "home", anthropic_url=None, env={"TELEGRAM_BOT_TOKEN": telegram.token})
    proc.init()
    env = {**proc.env, "CLAWGATE_CHANNELS__TELEGRAM__BASE_URL": "127.0.0.1:8081/bot"}
    result = subprocess.run([sys.executable, "-m", "clawgate.gateway.cli", "gateway"], env=env, cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and result.stderr.count("\n") == 1, result.stderr
    assert "channels.telegram.base_url" in result.stderr and "http://127.0.0.1:8081/bot" in result.stderr


def test_a_file_limit_above_20_mib_is_honoured_with_a_self_hosted_server(tg_daemon, telegram: FakeTelegram,
                                                                          fake_model: FakeAnthropic) -> None:
    limit = 24 * 1024 * 1024
    daemon = tg_daemon(max_file_bytes=limit)  # base_url: the fake, a self-hosted Bot API server
    big = bytes(range(256)) * (21 * 1024 * 4)  # 21 MiB: over the cloud API's 20, under the limit set
    fake_model.enqueue(text("Stored the big one."))
    telegram.inject_document(CHAT, big, "big.bin", caption="keep it")
    telegram.wait_for(lambda: "Stored the big one." in replies(telegram, CHAT), timeout=60)
    (saved,) = (daemon.guest_workspace(f"telegram:{CHAT}") / "inbox").iterdir()
    assert saved.stat().st_size == len(big) == 21 * 1024 * 1024
    telegram.inject_document(CHAT, b"x", "huge.bin", declared_size=limit + 1)
    telegram.wait_for(lambda: any("too large" in r for r in replies(telegram, CHAT)), timeout=30)
    (refusal,) = [r for r in replies(telegram, CHAT) if "too large" in r]
    assert "the limit is 24.0 MB" in refusal, refusal


def test_a_file_limit_the_cloud_bot_api_cannot_serve_is_refused_at_start(tmp_path, telegram: FakeTelegram) -> None:
    proc = DaemonProcess(tmp_path / "home", anthropic_url=None, env={"TELEGRAM_BOT_TOKEN": telegram.token})
    proc.init()
    env = {**proc.env, "CLAWGATE_CHANNELS__TELEGRAM__MAX_FILE_BYTES": str(50 * 1024 * 1024)}
    result = subprocess.run([sys.executable, "-m", "clawgate.gateway.cli", "gateway"], env=env, cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and result.stderr.count("\n") == 1, result.stderr
    assert "channels.telegram.max_file_bytes" in result.stderr and "self-hosted bot api server" in result.stderr.lower()


def test_a_body_of_unknown_size_is_read_no_further_than_the_limit(tg_daemon, telegram: FakeTelegram,
                                                                  fake_model: FakeAnthropic) -> None:
    limit = 1024 * 1024
    daemon = tg_daemon(max_file_bytes=limit)
    piece, count = b"\x00" * 65536, 768  # 48 MiB, no file_size, no Content-Length
    telegram.inject_unsized_document(CHAT, "endless.bin", piece=piece, count=count)
    telegram.wait_for(lambda: any("too large" in r for r in replies(telegram, CHAT)), timeout=60)
    (refusal,) = [r for r in replies(telegram, CHAT) if "too large" in r]
    assert "over 1.0 MB, the limit; channels.telegram.max_file_bytes" in refusal, refusal
    telegram.wait_for(lambda: telegram.streamed_sent, timeout=60)  # the server saw the reader go
    (sent,) = telegram.streamed_sent.values()
    assert sent < 16 * 1024 * 1024 < len(piece) * count  # the limit and what sockets buffer, not the body
    inbox = daemon.guest_workspace(f"telegram:{CHAT}") / "inbox"
    assert not inbox.exists() or list(inbox.iterdir()) == []  # nothing partial was kept
    assert fake_model.requests == [] and "Traceback" not in daemon.log_text()
