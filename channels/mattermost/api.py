"""Mattermost's REST API v4 and WebSocket event stream over aiohttp: one client per account.

Errors are Mattermost's JSON `{"id", "message", "status_code"}`; a 429 carries `Retry-After` (or
`X-Ratelimit-Reset`, seconds until the window resets). The WebSocket authenticates with an
`authentication_challenge` carrying the token (never a query parameter: URLs end up in proxy logs).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, AsyncIterator

import aiohttp

NETWORK = (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, OSError)


class ApiError(Exception):
    """A refused REST call: the HTTP status and Mattermost's error id and message."""

    def __init__(self, status: int, error_id: str, message: str, retry_after: float | None = None) -> None:
        super().__init__(f"HTTP {status} {error_id}: {message}".strip())
        self.status, self.error_id, self.message, self.retry_after = status, error_id, message, retry_after


class SentMaybe(Exception):
    """The request went out and no answer came back: it may have been applied."""


class StreamLost(Exception):
    """The WebSocket closed, went silent or refused the token."""

    def __init__(self, reason: str, *, auth: bool = False) -> None:
        super().__init__(reason)
        self.auth = auth


def _retry_after(headers: Any) -> float | None:
    for name in ("Retry-After", "X-Ratelimit-Reset"):
        value = headers.get(name)
        try:
            return max(float(value), 0.0) if value is not None else None
        except ValueError:
            continue
    return None


class MattermostApi:
    def __init__(self, base_url: str, token: str, *, timeout: float) -> None:
        self.base_url = base_url.rstrip("/")
        self._token = token
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(headers={"Authorization": f"Bearer {self._token}"})
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def call(self, method: str, path: str, *, body: Any = None, form: aiohttp.FormData | None = None,
                   params: dict[str, str] | None = None) -> Any:
        """One REST call; the decoded JSON answer. A timeout after a write raises SentMaybe."""
        url = f"{self.base_url}/api/v4{path}"
        try:
            async with self._client().request(method, url, json=body, data=form, params=params,
                                              timeout=self._timeout) as response:
                raw = await response.read()
                if response.status >= 400:
                    try:
                        error = json.loads(raw)
                    except ValueError:
                        error = {}
                    error = error if isinstance(error, dict) else {}
                    raise ApiError(response.status, str(error.get("id") or ""),
                                   str(error.get("message") or raw[:200].decode("utf-8", "replace")),
                                   _retry_after(response.headers))
                if response.content_type == "application/json":
                    return json.loads(raw) if raw else None
                return raw
        except asyncio.TimeoutError:
            if method == "GET":
                raise aiohttp.ServerTimeoutError(f"no answer to GET {path}") from None
            raise SentMaybe(f"no answer to {method} {path}") from None

    async def events(self, *, heartbeat: float) -> AsyncIterator[dict[str, Any]]:
        """The WebSocket's events, from `hello` on, until it closes (StreamLost)."""
        ws_url = "ws" + self.base_url.removeprefix("http") + "/api/v4/websocket"
        async with self._client().ws_connect(ws_url, heartbeat=heartbeat, autoping=True) as ws:
            await ws.send_json({"seq": 1, "action": "authentication_challenge", "data": {"token": self._token}})
            async for frame in ws:
                if frame.type != aiohttp.WSMsgType.TEXT:
                    break
                try:
                    event = json.loads(frame.data)
                except ValueError:
                    continue
                if not isinstance(event, dict):
                    continue
                if event.get("seq_reply") == 1 and event.get("status") != "OK":
                    raise StreamLost("the WebSocket refused the token", auth=True)
                if "event" in event:
                    yield event
            code = ws.close_code
        raise StreamLost(f"the WebSocket closed (code {code})", auth=code == 4001)
