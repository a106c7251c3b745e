"""The Cloud API's webhook listener: Meta's subscription check and its signed POSTs.

GET with `hub.mode=subscribe` and the right `hub.verify_token` is answered with `hub.challenge` (the
check Meta runs when the Callback URL is saved). Every POST carries `X-Hub-Signature-256: sha256=<hex>`,
the HMAC-SHA256 of the raw body with the app secret: compared in constant time, and a request without
the right one is answered 401 and never parsed (the log names the sender's address only, nothing of the
body). A signed POST is answered 200 only once the handler returned, i.e. once the kit made the
messages durable; one not done within `ack_seconds` is answered 503 so Meta delivers it again (its
webhooks are retried with backoff), and the intake drops the copy; the handling itself goes on.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
from typing import Any, Awaitable, Callable

from aiohttp import web

from clawgate.channels.listener import HttpListener

PayloadHandler = Callable[[dict[str, Any]], Awaitable[None]]
MAX_BODY = 3 * 1024 * 1024  # Meta batches at most 1,000 updates per POST; text only, media come by id


def signature_ok(secret: str, body: bytes, header: str | None) -> bool:
    """Whether `header` is `sha256=` + the HMAC-SHA256 of `body` with `secret` (constant-time compare)."""
    if not secret or not header or not header.startswith("sha256="):
        return False
    expected = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, header.removeprefix("sha256=").strip().lower())


class WebhookReceiver:
    """An aiohttp server on `host:port` answering Meta at `path`."""

    def __init__(self, *, app_secret: str, verify_token: str, host: str, port: int, path: str,
                 handler: PayloadHandler, log: logging.Logger, ack_seconds: float = 10.0) -> None:
        self._secret, self._verify = app_secret, verify_token
        self._host, self._path = host, path
        self._handler = handler
        self._log = log
        self._ack_seconds = ack_seconds
        self._listener: HttpListener | None = None
        self._pending: set[asyncio.Task[Any]] = set()
        self.port = port

    @property
    def url(self) -> str:
        return f"http://{self._host}:{self.port}{self._path}"

    async def start(self) -> None:
        app = web.Application(client_max_size=MAX_BODY)
        app.router.add_get(self._path, self._verify_subscription)
        app.router.add_post(self._path, self._deliver)
        listener = HttpListener(app, host=self._host, port=self.port)
        self.port = await listener.start()
        self._listener = listener

    async def close(self) -> None:
        if self._listener is not None:
            await self._listener.close()
            self._listener = None

    async def _verify_subscription(self, request: web.Request) -> web.Response:
        query = request.query
        token = query.get("hub.verify_token", "")
        if query.get("hub.mode") == "subscribe" and self._verify and hmac.compare_digest(token.encode(),
                                                                                          self._verify.encode()):
            self._log.info("WhatsApp webhook subscription verified")
            return web.Response(text=query.get("hub.challenge", ""))
        self._log.warning("WhatsApp webhook verification refused from %s: wrong hub.verify_token or hub.mode",
                          request.remote)
        return web.Response(status=403, text="verification failed")

    async def _deliver(self, request: web.Request) -> web.Response:
        try:
            body = await request.read()
        except web.HTTPRequestEntityTooLarge:
            return web.Response(status=413, text="too large")
        if not signature_ok(self._secret, body, request.headers.get("X-Hub-Signature-256")):
            self._log.warning("WhatsApp webhook refused: bad or missing X-Hub-Signature-256 from %s", request.remote)
            return web.Response(status=401, text="invalid signature")
        try:
            payload = json.loads(body)
        except ValueError:
            return web.Response(status=400, text="not JSON")
        if not isinstance(payload, dict) or payload.get("object") != "whatsapp_business_account":
            return web.Response(status=200)  # signed, but not a WhatsApp account's update: nothing to do
        task = asyncio.ensure_future(self._handler(payload))
        self._pending.add(task)
        task.add_done_callback(self._done)
        try:
            await asyncio.wait_for(asyncio.shield(task), self._ack_seconds)
        except asyncio.TimeoutError:
            return web.Response(status=503, text="busy, send again")
        except Exception:
            return web.Response(status=500, text="not handled")
        return web.Response(status=200)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._pending.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self._log.error("WhatsApp webhook not handled: %s", task.exception())
