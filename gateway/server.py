"""The WebSocket server: authentication, framing, method calls and event routing."""

from __future__ import annotations

import asyncio
import hmac
import logging
import time
from http import HTTPStatus
from typing import Any, Callable, Protocol, cast

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from clawgate.agent.core.events import Event
from clawgate.config.schema import GatewaySettings

from . import __version__, protocol
from .connection import Connection
from .methods import MethodError, MethodTable
from .web import StaticSite, page_origins, page_url

log = logging.getLogger(__name__)
EVENTS = ["chat", "agent", "approval", "task", "heartbeat", "cron", "drift", "reflection", "reflection_plan",
          "reflection_exec", "checkpoint", "breaker_open", "breaker_close", "bg_job_start", "bg_job_end", "tick",
          "link"]  # link: a pairing's QR codes, to the client that asked only (gateway/device_links.py)
# checkpoint service events -> the `checkpoint` event's action (docs/checkpoints.md)
CHECKPOINT_ACTIONS = {"checkpoint": "created", "checkpoint_restored": "restored", "checkpoint_forked": "forked"}
# replay: docs/checkpoints.md; subagent_start / subagent_end: docs/subagents.md
AGENT_STREAMS = {"tool_start", "tool_end", "turn_end", "run_end", "replay", "subagent_start", "subagent_end"}
CONNECT_TIMEOUT = 10.0


class Admission:
    """Connections accepted but not yet through `connect`, at most `limit` at once.

    Counted from the TCP accept (a socket that never sends a byte holds a descriptor too) until
    `connect` succeeds or the socket closes. One over the limit is answered at once with an HTTP
    503 naming the reason and closed, before its handshake is even read: a flood of idle sockets
    costs the daemon at most `limit` descriptors for at most the handshake and connect timeouts.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.waiting: set[ServerConnection] = set()
        self.refused = 0

    def arrived(self, conn: ServerConnection) -> bool:
        if len(self.waiting) >= self.limit:
            self.refused += 1
            if self.refused == 1 or self.refused % 1000 == 0:  # a flood must not flood the log too
                log.warning("gateway: refused a connection: %d are already waiting to authenticate "
                            "(gateway.max_unauthenticated); %d refused so far", self.limit, self.refused)
            return False
        self.waiting.add(conn)
        return True

    def done(self, conn: ServerConnection) -> None:
        self.waiting.discard(conn)

    def refusal(self) -> bytes:
        body = (f"too many connections waiting to authenticate (at most {self.limit}, "
                "gateway.max_unauthenticated); try again shortly\n").encode()
        return (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
                b"Content-Length: " + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body)


METHOD_NOT_ALLOWED = (b"HTTP/1.1 405 Method Not Allowed\r\nAllow: GET\r\nContent-Type: text/plain; charset=utf-8\r\n"
                      b"Content-Length: 25\r\nConnection: close\r\n\r\nonly GET is served here.\n")


def _method_of(first_bytes: bytes) -> bytes | None:
    """The HTTP method a request starts with, when the first bytes show one (a token of capitals)."""
    token, space, _ = first_bytes[:16].partition(b" ")
    return token if space and token.isalpha() and token.isupper() else None


class QuietHandshakeFailures(logging.Filter):
    """websockets logs a handshake that never completed (a port scan, a client that hung up, a request that is
    not HTTP) as an error with its traceback, and how depends on its version (one channel's SDK holds it below
    16). Such a socket is no fault of the daemon: one debug line naming the cause, never a traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg != "opening handshake failed" or not record.exc_info:
            return True
        exc = record.exc_info[1]
        cause = f"{exc}" + (f" ({exc.__cause__})" if exc is not None and exc.__cause__ else "")
        record.msg, record.args = "gateway: a connection ended before its handshake: %s", (cause,)
        record.exc_info, record.exc_text = None, None
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)


def _admitted_connections(admission: Admission) -> type[ServerConnection]:
    """websockets' connection class, counted by `admission` from the moment the socket is accepted."""

    class AdmittedConnection(ServerConnection):
        _first_data = True

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)
            if not admission.arrived(self):
                # A TCP transport, whichever loop made it (uvloop's is not an asyncio.WriteTransport subclass).
                writer = cast(asyncio.WriteTransport, transport)
                writer.write(admission.refusal())
                writer.close()  # the handshake then ends at once (websockets sees the socket closed)

        def data_received(self, data: bytes) -> None:
            """A request that is not a GET is answered 405 here, whichever websockets version is installed
            (before 16 it closed such a socket without an answer)."""
            if self._first_data:
                self._first_data = False
                method = _method_of(data)
                if method is not None and method != b"GET":
                    writer = cast(asyncio.WriteTransport, self.transport)
                    writer.write(METHOD_NOT_ALLOWED)
                    writer.close()
                    return
            super().data_received(data)

        def connection_lost(self, exc: Exception | None) -> None:
            admission.done(self)
            super().connection_lost(exc)

    return AdmittedConnection


class ChatBacklog(Protocol):
    """The gateway chat channel's numbered replies (channels/gateway_chat.py), for catching a client up."""

    def catch_up(self, session: str, since: int | None, deliver: Callable[[dict[str, Any]], bool]) -> int: ...

    def waiting_sessions(self) -> list[str]: ...

    def last_seq(self, session: str) -> int: ...


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
        self.admission = Admission(settings.max_unauthenticated)
        self._site = StaticSite()
        self._origins: set[str] = set(settings.allowed_origins)
        self.backlog: ChatBacklog | None = None  # set by the daemon once the chat channel exists

    @property
    def port(self) -> int:
        assert self._server is not None
        return self._server.sockets[0].getsockname()[1]

    async def start(self) -> None:
        handshakes = logging.getLogger("websockets.server")
        if not any(isinstance(f, QuietHandshakeFailures) for f in handshakes.filters):
            handshakes.addFilter(QuietHandshakeFailures())
        self._server = await serve(
            self._serve, self.settings.host, self.settings.port,
            max_size=self.settings.max_frame_bytes,
            ping_interval=self.settings.ping_seconds, ping_timeout=self.settings.ping_seconds,
            max_queue=64, write_limit=256 * 1024, process_request=self._process_request,
            create_connection=_admitted_connections(self.admission),
            # Frames are small JSON (a text delta, a tool step): deflating each cost more CPU than the
            # bytes it saved, and kept a compression context (~100 KB) per client.
            compression=None,
        )
        # The control page served here may connect back (its origin is known once the port is).
        self._origins = set(self.settings.allowed_origins) | page_origins(self.settings.host, self.port)
        log.info("control page on %s", page_url(self.settings.host, self.port))
        self._tick = asyncio.create_task(self._ticker())

    async def stop(self) -> None:
        if self._tick:
            self._tick.cancel()
        if self._server:
            self._server.close(close_connections=True)
            await self._server.wait_closed()

    def _process_request(self, ws: ServerConnection, request: Request) -> Response | None:
        """Plain GETs get the control page; upgrades go on to the handshake if their origin may.

        Browsers always send Origin and any page may try ws://127.0.0.1; other clients send none.
        So a handshake with an Origin is refused unless it is the page's own or listed in
        gateway.allowed_origins."""
        if request.headers.get("Upgrade", "").lower() != "websocket":
            return self._site.answer(request)
        origin = request.headers.get("Origin")
        if origin is not None and origin not in self._origins:
            return self._site.error(HTTPStatus.FORBIDDEN, "origin not allowed: add it to gateway.allowed_origins\n")
        return None

    # events ------------------------------------------------------------------
    def broadcast(self, name: str, payload: dict[str, Any], session: str | None = None) -> int:
        """Send an event to the clients watching `session` (all with None); how many took it."""
        if session is None:
            targets = list(self.connections)
        else:
            targets = list(self._watch_all | self._watchers.get(session, set()))
        return sum(conn.event(name, payload) for conn in targets)

    def _catch_up(self, conn: Connection, session: str) -> None:
        """Hand a client the replies of `session` it missed: after its `resume` number, else the undelivered."""
        if self.backlog is not None:
            self.backlog.catch_up(session, conn.resume.pop(session, None), lambda payload: conn.event("chat", payload))

    def last_chat_seq(self, session: str) -> int:
        return self.backlog.last_seq(session) if self.backlog is not None else 0

    def on_event(self, event: Event) -> None:
        """Hub subscriber: translate run events into protocol events."""
        kind, session = event["type"], event.get("session")
        if kind == "text_delta":
            self.broadcast("chat", {"session": session, "runId": event["run_id"], "state": "delta", "text": event["text"]}, session)
        elif kind == "text_restart":  # the streamed text so far is not the answer: a retry starts it again
            self.broadcast("chat", {"session": session, "runId": event["run_id"], "state": "delta", "text": "",
                                    "restart": True}, session)
        elif kind in AGENT_STREAMS:
            payload = {k: v for k, v in event.items() if k not in ("type", "run_id")}
            payload.update(stream=kind, runId=event.get("run_id"))
            self.broadcast("agent", payload, session)
        elif kind == "approval_request":
            self.broadcast("approval", {"state": "requested", **event["request"]}, session)
        elif kind == "approval_result":
            self.broadcast("approval", {"state": "resolved", "session": session, "id": event["id"],
                                        "approved": event["approved"], "how": event["how"]}, session)
        elif kind in ("task", "heartbeat", "cron", "drift", "reflection", "reflection_plan", "reflection_exec",
                      "breaker_open", "breaker_close",  # no session: every client hears them
                      "bg_job_start", "bg_job_end"):
            self.broadcast(kind, {k: v for k, v in event.items() if k != "type"}, session)
        elif kind in CHECKPOINT_ACTIONS:
            payload = {k: v for k, v in event.items() if k != "type"}
            self.broadcast("checkpoint", {**payload, "action": CHECKPOINT_ACTIONS[kind]}, session)

    async def _ticker(self) -> None:
        """A liveness beat; `ts` is epoch seconds (wall clock) so clients can show and compare it."""
        while True:
            await asyncio.sleep(self.settings.tick_seconds)
            self.broadcast("tick", {"ts": time.time()})

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
                conn.hold()  # the response first, then the events the request caused (docs/protocol.md)
                try:
                    frame = await self._dispatch(conn, data)
                    if frame is not None:
                        conn.send(frame)
                finally:
                    conn.release()
        except ConnectionClosed:
            pass
        finally:
            self.connections.discard(conn)
            self._watch_all.discard(conn)
            conn.unsubscribe_all()
            writer.cancel()
            for ended in conn.on_close:
                ended()

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
        if isinstance(first, bytes):
            # 1003: a data type this endpoint does not accept (RFC 6455 7.4.1); say which one it wants
            await ws.close(1003, "binary frame refused: send connect as a JSON text frame (websocat: use --text)")
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
        self.admission.done(ws)  # authenticated: no longer counts against the unauthenticated limit
        wanted = request.params.get("events")
        resume = request.params.get("resume") or {}
        problem = _events_problem(wanted) if wanted is not None else None
        problem = problem or _resume_problem(resume)
        if problem is not None:  # before the connection is registered anywhere
            await ws.send(protocol.response_error(request.id, protocol.INVALID_PARAMS, problem))
            await ws.close(1008, "invalid connect params")
            return None
        conn = Connection(ws, self.settings.send_queue, self._watchers)
        conn.wanted = frozenset(wanted) if wanted is not None else None
        conn.client = request.params.get("client") if isinstance(request.params.get("client"), dict) else {}
        conn.resume = dict(resume)
        conn.on_subscribe = self._catch_up
        conn.chat_seq = self.last_chat_seq
        subscribe = request.params.get("subscribe")
        if subscribe == "*" or (isinstance(subscribe, list) and "*" in subscribe):
            conn.all_sessions = True
            for session in sorted(set(resume) | set(self.backlog.waiting_sessions() if self.backlog else ())):
                self._catch_up(conn, session)
        elif isinstance(subscribe, list):
            for session in subscribe:
                if isinstance(session, str):
                    conn.subscribe(session)
        for session in list(conn.resume):  # a resumed session is watched too
            conn.subscribe(session)
        await ws.send(protocol.response_ok(request.id, {
            "protocol": protocol.PROTOCOL_VERSION,
            "server": {"name": "clawgate", "version": __version__},
            "methods": self.methods.describe(),
            "events": EVENTS,
            # where a resume of each watched session would start (docs/protocol.md)
            "lastReply": {session: self.last_chat_seq(session) for session in sorted(conn.sessions)},
        }))
        return conn


def _resume_problem(resume: Any) -> str | None:
    """Why a connect's `resume` is unusable, in one line; None when it is fine."""
    if not isinstance(resume, dict) or not all(
            isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v >= 0 for k, v in resume.items()):
        return "connect: resume: must map session keys to the last reply number seen, e.g. {\"main\": 12}"
    return None


def _events_problem(wanted: Any) -> str | None:
    """Why a connect's `events` filter is unusable, in one line; None when it is fine."""
    if not isinstance(wanted, list) or not all(isinstance(name, str) for name in wanted):
        return "connect: events: must be a list of event names, e.g. [\"chat\"]"
    unknown = sorted(set(wanted) - set(EVENTS))
    if unknown:
        return f"connect: events: unknown event {', '.join(map(repr, unknown))}; known: {', '.join(EVENTS)}"
    return None
