"""A small gateway client for the CLI (`clawgate chat`, `clawgate status`) and for tests."""

from __future__ import annotations

import itertools
import json
from typing import TYPE_CHECKING, Any, AsyncIterator

if TYPE_CHECKING:  # the client side of websockets (and its proxy support) is imported on connect:
    from websockets.asyncio.client import ClientConnection  # the daemon imports this module, never connects


def gateway_url(settings: Any) -> str:
    """Where local clients reach the daemon: a wildcard bind is reached on loopback."""
    host = settings.gateway.host
    host = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    return f"ws://{host}:{settings.gateway.port}"


# The events a client that only shows replies needs (connect `events`, docs/protocol.md).
CHAT_ONLY = ["chat"]


class GatewayError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class GatewayClient:
    def __init__(self, url: str, token: str | None, *, subscribe: list[str] | str | None = None,
                 events: list[str] | None = None, open_timeout: float = 10.0,
                 resume: dict[str, int] | None = None) -> None:
        """`open_timeout`: how long the WebSocket handshake may take (a refused connection fails at once).
        `resume`: session -> number of the last reply seen; the replies after it are sent again."""
        self.open_timeout = open_timeout
        self.url = url
        self.token = token
        self.subscribe = subscribe
        self.resume = resume
        self.wanted = events  # event names to receive (None: all), e.g. ["chat"] for a plain chat client
        self.ws: ClientConnection | None = None
        self.hello: dict[str, Any] = {}
        self._ids = itertools.count(1)
        self._events: list[dict[str, Any]] = []

    async def __aenter__(self) -> "GatewayClient":
        from websockets.asyncio.client import connect

        self.ws = await connect(self.url, max_size=16 * 1024 * 1024, open_timeout=self.open_timeout)
        params: dict[str, Any] = {"auth": {"token": self.token or ""}, "client": {"name": "clawgate-cli"}}
        if self.subscribe:
            params["subscribe"] = self.subscribe
        if self.wanted is not None:
            params["events"] = self.wanted
        if self.resume:
            params["resume"] = self.resume
        self.hello = await self.request("connect", params)
        return self

    async def __aexit__(self, *exc: Any) -> None:
        if self.ws:
            await self.ws.close()

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        assert self.ws is not None
        rid = f"r{next(self._ids)}"
        await self.ws.send(json.dumps({"type": "req", "id": rid, "method": method, "params": params or {}}))
        while True:
            frame = json.loads(await self.ws.recv())
            if frame.get("type") == "event":
                self._events.append(frame)
                continue
            if frame.get("id") != rid:
                continue
            if frame.get("ok"):
                return frame.get("payload") or {}
            error = frame.get("error") or {}
            raise GatewayError(error.get("code", "error"), error.get("message", ""))

    def take_events(self) -> list[dict[str, Any]]:
        """The events that arrived while a request waited for its response, handed over once (a
        reader that takes over the socket, gateway/live_client.py, shows them first)."""
        taken, self._events = self._events, []
        return taken

    async def events(self) -> AsyncIterator[dict[str, Any]]:
        assert self.ws is not None
        while self._events:
            yield self._events.pop(0)
        async for raw in self.ws:
            frame = json.loads(raw)
            if frame.get("type") == "event":
                yield frame

    async def chat(self, text: str, session: str = "main", on_delta=None, *, agent: str | None = None) -> dict[str, Any]:
        """Send and wait for the final (or error) chat event of this run. A chat command (`/status`) is
        answered at once: its `chat` event has kind "command" (docs/protocol.md). `agent`: whose session
        (default: the default agent's)."""
        ack = await self.request("chat.send", {"session": session, "text": text, **({"agent": agent} if agent else {})})
        run_id = ack["runId"]
        if ack.get("status") == "command" and self.wanted is not None and "chat" not in self.wanted:
            return {"session": session, "runId": run_id, "state": "final", "kind": "command",
                    "command": ack.get("command"), "text": ack.get("text", "")}
        async for frame in self.events():
            payload = frame["payload"]
            if frame["event"] != "chat" or payload.get("runId") != run_id or payload.get("kind") == "file":
                continue  # a file's line (files reach chat platforms only) is not the run's answer
            if payload["state"] == "delta":
                if on_delta:
                    on_delta(payload["text"])
                continue
            return payload
        raise GatewayError("closed", "the gateway closed the connection before answering")
