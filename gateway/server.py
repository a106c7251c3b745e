"""The WebSocket server: authentication, framing, method calls and event routing."""

from __future__ import annotations

import asyncio
import hmac
import logging
from typing import Any

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from agent.events import Event
from config.schema import GatewaySettings

from . import __version__, protocol
from .connection import Connection
from .methods import MethodError, MethodTable

log = logging.getLogger(__name__)
EVENTS = ["chat", "agent", "approval", "task", "heartbeat", "cron", "drift", "reflection", "reflection_plan",
          "reflection_exec", "tick"]
AGENT_STREAMS = {"tool_start", "tool_end", "turn_end", "run_end"}
CONNECT_TIMEOUT = 10.0


class GatewayServer:
    def __init__(self, settings: GatewaySettings, methods: MethodTable) -> None:
        self.settings = settings
        self.methods = methods
        self.connections: set[Connection] = set()
        # session -> connections watching it, so an event costs O(watchers), not O(clients).
        self._watchers: dict[str, set[Connection]] = {}
        self._watch_all: set[Connection] = set()
        self._server: Server | None = None
        self._tick: asyncio.Task[None] | None = None

    @property
    def port(self) -> int:
        assert self._server is not None
        return self._server.sockets[0].getsockname()[1]

    async def start(self) -> None:
        self._server = await serve(
            self._serve, self.settings.host, self.settings.port,
            max_size=self.settings.max_frame_bytes, ping_interval=20, ping_timeout=20,
            max_queue=64, write_limit=256 * 1024,
            # Browsers always send Origin and any page may try ws://127.0.0.1; other clients send none.
            origins=[None, *self.settings.allowed_origins],
        )
        self._tick = asyncio.create_task(self._ticker())

    async def stop(self) -> None:
        if self._tick:
            self._tick.cancel()
        if self._server:
            self._server.close(close_connections=True)
            await self._server.wait_closed()

    # events ------------------------------------------------------------------
    def broadcast(self, name: str, payload: dict[str, Any], session: str | None = None) -> int:
        if session is None:
            targets = list(self.connections)
        else:
            targets = list(self._watch_all | self._watchers.get(session, set()))
        for conn in targets:
            conn.event(name, payload)
        return len(targets)

    def on_event(self, event: Event) -> None:
        """Hub subscriber: translate run events into protocol events."""
        kind, session = event["type"], event.get("session")
        if kind == "text_delta":
            self.broadcast("chat", {"session": session, "runId": event["run_id"], "state": "delta", "text": event["text"]}, session)
        elif kind in AGENT_STREAMS:
            payload = {k: v for k, v in event.items() if k not in ("type", "run_id")}
            payload.update(stream=kind, runId=event.get("run_id"))
            self.broadcast("agent", payload, session)
        elif kind == "approval_request":
            self.broadcast("approval", {"state": "requested", **event["request"]}, session)
        elif kind == "approval_result":
            self.broadcast("approval", {"state": "resolved", "session": session, "id": event["id"],
                                        "approved": event["approved"], "how": event["how"]}, session)
        elif kind in ("task", "heartbeat", "cron", "drift", "reflection", "reflection_plan", "reflection_exec"):
            self.broadcast(kind, {k: v for k, v in event.items() if k != "type"}, session)

    async def _ticker(self) -> None:
        while True:
            await asyncio.sleep(30)
            self.broadcast("tick", {"ts": asyncio.get_running_loop().time()})

    # one client --------------------------------------------------------------
    async def _serve(self, ws: ServerConnection) -> None:
        conn = await self._authenticate(ws)
        if conn is None:
            return
        writer = asyncio.create_task(conn.write_loop())
        self.connections.add(conn)
        if conn.all_sessions:
            self._watch_all.add(conn)
        try:
            async for data in ws:
                frame = await self._dispatch(conn, data)
                if frame is not None:
                    conn.send(frame)
        except ConnectionClosed:
            pass
        finally:
            self.connections.discard(conn)
            self._watch_all.discard(conn)
            conn.unsubscribe_all()
            writer.cancel()

    async def _dispatch(self, conn: Connection, data: str | bytes) -> str | None:
        try:
            request = protocol.parse_request(data)
        except protocol.ProtocolError as exc:
            return protocol.response_error(exc.request_id, exc.code, exc.message)
        if request.method == "connect":
            return protocol.response_error(request.id, protocol.INVALID_FRAME, "already connected; connect is only the first frame")
        try:
            return protocol.response_ok(request.id, await self.methods.call(conn, request))
        except MethodError as exc:
            return protocol.response_error(request.id, exc.code, exc.message)
        except Exception as exc:
            log.exception("method %s failed", request.method)
            return protocol.response_error(request.id, protocol.INTERNAL, f"{request.method} failed: {type(exc).__name__}")

    async def _authenticate(self, ws: ServerConnection) -> Connection | None:
        try:
            first = await asyncio.wait_for(ws.recv(), CONNECT_TIMEOUT)
        except asyncio.TimeoutError:
            await ws.close(1008, "no connect request within 10 s")
            return None
        except ConnectionClosed:
            return None
        try:
            request = protocol.parse_request(first)
        except protocol.ProtocolError:
            request = None
        if request is None or request.method != "connect":
            await ws.close(1008, "the first frame must be a connect request")
            return None
        auth = request.params.get("auth")
        token = auth.get("token") if isinstance(auth, dict) else None
        expected = self.settings.token
        # No configured token never means "open": the daemon always sets one (config or state file).
        if not expected or not (isinstance(token, str) and hmac.compare_digest(token.encode(), expected.encode())):
            # (a close reason is at most 123 bytes)
            await ws.close(1008, "unauthorized: wrong gateway token; use gateway.token from config.toml, "
                                 "or if unset $CLAWGATE_HOME/state/gateway.token")
            return None
        conn = Connection(ws, self.settings.send_queue, self._watchers)
        conn.client = request.params.get("client") if isinstance(request.params.get("client"), dict) else {}
        subscribe = request.params.get("subscribe")
        if subscribe == "*" or (isinstance(subscribe, list) and "*" in subscribe):
            conn.all_sessions = True
        elif isinstance(subscribe, list):
            for session in subscribe:
                if isinstance(session, str):
                    conn.subscribe(session)
        await ws.send(protocol.response_ok(request.id, {
            "protocol": protocol.PROTOCOL_VERSION,
            "server": {"name": "clawgate", "version": __version__},
            "methods": self.methods.describe(),
            "events": EVENTS,
        }))
        return conn
