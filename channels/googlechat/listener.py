"""The Chat app's HTTP endpoint: Google POSTs each interaction event here with a bearer JWT.

A request whose bearer token does not verify (forged, expired, for another audience) is answered 401 and
never parsed; the log names the sender's address and why, nothing of the body or the token. A verified
event is answered once the handler returned, i.e. once the kit made it durable: `{}` (the reply goes out
later through the API) or a message for Chat to post (the answer to a button press). One not handled
within `ack_seconds` is answered 503, and the handling goes on (the kit drops a second copy). In a fleet
every process listens, on one host on the same port (`reuse_port`: the kernel spreads the connections).
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, Awaitable, Callable

from aiohttp import web

from clawgate.channels.googlechat.auth import BearerVerifier, Refused
from clawgate.channels.listener import HttpListener

EventHandler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
MAX_BODY = 1024 * 1024  # an event is text and ids; attachments come by reference


class EventListener:
    def __init__(self, *, host: str, port: int, path: str, verifier: BearerVerifier, handler: EventHandler,
                 log: logging.Logger, ack_seconds: float = 10.0, reuse_port: bool = False) -> None:
        self.host, self.port, self.path = host, port, path
        self._verifier = verifier
        self._handler = handler
        self._log = log
        self._ack_seconds = ack_seconds
        self._reuse_port = reuse_port
        self._listener: HttpListener | None = None
        self._pending: set[asyncio.Task[Any]] = set()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}{self.path}"

    async def start(self) -> None:
        app = web.Application(client_max_size=MAX_BODY)
        app.router.add_post(self.path, self._event)
        listener = HttpListener(app, host=self.host, port=self.port, reuse_port=self._reuse_port)
        self.port = await listener.start()
        self._listener = listener

    async def close(self) -> None:
        if self._listener is not None:
            await self._listener.close()
            self._listener = None

    async def _event(self, request: web.Request) -> web.Response:
        try:
            await self._verifier.verify(request.headers.get("Authorization"))
        except Refused as e:
            self._log.warning("Google Chat event refused from %s: %s", request.remote, e)
            return web.json_response({"error": "unauthorized"}, status=401)
        try:
            event = json.loads(await request.read())
        except web.HTTPRequestEntityTooLarge:
            return web.json_response({"error": "too large"}, status=413)
        except ValueError:
            return web.json_response({"error": "not JSON"}, status=400)
        if not isinstance(event, dict):
            return web.json_response({"error": "not an event"}, status=400)
        task = asyncio.ensure_future(self._handler(event))
        self._pending.add(task)
        task.add_done_callback(self._done)
        try:
            answer = await asyncio.wait_for(asyncio.shield(task), self._ack_seconds)
        except asyncio.TimeoutError:
            return web.json_response({"error": "busy, send again"}, status=503)
        except Exception:
            return web.json_response({"error": "not handled"}, status=500)
        return web.json_response(answer or {})

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._pending.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self._log.error("Google Chat event not handled: %s", task.exception())
