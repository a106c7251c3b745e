"""Socket Mode: slack_sdk's aiohttp client, envelopes acknowledged only after they were handled.

The SDK reconnects by itself (a ``disconnect`` frame, a stale or dropped connection). Two things it
does not do are done here: its connect() retries a refused app token or a dead server forever,
so the first WebSocket URL is asked for here (a bad token is one error, not a loop), and the
connection is watched so a connection that stays lost is reported (``lost()``) instead of
retried silently.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Awaitable, Callable

from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse
from slack_sdk.web.async_client import AsyncWebClient

# (envelope type, payload, retry_attempt) -> the acknowledgement's payload (slash commands) or None.
# Raising means "not handled": the envelope is not acknowledged and Slack sends it again.
EnvelopeHandler = Callable[[str, dict[str, Any], int], Awaitable[dict[str, Any] | None]]


class _OneLine(logging.Filter):
    """slack_sdk logs every failed reconnect with a traceback; while Slack is unreachable that
    is the same traceback every few seconds. Keep the message (it names the error), drop the trace."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is not None:
            record.msg = f"{record.getMessage()} [{type(record.exc_info[1]).__name__}]"
            record.args = None
            record.exc_info = None
            record.exc_text = None
        return True


class SocketReceiver:
    """One Socket Mode connection (and its reconnections) feeding ``handler``."""

    def __init__(self, *, app_token: str, api_url: str, handler: EnvelopeHandler, log: logging.Logger,
                 ping_interval: float = 5.0, connect_timeout: float = 20.0) -> None:
        self._handler = handler
        self._log = log
        self._connect_timeout = connect_timeout
        web = AsyncWebClient(base_url=api_url, timeout=30,
                             retry_handlers=[AsyncRateLimitErrorRetryHandler(max_retry_count=2)])
        sdk_log = log.getChild("socket")
        if not any(isinstance(f, _OneLine) for f in sdk_log.filters):
            sdk_log.addFilter(_OneLine())
        self.client = SocketModeClient(app_token=app_token, web_client=web, ping_interval=ping_interval,
                                       logger=sdk_log)
        self.client.socket_mode_request_listeners.append(self._on_request)
        self._app_token = app_token

    async def connect(self) -> None:
        """Ask for the WebSocket URL (SlackApiError / aiohttp errors propagate), then open it."""
        opened = await self.client.web_client.apps_connections_open(app_token=self._app_token)
        self.client.wss_uri = opened["url"]
        try:
            await asyncio.wait_for(self.client.connect(), self._connect_timeout)
        except asyncio.TimeoutError:
            await self.close()
            raise ConnectionError("the Socket Mode WebSocket did not open") from None

    async def lost(self, after_seconds: float) -> None:
        """Return once the connection has been down for ``after_seconds`` (the SDK kept failing)."""
        down_since: float | None = None
        while True:
            await asyncio.sleep(1.0)
            if await self.client.is_connected():
                down_since = None
                continue
            now = time.monotonic()
            down_since = down_since or now
            if now - down_since >= after_seconds:
                return

    async def close(self) -> None:
        await self.client.close()

    async def _on_request(self, client: SocketModeClient, req: SocketModeRequest) -> None:
        try:
            payload = await self._handler(req.type, req.payload, req.retry_attempt or 0)
        except Exception:  # not acknowledged: Slack redelivers, the intake deduplicates
            self._log.exception("Slack %s envelope not handled; left for redelivery", req.type)
            return
        await client.send_socket_mode_response(SocketModeResponse(req.envelope_id, payload))
