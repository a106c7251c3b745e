"""Webhook mode: Telegram POSTs each update to us instead of us polling for it.

The same guarantee as polling: an update is answered 200 only after the handler returned, i.e.
the message is committed to the inbox (or otherwise fully decided). If storing fails, or the
process dies first, Telegram gets no 200 and delivers the update again; the inbox's id check
answers a redelivery once. Updates are handled one at a time, in arrival order.

A deliberately small HTTP/1.1 server on asyncio (one request per connection): it serves one
path, checks Telegram's secret-token header, and needs no extra dependency. TLS is the reverse
proxy's job (Telegram only calls https URLs).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import sqlite3
from typing import Awaitable, Callable

from telegram import Bot, Update

log = logging.getLogger("clawgate.telegram")
MAX_BODY = 1024 * 1024
READ_SECONDS = 30.0
REASONS = {200: "OK", 400: "Bad Request", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed",
           408: "Request Timeout", 413: "Payload Too Large", 503: "Service Unavailable"}


def default_secret(token: str) -> str:
    """Stable across restarts without storing anything, and useless to anyone without the bot token."""
    return hashlib.sha256(f"clawgate-webhook:{token}".encode()).hexdigest()[:48]


class WebhookServer:
    def __init__(self, bot: Bot, handle: Callable[[Update], Awaitable[None]], *, host: str, port: int, path: str,
                 secret: str) -> None:
        self.bot, self.handle = bot, handle
        self.host, self.path, self.secret = host, path or "/", secret
        self._want_port = port
        self._server: asyncio.Server | None = None
        self._order = asyncio.Lock()

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._client, self.host, self._want_port)
        log.info("webhook listening on %s:%d%s", self.host, self.port, self.path)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            status = await asyncio.wait_for(self._request(reader), READ_SECONDS)
        except asyncio.TimeoutError:
            status = 408
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            status = 400
        try:
            writer.write(f"HTTP/1.1 {status} {REASONS.get(status, 'Error')}\r\nContent-Length: 0\r\n"
                         "Connection: close\r\n\r\n".encode())
            await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    async def _request(self, reader: asyncio.StreamReader) -> int:
        method, target, _ = (await reader.readline()).decode("latin-1").split(" ", 2)
        headers: dict[str, str] = {}
        for _ in range(100):
            line = (await reader.readline()).decode("latin-1").strip()
            if not line:
                break
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length") or 0)
        if length > MAX_BODY:
            return 413
        body = await reader.readexactly(length) if length else b""
        if target.split("?", 1)[0] != self.path:
            return 404
        if method != "POST":
            return 405
        if not hmac.compare_digest(headers.get("x-telegram-bot-api-secret-token", "").encode(), self.secret.encode()):
            log.warning("webhook request without the right secret token refused")
            return 403
        try:
            update = Update.de_json(json.loads(body), self.bot)
        except (ValueError, TypeError, KeyError):
            return 400
        async with self._order:
            try:
                await self.handle(update)
            except sqlite3.Error as exc:
                log.error("could not store update %d (%s); answering 503 so Telegram delivers it again",
                          update.update_id, exc)
                return 503
            except Exception as exc:
                log.exception("update %d could not be handled (%s); skipped", update.update_id, exc)
        return 200
