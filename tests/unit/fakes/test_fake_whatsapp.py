"""The fake Cloud API refuses what Meta documents as refused, with Meta's codes, and signs what it sends."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import threading
import time
import urllib.error
import urllib.request
from typing import Any, Iterator

import pytest
from aiohttp import web

from tests.fakes.whatsapp import APP_SECRET, PHONE_NUMBER_ID, TOKEN, FakeWhatsApp
from tests.fakes.whatsapp.server import VERSION
from tests.waiting import wait_until

USER = "15550009999"


@pytest.fixture
def fake() -> Iterator[FakeWhatsApp]:
    server = FakeWhatsApp().start()
    try:
        yield server
    finally:
        server.stop()


def _post(fake: FakeWhatsApp, body: dict[str, Any], *, token: str = TOKEN, phone: str = PHONE_NUMBER_ID) -> tuple[int, dict]:
    request = urllib.request.Request(f"{fake.base_url}/{VERSION}/{phone}/messages", data=json.dumps(body).encode(),
                                     headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def _text(body: str, to: str = USER) -> dict[str, Any]:
    return {"messaging_product": "whatsapp", "to": to, "type": "text", "text": {"body": body}}


def _buttons(*titles: str) -> dict[str, Any]:
    return {"messaging_product": "whatsapp", "to": USER, "type": "interactive", "interactive": {
        "type": "button", "body": {"text": "Approve?"},
        "action": {"buttons": [{"type": "reply", "reply": {"id": f"b{i}", "title": t}} for i, t in enumerate(titles)]}}}


def test_refusals_carry_metas_codes(fake: FakeWhatsApp) -> None:
    fake.last_wrote[USER] = time.time()
    status, body = _post(fake, _text("hi"), token="EAAGwrong")
    assert (status, body["error"]["code"]) == (401, 190)
    status, body = _post(fake, _text("hi"), phone="42")
    assert (status, body["error"]["code"], body["error"]["error_subcode"]) == (400, 100, 33)
    assert _post(fake, {k: v for k, v in _text("hi").items() if k != "messaging_product"})[1]["error"]["code"] == 100
    assert _post(fake, _text("x" * 4097))[1]["error"]["code"] == 100
    assert _post(fake, _buttons("a", "b", "c", "d"))[1]["error"]["code"] == 100
    assert _post(fake, _buttons("twenty-one characters"))[1]["error"]["code"] == 100
    assert _post(fake, _text("hi", to="15550000000"))[1]["error"]["code"] == 131047  # never wrote
    fake.last_wrote["15550000001"] = time.time() - 24 * 3600 - 5
    assert _post(fake, _text("hi", to="15550000001"))[1]["error"]["code"] == 131047  # window closed
    assert not fake.sent
    status, body = _post(fake, _text("x" * 4096))
    assert status == 200 and body["messages"][0]["id"].startswith("wamid.")
    assert _post(fake, _buttons("Approve", "Deny"))[0] == 200


def test_webhooks_are_signed_with_the_app_secret_and_retried_until_acknowledged(fake: FakeWhatsApp) -> None:
    """A receiver that answers 503 twice, then 200: three deliveries of the same signed body."""
    seen: list[tuple[bytes, str]] = []
    ready = threading.Event()
    loop = asyncio.new_event_loop()
    port: list[int] = []

    async def handle(request: web.Request) -> web.Response:
        seen.append((await request.read(), request.headers.get("X-Hub-Signature-256", "")))
        return web.Response(status=200 if len(seen) >= 3 else 503)

    async def serve() -> web.AppRunner:
        app = web.Application()
        app.router.add_post("/hook", handle)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port.append(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]
        return runner

    def run() -> None:
        asyncio.set_event_loop(loop)
        runner = loop.run_until_complete(serve())
        ready.set()
        loop.run_forever()
        loop.run_until_complete(runner.cleanup())

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert ready.wait(10)
    try:
        fake.webhook_url = f"http://127.0.0.1:{port[0]}/hook"
        event = fake.inject_message(USER, text="hello")
        wait_until(lambda: fake.acknowledged(event), "the third delivery acknowledged")
        assert len(seen) == 3 and len({b for b, _ in seen}) == 1
        body, signature = seen[0]
        assert signature == "sha256=" + hmac.new(APP_SECRET.encode(), body, hashlib.sha256).hexdigest()
        message = json.loads(body)["entry"][0]["changes"][0]["value"]["messages"][0]
        assert (message["from"], message["id"], message["text"]["body"]) == (USER, event, "hello")
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
