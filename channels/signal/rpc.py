"""signal-cli's JSON-RPC daemon over HTTP: calls (POST /api/v1/rpc) and events (GET /api/v1/events, SSE).

One aiohttp session per adapter (several accounts run side by side); every call names the account,
as signal-cli's multi-account daemon wants. Errors come back as signal-cli writes them
(SignalJsonRpcCommandHandler): -1 a user error, -3 an I/O error, -4 an untrusted identity, -5 rate
limited (the per-recipient `retryAfterSeconds` in `data.response.results`), -32602 an unknown account.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from dataclasses import dataclass
from typing import Any, AsyncIterator

import aiohttp

USER_ERROR, IO_ERROR, UNTRUSTED_KEY, RATE_LIMITED = -1, -3, -4, -5
INVALID_PARAMS, METHOD_NOT_FOUND = -32602, -32601
NETWORK = (aiohttp.ClientError, OSError)


@dataclass
class RpcError(Exception):
    """signal-cli answered the call with a JSON-RPC error."""

    code: int
    message: str
    data: Any = None

    def __str__(self) -> str:
        return f"{self.message} (signal-cli error {self.code})"

    def retry_after(self) -> float | None:
        """The longest `retryAfterSeconds` signal-cli reported for a rate-limited send, if any."""
        response = (self.data or {}).get("response") if isinstance(self.data, dict) else None
        waits = [r.get("retryAfterSeconds") for r in (response or {}).get("results") or [] if isinstance(r, dict)]
        waits = [float(w) for w in waits if isinstance(w, (int, float))]
        return max(waits) if waits else None

    def unknown_account(self) -> bool:
        return self.code == INVALID_PARAMS and "account" in self.message.lower()


class SentMaybe(Exception):
    """The request went out and no answer came back in time: signal-cli may have sent it."""


class SignalRpc:
    def __init__(self, url: str, account: str, *, timeout: float) -> None:
        self.url, self.account, self.timeout = url.rstrip("/"), account, timeout
        self._ids = itertools.count(1)
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            # trust_env off: a loopback daemon is never reached through a proxy from the environment
            # read_bufsize: one event is one SSE line, and a message with its quote and mentions can be long
            self._session = aiohttp.ClientSession(trust_env=False, read_bufsize=4 * 1024 * 1024)
        return self._session

    async def call(self, method: str, *, account: bool = True, timeout: float | None = None, **params: Any) -> Any:
        """One call; its result. Raises RpcError (signal-cli refused), SentMaybe (no answer after sending),
        or a network error (nothing reached signal-cli)."""
        body: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "id": next(self._ids)}
        if account and self.account:
            params = {**params, "account": self.account}
        if params:
            body["params"] = params
        limit = aiohttp.ClientTimeout(total=timeout or self.timeout)
        try:
            async with self._client().post(f"{self.url}/api/v1/rpc", json=body, timeout=limit) as resp:
                if resp.status != 200:
                    raise RpcError(resp.status, f"HTTP {resp.status} from {self.url}/api/v1/rpc")
                answer = await resp.json(content_type=None)
        except asyncio.TimeoutError:
            raise SentMaybe(f"signal-cli did not answer {method} within {timeout or self.timeout:g} s") from None
        error = answer.get("error") if isinstance(answer, dict) else None
        if error:
            raise RpcError(int(error.get("code", 0)), str(error.get("message") or ""), error.get("data"))
        return answer.get("result") if isinstance(answer, dict) else None

    async def events(self, *, silent_after: float) -> AsyncIterator[dict[str, Any]]:
        """signal-cli's `receive` events for the account, as they come; ends when the stream does or stays
        silent past `silent_after` (it writes a keep-alive every 15 s). Raises RpcError(400) for an
        account signal-cli does not have."""
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=self.timeout, sock_read=silent_after)
        async with self._client().get(f"{self.url}/api/v1/events", params={"account": self.account},
                                      timeout=timeout, headers={"Accept": "text/event-stream"}) as resp:
            if resp.status != 200:
                raise RpcError(resp.status, f"HTTP {resp.status} from {self.url}/api/v1/events")
            data: list[str] = []
            async for raw in resp.content:
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                if line.startswith("data:"):
                    data.append(line[5:].removeprefix(" "))
                elif not line and data:
                    try:
                        event = json.loads("\n".join(data))
                    except ValueError:
                        event = None
                    data = []
                    if isinstance(event, dict):
                        yield event
        # the stream ended: signal-cli stopped or dropped us

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
