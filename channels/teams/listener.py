"""The messaging endpoint: the aiohttp server the Bot Connector POSTs activities to.

A POST counts only with a bearer token that verifies (auth.InboundAuth) for the activity's own
serviceUrl: anything else is answered 401, and the log names only the caller's address and why (never
the body or the token). A verified activity is answered 200 only once the handler returned, i.e. once
the kit made it durable; one not done within `ack_seconds` is answered 503 so the Connector sends it
again, and the intake drops the copy; the handling itself goes on. In a fleet every process listens,
on one host on the same port (`reuse_port`: the kernel spreads the connections over them).
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, Awaitable, Callable

from aiohttp import web
from microsoft_agents.activity import Activity
from pydantic import ValidationError

from clawgate.channels.listener import HttpListener
from clawgate.channels.teams.auth import NETWORK, InboundAuth, Refused, ServiceError

Handler = Callable[[Activity, dict[str, Any]], Awaitable[None]]
MAX_BODY = 1024 * 1024  # an activity is text and references; Teams' own limit is about 100 KB


class ActivityListener:
    def __init__(self, *, host: str, port: int, path: str, auth: InboundAuth, handler: Handler,
                 log: logging.Logger, ack_seconds: float = 10.0, reuse_port: bool = False) -> None:
        self._host, self._path = host, path
        self._auth = auth
        self._handler = handler
        self._log = log
        self._ack_seconds = ack_seconds
        self._reuse_port = reuse_port
        self._listener: HttpListener | None = None
        self._pending: set[asyncio.Task[Any]] = set()
        self.port = port

    @property
    def url(self) -> str:
        return f"http://{self._host}:{self.port}{self._path}"

    async def start(self) -> None:
        app = web.Application(client_max_size=MAX_BODY)
        app.router.add_post(self._path, self._activity)
        self._listener = HttpListener(app, host=self._host, port=self.port, reuse_port=self._reuse_port)
        self.port = await self._listener.start()

    async def close(self) -> None:
        if self._listener is not None:
            await self._listener.close()
            self._listener = None

    async def _activity(self, request: web.Request) -> web.Response:
        try:
            body = await request.read()
        except web.HTTPRequestEntityTooLarge:
            return web.Response(status=413, text="too large")
        try:
            payload = json.loads(body)
        except ValueError:
            payload = None
        service_url = str(payload.get("serviceUrl") or "") if isinstance(payload, dict) else ""
        channel_id = str(payload.get("channelId") or "") if isinstance(payload, dict) else ""
        try:
            claims = await self._auth.verify(request.headers.get("Authorization"), service_url, channel_id)
        except Refused as why:
            self._log.warning("Teams activity refused from %s: %s", request.remote, why)
            return web.json_response({"error": "Unauthorized"}, status=401)
        except (ServiceError, *NETWORK) as e:
            self._log.warning("Teams activity not checked: the signing keys cannot be fetched (%s)",
                              e or type(e).__name__)
            return web.json_response({"error": "signing keys unavailable"}, status=503)
        try:
            activity = Activity.model_validate(payload)
        except ValidationError:
            return web.json_response({"error": "not an activity"}, status=400)
        task = asyncio.ensure_future(self._handler(activity, claims))
        self._pending.add(task)
        task.add_done_callback(self._done)
        try:
            await asyncio.wait_for(asyncio.shield(task), self._ack_seconds)
        except asyncio.TimeoutError:
            return web.json_response({"error": "busy, send again"}, status=503)
        except Exception:
            return web.json_response({"error": "not handled"}, status=500)
        return web.Response(status=200)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._pending.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self._log.error("Teams activity not handled: %s", task.exception())
