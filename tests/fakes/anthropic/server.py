"""The HTTP side of the fake: server, request handler, ``FakeAnthropic`` and its CLI.

Why separate: this is the only part that touches sockets and threads; the pieces it
serves (replies, validation, response bodies, SSE) live in their own modules.

Reply selection for each valid ``POST /v1/messages`` (first that applies):

1. ``fail_next`` errors,
2. ``enqueue_for`` scripts whose ``match`` occurs in the request's user text,
3. the FIFO ``enqueue`` script,
4. the ``responder`` (default: echo the last user message text).
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import socketserver
import sys
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Callable

from tests.fakes.anthropic.replies import Reply, error, text
from tests.fakes.anthropic.request_text import _routing_text, last_user_block
from tests.fakes.anthropic.responses import (
    _ERROR_MESSAGES,
    _ERROR_TYPES,
    _REASONS,
    _content_blocks,
    _dumps,
    _estimate_output,
    _new_id,
)
from tests.fakes.anthropic.sse import encode_stream, stream_events, stream_parts
from tests.fakes.anthropic.validation import _validate
from tests.waiting import DEFAULT_TIMEOUT

HOST = "127.0.0.1"


# --------------------------------------------------------------------------- server


class _Server(ThreadingHTTPServer):
    """ThreadingHTTPServer that knows its fake and can drop live keep-alive sockets."""

    daemon_threads = True
    request_queue_size = 256
    allow_reuse_address = True

    def __init__(self, fake: FakeAnthropic, port: int) -> None:
        self.fake = fake
        self._conns: set[socket.socket] = set()
        self._conns_lock = threading.Lock()
        self.accepted = 0  # TCP connections accepted so far (keep-alive reuse shows as few)
        super().__init__((HOST, port), _Handler)

    def server_bind(self) -> None:
        """Skip HTTPServer's ``socket.getfqdn`` lookup, which can stall on reverse DNS."""
        socketserver.TCPServer.server_bind(self)
        self.server_name = HOST
        self.server_port = self.server_address[1]

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._conns_lock:
            self._conns.add(request)
            self.accepted += 1
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._conns_lock:
            self._conns.discard(request)
        super().shutdown_request(request)

    def drop_connections(self) -> None:
        """Why: handler threads of idle keep-alive connections would otherwise keep
        answering after ``stop()``; shutting the sockets down ends them."""
        with self._conns_lock:
            conns = list(self._conns)
            self._conns.clear()
        for s in conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Stay quiet about clients hanging up (cancelled streams, stop()); report the rest."""
        exc = sys.exc_info()[1]
        if isinstance(exc, OSError):  # ConnectionResetError, BrokenPipeError, timeouts, ...
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    """HTTP/1.1 keep-alive handler; every response is written in as few sends as possible."""

    protocol_version = "HTTP/1.1"
    server_version = "fake-anthropic"
    sys_version = ""
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        """Silenced: logging every request would dominate benchmark time."""

    # -- io

    def _read_body(self) -> bytes:
        """Read the whole request body so the keep-alive stream stays in sync."""
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            parts: list[bytes] = []
            while True:
                line = self.rfile.readline(65537)
                size = int(line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline(65537)
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        """Write status line, headers and a Content-Length body in one send."""
        head = [
            f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}",
            "content-type: application/json",
            f"content-length: {len(body)}",
            f"request-id: {_new_id('req_')}",
        ]
        if headers:
            head.extend(f"{k}: {v}" for k, v in headers.items())
        if self.close_connection:
            head.append("connection: close")
        self.wfile.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)

    def _send_error(
        self,
        status: int,
        message: str | None = None,
        retry_after: float | None = None,
        extra: dict[str, str] | None = None,
    ) -> None:
        """Send an error in the API's JSON envelope, with the right type per status."""
        etype = _ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
        body = {
            "type": "error",
            "error": {"type": etype, "message": message or _ERROR_MESSAGES.get(etype, "Error")},
        }
        headers: dict[str, str] = dict(extra or {})
        if retry_after is not None:
            headers["retry-after"] = repr(float(retry_after)) if retry_after % 1 else str(int(retry_after))
        self._send(status, _dumps(body).encode(), headers)

    # -- routes

    def do_GET(self) -> None:
        """The fake only implements messages; anything else is a 404 like the API's."""
        self._read_body()
        self._send_error(404, f"Not found: {self.path}")

    do_PUT = do_DELETE = do_PATCH = do_GET

    def do_POST(self) -> None:
        """Route ``/v1/messages`` (and ``count_tokens``); query strings are ignored."""
        raw = self._read_body()
        path = self.path.split("?", 1)[0].rstrip("/")
        if path == "/v1/messages":
            self._messages(raw)
        elif path == "/v1/messages/count_tokens":
            self._count_tokens(raw)
        else:
            self._send_error(404, f"Not found: {self.path}")

    def _auth_ok(self) -> bool:
        key = self.headers.get("x-api-key") or self.headers.get("authorization")
        return bool(key) and key not in self.server.fake.rejected_keys

    def _parse(self, raw: bytes) -> Any:
        try:
            return json.loads(raw)
        except ValueError:
            return None

    def _count_tokens(self, raw: bytes) -> None:
        if not self._auth_ok():
            self._send_error(401, "x-api-key header is required")
            return
        body = self._parse(raw)
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            self._send_error(400, "messages: Field required")
            return
        self._send(200, _dumps({"input_tokens": max(1, len(raw) // 4)}).encode())

    def _messages(self, raw: bytes) -> None:
        fake = self.server.fake
        partial = _head_and_last_message(raw) if fake.fast else None
        body = partial or self._parse(raw)
        if body is not None:
            # Recorded before any check, so tests can inspect even rejected requests.
            fake._record(body, {k.lower(): v for k, v in self.headers.items()})
        if not self._auth_ok():
            self._send_error(401, "x-api-key header is required")
            return
        if body is None:
            self._send_error(400, "There was an error parsing the body of your request as JSON")
            return
        if not (self.headers.get("content-type") or "").lower().startswith("application/json"):
            self._send_error(400, "content-type: the request body must be sent as application/json")
            return
        problem = None if partial else _validate(body)  # pairing rules need the whole history
        if problem is not None:
            self._send_error(400, problem)
            return

        reply, responder_error = fake._pick(body)
        wait = fake.latency + (reply.delay if reply is not None else 0.0)
        if wait > 0:
            time.sleep(wait)
        if reply is None:
            # A test bug, not an API condition: tell the SDK not to retry it.
            self._send_error(500, f"fake responder raised: {responder_error}", extra={"x-should-retry": "false"})
            return
        if reply.status != 200:
            self._send_error(reply.status, reply.message, reply.retry_after)
            return

        model = body["model"]
        content = _content_blocks(reply)
        in_tok = reply.input_tokens if reply.input_tokens is not None else max(1, len(raw) // 4)
        out_tok = reply.output_tokens if reply.output_tokens is not None else _estimate_output(content)
        stop = reply.stop_reason or ("tool_use" if reply.tool_calls else "end_turn")
        if reply.body is not None:
            self._send(200, _dumps(reply.body).encode())
            return
        if body.get("stream") is True and not reply.as_json:
            events = stream_events(model, content, stop, in_tok, out_tok, cache_read=reply.cache_read_tokens,
                                   cache_write=reply.cache_write_tokens, usage_late=reply.usage_late)
            self._stream(events, reply.hold, reply.cut)
            return
        msg = {
            "id": _new_id("msg_"),
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {
                "input_tokens": in_tok,
                "output_tokens": out_tok,
                "cache_creation_input_tokens": reply.cache_write_tokens,
                "cache_read_input_tokens": reply.cache_read_tokens,
            },
        }
        self._send(200, _dumps(msg).encode())

    def _stream(self, events: list[tuple[str, dict]], hold: threading.Event | None, cut: str | None) -> None:
        """Send the real SSE event sequence as one chunked HTTP/1.1 body (keeps keep-alive).

        ``cut`` ends the body early but cleanly (the last chunk sent, then the connection closed)."""
        first = next((i for i, (name, data) in enumerate(events)
                      if name == "content_block_delta" and data["delta"]["type"] == "text_delta"), None)
        if cut is not None:
            events = events[:-1] if cut == "before_stop" else events[:(first if first is not None else 0) + 1]
            self.close_connection = True
        if hold is None or first is None or first >= len(events):
            self.wfile.write(encode_stream(events, self.close_connection))
            return
        parts = stream_parts(events, self.close_connection)  # the head, then one part per event
        self.wfile.write(b"".join(parts[:first + 2]))
        self.wfile.flush()
        hold.wait(30)
        self.wfile.write(b"".join(parts[first + 2:]))


def _head_and_last_message(raw: bytes) -> dict | None:
    """The body with only its last message, when it is laid out as compact JSON ending in the
    messages array (what clawgate sends); None otherwise, and the caller parses it whole."""
    cut = raw.find(b',"messages":[')
    last = raw.rfind(b'{"role":')
    if cut < 0 or last < cut or not raw.endswith(b"]}"):
        return None
    try:
        head = json.loads(raw[:cut] + b"}")
        head["messages"] = [json.loads(raw[last:-2])]
    except ValueError:
        return None
    return head if isinstance(head, dict) else None


def _echo(body: dict) -> Reply:
    """Default responder: echo the text the user typed last."""
    return text("echo: " + last_user_block(body))


# --------------------------------------------------------------------------- public fake


class FakeAnthropic:
    """In-process fake Messages API on 127.0.0.1; see module docstring for reply order."""

    def __init__(
        self,
        responder: Callable[[dict], Reply] | None = None,
        latency: float = 0.0,
        *,
        port: int = 0,
    ) -> None:
        self.responder: Callable[[dict], Reply] = responder or _echo
        self.latency: float = latency
        self.requests: list[dict] = []
        # Off in the long-running process mode (benchmarks): thousands of whole histories would pile up.
        self.record_requests = True
        # Benchmarks (--fast): read only the request's head and last message, so the fake's cost does not
        # grow with the history and the figures show the daemon's. Tests keep whole-body validation.
        self.fast = False
        self.headers: list[dict] = []
        self.responder_errors: list[BaseException] = []
        # API keys answered with 401, like a revoked or mistyped key.
        self.rejected_keys: set[str] = set()
        self._want_port = port
        self._port: int | None = None
        self._cond = threading.Condition()
        self._fail: deque[Reply] = deque()
        self._script: deque[Reply] = deque()
        self._scripts_for: list[tuple[str, deque[Reply]]] = []
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("FakeAnthropic is not started")
        return self._port

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def connections_accepted(self) -> int:
        return self._server.accepted if self._server is not None else 0

    def start(self) -> FakeAnthropic:
        """Bind (port 0 = any free port) and serve from a daemon thread."""
        if self._server is not None:
            return self
        self._server = _Server(self, self._want_port)
        self._port = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-anthropic", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and drop open keep-alive connections (idempotent)."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.drop_connections()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeAnthropic:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- scripting

    def enqueue(self, *replies: Reply) -> None:
        """Append replies to the FIFO script (used before the responder)."""
        with self._cond:
            self._script.extend(replies)

    def enqueue_for(self, match: str, *replies: Reply) -> None:
        """Script used only for requests whose user text contains ``match``.

        The text is the latest user message that has text, so the tool_result
        follow-ups of a turn stay on that turn's script. The first registered
        match with replies left wins.
        """
        with self._cond:
            for key, q in self._scripts_for:
                if key == match:
                    q.extend(replies)
                    return
            self._scripts_for.append((match, deque(replies)))

    def fail_next(self, status: int, times: int = 1, retry_after: float | None = None) -> None:
        """Make the next ``times`` valid requests fail with ``status``, before any script."""
        with self._cond:
            self._fail.extend(error(status, retry_after) for _ in range(times))

    def wait_requests(self, n: int, timeout: float = DEFAULT_TIMEOUT) -> None:
        """Block until at least ``n`` requests arrived, else raise AssertionError."""
        with self._cond:
            if not self._cond.wait_for(lambda: len(self.requests) >= n, timeout):
                raise AssertionError(f"expected >= {n} requests to the fake API, got {len(self.requests)}")

    def reset(self) -> None:
        """Forget recorded requests and all scripts (responder and latency stay)."""
        with self._cond:
            self.requests.clear()
            self.headers.clear()
            self.responder_errors.clear()
            self._fail.clear()
            self._script.clear()
            self._scripts_for.clear()

    # -- used by the handler

    def _record(self, body: dict, headers: dict) -> None:
        if not self.record_requests:
            return
        with self._cond:
            self.requests.append(body)
            self.headers.append(headers)
            self._cond.notify_all()

    def _pick(self, body: dict) -> tuple[Reply | None, BaseException | None]:
        """Choose the reply; ``(None, exc)`` when the responder raised."""
        with self._cond:
            if self._fail:
                return self._fail.popleft(), None
            if self._scripts_for:
                routing = _routing_text(body)
                for key, q in self._scripts_for:
                    if q and key in routing:
                        return q.popleft(), None
            if self._script:
                return self._script.popleft(), None
        try:
            reply: Any = self.responder(body)
        except Exception as exc:  # noqa: BLE001 - reported to the client and kept for the test
            with self._cond:
                self.responder_errors.append(exc)
            return None, exc
        if isinstance(reply, str):
            reply = text(reply)
        return reply, None


# --------------------------------------------------------------------------- CLI


def main(argv: list[str] | None = None) -> int:
    """Serve the echo responder until killed; prints READY <base_url> first."""
    parser = argparse.ArgumentParser(description="Fake Anthropic Messages API (echo responder)")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--fast", action="store_true", help="read only the head and last message of a request")
    args = parser.parse_args(argv)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    fake = FakeAnthropic(latency=args.latency, port=args.port)
    fake.record_requests = False
    fake.fast = args.fast
    fake.start()
    print(f"READY {fake.base_url}", flush=True)
    try:
        while not stop.wait(1.0):
            pass
    finally:
        fake.stop()
    return 0
