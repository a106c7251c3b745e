"""The webhook server (aiohttp.web) refuses what Telegram would never send: a malformed request, a
body over the limit (declared or chunked), a wrong or missing secret, another path or method, and a
body that is not an update; each with its status and an empty body, and the handler never called."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest
from telegram import Bot

from clawgate.channels.telegram.webhook import MAX_BODY, WebhookServer, default_secret

SECRET = default_secret("1:T")
UPDATE = {"update_id": 9, "message": {"message_id": 1, "date": 0, "chat": {"id": 1, "type": "private"}, "text": "hi"}}


@pytest.fixture
async def served() -> AsyncIterator[tuple[WebhookServer, list[int]]]:
    handled: list[int] = []

    async def handle(update) -> None:  # type: ignore[no-untyped-def]
        handled.append(update.update_id)

    # read_seconds 5, not 30: a refused request's unread body is drained for at most that long (the
    # 413 declared on the header alone waits that out), and a 1 MiB body on loopback takes far less
    server = WebhookServer(Bot("1:T"), handle, host="127.0.0.1", port=0, path="/hook", secret=SECRET, read_seconds=5)
    await server.start()
    try:
        yield server, handled
    finally:
        await server.stop()


async def _raw(port: int, request: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        await writer.drain()
        return await asyncio.wait_for(reader.read(), 30)
    finally:
        writer.close()


async def test_a_malformed_request_is_answered_400(served: tuple[WebhookServer, list[int]]) -> None:
    server, handled = served
    for request in (b"THIS IS NOT HTTP\r\n\r\n", b"POST /hook HTTP/1.1\r\nHost: x\r\nContent-Length: nope\r\n\r\n"):
        answer = await _raw(server.port, request)  # aiohttp's parser answers these itself
        assert answer.split(b"\r\n", 1)[0].split(b" ")[1] == b"400", answer[:80]
    assert handled == []


async def test_oversized_bodies_are_refused_413_declared_or_chunked(served: tuple[WebhookServer, list[int]]) -> None:
    server, handled = served
    head = (f"POST /hook HTTP/1.1\r\nHost: x\r\nContent-Length: {MAX_BODY + 1}\r\n"
            f"X-Telegram-Bot-Api-Secret-Token: {SECRET}\r\n\r\n").encode()
    answer = await _raw(server.port, head)  # refused on the header alone: the body is never read
    assert answer.startswith(b"HTTP/1.1 413"), answer[:80]

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: the limit applies while reading
        for _ in range(MAX_BODY // 65536):
            yield b" " * 65536
        yield b" "  # one byte over: nothing is left unread that could reset the connection

    url = f"http://127.0.0.1:{server.port}/hook"
    async with httpx.AsyncClient(timeout=30) as client:
        response = await client.post(url, content=chunks(), headers={"X-Telegram-Bot-Api-Secret-Token": SECRET})
    assert response.status_code == 413 and response.content == b""
    assert handled == []


async def test_wrong_secret_path_method_and_body_each_get_their_status(
        served: tuple[WebhookServer, list[int]]) -> None:
    server, handled = served
    url = f"http://127.0.0.1:{server.port}/hook"
    good = {"X-Telegram-Bot-Api-Secret-Token": SECRET}
    async with httpx.AsyncClient(timeout=30) as client:
        wrong = await client.post(url, json=UPDATE, headers={"X-Telegram-Bot-Api-Secret-Token": SECRET[:-1] + "0"})
        assert wrong.status_code == 403 and wrong.content == b""
        assert (await client.post(url, json=UPDATE)).status_code == 403  # no header at all
        assert (await client.post(url + "/x", json=UPDATE, headers=good)).status_code == 404
        assert (await client.get(url, headers=good)).status_code == 405
        assert (await client.post(url, content=b"{not json", headers=good)).status_code == 400
        assert (await client.post(url, content=b"[1, 2]", headers=good)).status_code == 400
        assert (await client.post(url, json={"no": "update_id"}, headers=good)).status_code == 400
        assert handled == []
        accepted = await client.post(url, json=UPDATE, headers=good)
        assert accepted.status_code == 200 and accepted.headers.get("connection", "").lower() == "close"
        assert "server" not in accepted.headers and "server" not in wrong.headers  # no library or version named
    assert handled == [9]


async def test_a_client_too_slow_with_its_headers_or_body_is_cut_off() -> None:
    async def handle(update) -> None:  # type: ignore[no-untyped-def]
        raise AssertionError("a slow request reached the handler")

    server = WebhookServer(Bot("1:T"), handle, host="127.0.0.1", port=0, path="/hook", secret=SECRET, read_seconds=1)
    await server.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"POST /hook HTTP/1.1\r\nHost: x\r\n")  # and the rest never comes
        assert await asyncio.wait_for(reader.read(), 30) == b""  # closed by the server, no request
        writer.close()
        head = (f"POST /hook HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n"
                f"X-Telegram-Bot-Api-Secret-Token: {SECRET}\r\n\r\n" + "{" * 10).encode()
        answer = await _raw(server.port, head)  # 10 of the 100 bytes announced
        assert answer.startswith(b"HTTP/1.1 408"), answer[:80]
    finally:
        await server.stop()
