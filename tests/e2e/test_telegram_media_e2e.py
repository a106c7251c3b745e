"""Telegram beyond text, end to end through the fake Bot API and the real daemon: photos reach the
model as images, documents land in the workspace under a safe name, voice notes are refused in one
line, accepted messages get a reaction, and webhook mode keeps the accept-then-confirm guarantee."""

from __future__ import annotations

import base64
import http.client
import json
import socket
import sqlite3
import urllib.error
import urllib.request

from clawgate.channels.kit.files import VOICE_REFUSAL
from clawgate.channels.telegram.webhook import WebhookServer, default_secret
from tests.fakes.anthropic_api import FakeAnthropic, text
from tests.fakes.telegram_api import FakeTelegram
from tests.harness import free_port
from tests.telegram_support import CHAT, replies, telegram, tg_daemon, user_texts  # noqa: F401

PHOTO = b"\xff\xd8\xff\xe0" + bytes(range(256)) * 40  # the large size; the thumbnail differs


def _images(body: dict) -> list[dict]:
    return [b for m in body["messages"] if m["role"] == "user" and isinstance(m["content"], list)
            for b in m["content"] if b.get("type") == "image"]


def test_a_photo_reaches_the_model_as_an_image_and_is_acknowledged(tg_daemon, telegram: FakeTelegram,
                                                                   fake_model: FakeAnthropic) -> None:
    tg_daemon()
    fake_model.enqueue(text("A test pattern."))
    telegram.inject_photo(CHAT, PHOTO, caption="what is this?")
    telegram.wait_for(lambda: "A test pattern." in replies(telegram, CHAT), timeout=20)
    [body] = fake_model.requests
    [image] = _images(body)
    assert image["source"] == {"type": "base64", "media_type": "image/jpeg", "data": base64.b64encode(PHOTO).decode()}
    assert user_texts(body)[-1] == "what is this?"
    telegram.wait_for(lambda: len(telegram.reactions) == 1)
    assert telegram.reactions[0]["reaction"] == [{"type": "emoji", "emoji": "👀"}]
    assert telegram.reactions[0]["chat_id"] == CHAT


def test_a_document_is_saved_under_a_safe_name_and_named_to_the_model(tg_daemon, telegram: FakeTelegram,
                                                                      fake_model: FakeAnthropic) -> None:
    daemon = tg_daemon()
    fake_model.enqueue(text("Saved and read."))
    update = telegram.inject_document(CHAT, b"quarterly numbers\n", "../../etc/My Report (final).txt",
                                      mime_type="text/plain", caption="keep this")
    telegram.wait_for(lambda: "Saved and read." in replies(telegram, CHAT), timeout=20)
    saved = list((daemon.guest_workspace(f"telegram:{CHAT}") / "inbox").iterdir())  # the sender's own workspace
    assert not (daemon.workspace / "inbox").exists()
    assert len(saved) == 1 and saved[0].read_bytes() == b"quarterly numbers\n"
    assert saved[0].name.endswith("-My_Report_final_.txt") and ".." not in saved[0].name
    said = user_texts(fake_model.requests[0])[-1]
    assert said.startswith("keep this\n") and f"inbox/{saved[0].name}" in said and "text/plain" in said
    assert not (daemon.home / "etc").exists() and update


def test_too_large_documents_and_voice_notes_are_refused_in_one_line(tg_daemon, telegram: FakeTelegram,
                                                                     fake_model: FakeAnthropic) -> None:
    daemon = tg_daemon(max_file_bytes=1000)
    telegram.inject_document(CHAT, b"x" * 5000, "big.bin")
    telegram.wait_for(lambda: any("too large" in r for r in replies(telegram, CHAT)), timeout=20)
    telegram.inject_voice(CHAT)
    telegram.wait_for(lambda: VOICE_REFUSAL in replies(telegram, CHAT), timeout=20)
    assert fake_model.requests == [] and not (daemon.workspace / "inbox").exists()
    assert telegram.reactions == []  # nothing was accepted
    [big] = [r for r in replies(telegram, CHAT) if "too large" in r]
    assert "\n" not in big and "max_file_bytes" in big


def test_webhook_mode_answers_and_a_message_sent_while_down_is_retried_until_accepted(
        tg_daemon, telegram: FakeTelegram, fake_model: FakeAnthropic) -> None:
    port = free_port()
    daemon = tg_daemon(webhook_url=f"http://127.0.0.1:{port}/tg-hook", webhook_port=port)
    telegram.wait_for(lambda: telegram._webhook_url.endswith("/tg-hook"), timeout=20)
    fake_model.enqueue(text("Hello over the webhook."))
    first = telegram.inject_message(CHAT, "hi")
    telegram.wait_for(lambda: "Hello over the webhook." in replies(telegram, CHAT), timeout=20)
    assert first in telegram.webhook_delivered()
    assert not any(name == "getUpdates" for name, _ in telegram.calls)

    daemon.kill()
    fake_model.enqueue(text("Got it after the restart."))
    second = telegram.inject_message(CHAT, "are you there?")
    telegram.wait_for(lambda: any(u == second and status != 200 for u, status in telegram.webhook_posts))
    daemon.start()
    telegram.wait_for(lambda: "Got it after the restart." in replies(telegram, CHAT), timeout=30)
    assert replies(telegram, CHAT).count("Got it after the restart.") == 1
    assert telegram.webhook_delivered().count(second) == 1

    forged = urllib.request.Request(f"http://127.0.0.1:{port}/tg-hook", data=b"{}", method="POST",
                                    headers={"X-Telegram-Bot-Api-Secret-Token": "guess"})
    try:
        urllib.request.urlopen(forged, timeout=10)
        raise AssertionError("a request without the secret was accepted")
    except urllib.error.HTTPError as exc:
        assert exc.code == 403
    for method, length, status in (("POST", 2 * 1024 * 1024, 413), ("GET", 0, 405)):
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)  # the body is never sent:
        connection.putrequest(method, "/tg-hook")                               # refused on the headers
        connection.putheader("Content-Length", str(length))
        connection.putheader("X-Telegram-Bot-Api-Secret-Token", default_secret(telegram.token))
        connection.endheaders()
        assert connection.getresponse().status == status
        connection.close()


async def test_the_webhook_answers_503_until_the_update_is_stored() -> None:
    import httpx
    from telegram import Bot

    attempts: list[int] = []

    async def handle(update) -> None:  # the inbox commit fails once (a locked or full disk), then works
        attempts.append(update.update_id)
        if len(attempts) == 1:
            raise sqlite3.OperationalError("database is locked")

    server = WebhookServer(Bot("1:T"), handle, host="127.0.0.1", port=0, path="/hook", secret=default_secret("1:T"))
    await server.start()
    try:
        url = f"http://127.0.0.1:{server.port}/hook"
        update = {"update_id": 7, "message": {"message_id": 1, "date": 0, "chat": {"id": 1, "type": "private"},
                                              "text": "hi"}}
        headers = {"X-Telegram-Bot-Api-Secret-Token": default_secret("1:T")}
        async with httpx.AsyncClient() as client:
            assert (await client.post(url, json=update, headers=headers)).status_code == 503
            assert (await client.post(url, json=update, headers=headers)).status_code == 200
            assert (await client.post(url + "x", json=update, headers=headers)).status_code == 404
            assert (await client.post(url, json=update)).status_code == 403
    finally:
        await server.stop()
    assert attempts == [7, 7]
    with socket.socket() as probe:  # stopped: the port is released
        probe.bind(("127.0.0.1", 0))


class _SpeechToText:
    """A local stand-in for an OpenAI-compatible /audio/transcriptions endpoint: records what it got."""

    def __init__(self, status: int = 200, said: str = "buy milk tomorrow") -> None:
        import http.server
        import threading

        self.bodies: list[bytes] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - stdlib name
                outer.bodies.append(self.rfile.read(int(self.headers["Content-Length"])))
                body = json.dumps({"text": said} if status == 200 else {"error": "boom"}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_voice_notes_are_transcribed_when_a_provider_is_configured(tg_daemon, telegram: FakeTelegram,
                                                                   fake_model: FakeAnthropic) -> None:
    stt = _SpeechToText()
    try:
        tg_daemon(transcription={"base_url": stt.base_url, "model": "whisper-1", "api_key": "stt-key"})
        fake_model.enqueue(text("Added milk to the list."))
        telegram.inject_voice(CHAT, b"OggS-voice-bytes")
        telegram.wait_for(lambda: "Added milk to the list." in replies(telegram, CHAT), timeout=20)
    finally:
        stt.close()
    assert user_texts(fake_model.requests[0])[-1] == "[voice note, transcribed] buy milk tomorrow"
    [body] = stt.bodies
    assert b"OggS-voice-bytes" in body and b"whisper-1" in body


def test_a_failing_transcription_is_one_line(tg_daemon, telegram: FakeTelegram, fake_model: FakeAnthropic) -> None:
    stt = _SpeechToText(status=500)
    try:
        tg_daemon(transcription={"base_url": stt.base_url})
        telegram.inject_voice(CHAT)
        telegram.wait_for(lambda: any("couldn't transcribe" in r for r in replies(telegram, CHAT)), timeout=20)
    finally:
        stt.close()
    assert fake_model.requests == []
