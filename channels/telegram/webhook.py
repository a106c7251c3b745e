"""Webhook mode: Telegram POSTs each update to us instead of us polling for it.

The same guarantee as polling: an update is answered 200 only after the handler returned, i.e.
the message is committed to the inbox (or otherwise fully decided). If storing fails, or the
process dies first, Telegram gets no 200 and delivers the update again; the inbox's id check
answers a redelivery once. Updates are handled one at a time, in arrival order.

Served by aiohttp.web (already a dependency: the model SDK's transport), which parses HTTP and
refuses malformed requests (400) itself. This module only decides: one path, POST only, Telegram's
secret-token header compared in constant time, a 1 MiB body limit, read deadlines for the
headers and the body, and one
request per connection. Every refusal is a bare status with an empty body. TLS is the reverse
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

from aiohttp import web
from telegram import Bot, Update

from clawgate.channels.listener import READ_SECONDS, HttpListener

log = logging.getLogger("clawgate.telegram")
MAX_BODY = 1024 * 1024
SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"


def default_secret(token: str) -> str:
    """Stable across restarts without storing anything, and useless to anyone without the bot token."""
    return hashlib.sha256(f"clawgate-webhook:{token}".encode()).hexdigest()[:48]


class WebhookServer:
    def __init__(self, bot: Bot, handle: Callable[[Update], Awaitable[None]], *, host: str, port: int, path: str,
                 secret: str, read_seconds: float = READ_SECONDS) -> None:
        self.bot, self.handle = bot, handle
        self.read_seconds = read_seconds
        self.host, self.path, self.secret = host, path or "/", secret
        self._order = asyncio.Lock()
        # One catch-all route, so the checks below run in a fixed order for every path and method.
        app = web.Application(client_max_size=MAX_BODY)
        app.router.add_route("*", "/{tail:.*}", self._serve)
        self._listener = HttpListener(app, host=host, port=port, read_seconds=read_seconds)

    @property
    def port(self) -> int:
        return self._listener.port

    async def start(self) -> None:
        await self._listener.start()
        log.info("webhook listening on %s:%d%s", self.host, self.port, self.path)

    async def stop(self) -> None:
        await self._listener.close()

    async def _serve(self, request: web.Request) -> web.Response:
        status = await self._decide(request)
        response = web.Response(status=status)
        response.force_close()  # one request per connection, as Telegram sends them
        return response

    async def _decide(self, request: web.Request) -> int:
        if (request.content_length or 0) > MAX_BODY:
            return 413
        if request.path != self.path:
            return 404
        if request.method != "POST":
            return 405
        if not hmac.compare_digest(request.headers.get(SECRET_HEADER, "").encode(), self.secret.encode()):
            log.warning("webhook request without the right secret token refused")
            return 403
        try:
            body = await asyncio.wait_for(request.read(), self.read_seconds)
        except asyncio.TimeoutError:
            return 408
        except web.HTTPRequestEntityTooLarge:  # a chunked body that grew past the limit
            return 413
        try:
            update = Update.de_json(json.loads(body), self.bot)
        except (ValueError, TypeError, KeyError, AttributeError):
            return 400
        if update is None:
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
