"""The Events API over HTTP: Slack POSTs events, button presses and slash commands to a URL.

For those who give Slack a public Request URL instead of running Socket Mode. Every request's
v0 signature is checked with slack_sdk's SignatureVerifier (HMAC of the raw body with the signing
secret, timestamp within five minutes, so a replayed request is refused too); anything else gets
401 and is never parsed. Slack waits 3 seconds for the answer: a request whose handling is not
done (durable) by then is answered 503 so Slack sends it again later, and the intake drops the
copy; the handling itself goes on.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any
from urllib.parse import parse_qs

from aiohttp import web
from slack_sdk.signature import SignatureVerifier

from clawgate.channels.listener import HttpListener
from clawgate.channels.slack.socket import EnvelopeHandler


class HttpReceiver:
    """An aiohttp server on ``host:port`` answering Slack at ``path``."""

    def __init__(self, *, signing_secret: str, host: str, port: int, path: str, handler: EnvelopeHandler,
                 log: logging.Logger, ack_seconds: float = 2.5) -> None:
        self._verifier = SignatureVerifier(signing_secret=signing_secret)
        self._host, self._port, self._path = host, port, path
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
        app = web.Application(client_max_size=1024 * 1024)
        app.router.add_post(self._path, self._handle)
        listener = HttpListener(app, host=self._host, port=self._port)
        self.port = await listener.start()
        self._listener = listener

    async def close(self) -> None:
        if self._listener is not None:
            await self._listener.close()
            self._listener = None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        if not self._verifier.is_valid_request(body, dict(request.headers)):
            self._log.warning("Slack HTTP request refused: bad or missing signature from %s", request.remote)
            return web.Response(status=401, text="invalid signature")
        parsed = self._parse(request.content_type, body)
        if parsed is None:
            return web.Response(status=400, text="unreadable request")
        kind, payload = parsed
        if kind == "url_verification":
            return web.json_response({"challenge": payload.get("challenge", "")})
        try:
            retry = int(request.headers.get("X-Slack-Retry-Num", "0"))
        except ValueError:
            retry = 0
        task = asyncio.ensure_future(self._handler(kind, payload, retry))
        self._pending.add(task)
        task.add_done_callback(self._done)
        try:
            answer = await asyncio.wait_for(asyncio.shield(task), self._ack_seconds)
        except asyncio.TimeoutError:
            return web.Response(status=503, text="busy, send again")
        except Exception:
            return web.Response(status=500, text="not handled")
        if answer:
            return web.json_response(answer)
        return web.Response(status=200)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._pending.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self._log.error("Slack HTTP request not handled: %s", task.exception())

    @staticmethod
    def _parse(content_type: str, body: bytes) -> tuple[str, dict[str, Any]] | None:
        """(kind, payload): events as JSON; button presses and slash commands as forms."""
        try:
            if content_type == "application/json":
                data = json.loads(body)
                if not isinstance(data, dict):
                    return None
                if data.get("type") == "url_verification":
                    return "url_verification", data
                return "events_api", data
            form = {k: v[0] for k, v in parse_qs(body.decode(), keep_blank_values=True).items()}
        except (ValueError, UnicodeDecodeError):
            return None
        if "payload" in form:
            try:
                data = json.loads(form["payload"])
            except ValueError:
                return None
            return ("interactive", data) if isinstance(data, dict) else None
        if "command" in form:
            return "slash_commands", form
        return None
