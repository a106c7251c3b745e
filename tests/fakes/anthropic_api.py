"""A fake Anthropic Messages API that speaks real HTTP on 127.0.0.1.

Why a real server instead of mocking the SDK: the daemon (and its tests) use the
real ``anthropic`` client, so retries, ``retry-after`` handling, SSE parsing,
keep-alive and error classes are all exercised exactly as in production, and the
same fake can serve a separate daemon process via ``base_url``.

Only the standard library is used so the fake has no moving parts of its own.

Usage::

    with FakeAnthropic() as fake:
        fake.enqueue(tool_use("read_file", {"path": "a.txt"}), text("done"))
        client = anthropic.AsyncAnthropic(api_key="test", base_url=fake.base_url)
        ...

Reply selection for each valid ``POST /v1/messages`` (first that applies):

1. ``fail_next`` errors,
2. ``enqueue_for`` scripts whose ``match`` occurs in the request's user text,
3. the FIFO ``enqueue`` script,
4. the ``responder`` (default: echo the last user message text).

Run as a process: ``python -m tests.fakes.anthropic_api --port 0 [--latency S]``
prints ``READY http://127.0.0.1:PORT`` and serves the echo responder until killed.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import socketserver
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Callable

__all__ = [
    "FakeAnthropic",
    "Reply",
    "error",
    "last_user_text",
    "text",
    "tool_use",
    "tool_uses",
]

HOST = "127.0.0.1"

_ERROR_TYPES: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}

_ERROR_MESSAGES: dict[str, str] = {
    "invalid_request_error": "Invalid request",
    "authentication_error": "invalid x-api-key",
    "permission_error": "Your API key does not have permission to use the specified resource.",
    "not_found_error": "Not found",
    "request_too_large": "Request exceeds the maximum allowed number of bytes.",
    "rate_limit_error": "Number of request tokens has exceeded your per-minute rate limit",
    "api_error": "Internal server error",
    "overloaded_error": "Overloaded",
}

_REASONS: dict[int, str] = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    408: "Request Timeout",
    409: "Conflict",
    413: "Payload Too Large",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
    529: "Overloaded",
}


# --------------------------------------------------------------------------- replies


@dataclass
class Reply:
    """One scripted model reply (or, with a non-200 ``status``, one API error).

    ``delay`` (plus the fake's ``latency``) is slept before anything is sent, for
    streaming replies too, so a slow model looks like a slow first byte.
    """

    text: str = ""
    tool_calls: list[dict] = field(default_factory=list)
    stop_reason: str | None = None
    status: int = 200
    retry_after: float | None = None
    delay: float = 0.0
    input_tokens: int | None = None
    output_tokens: int | None = None
    # Error message for non-200 replies; None uses a stock message per error type.
    message: str | None = None


def text(s: str, **kw: Any) -> Reply:
    """A plain assistant text reply; ``kw`` sets any other ``Reply`` field."""
    return Reply(text=s, **kw)


def tool_use(name: str, input: dict, *, text: str = "", id: str | None = None) -> Reply:  # noqa: A002
    """A reply that calls one tool (optionally preceded by some assistant text)."""
    call: dict = {"name": name, "input": input}
    if id is not None:
        call["id"] = id
    return Reply(text=text, tool_calls=[call])


def tool_uses(*calls: tuple[str, dict], text: str = "") -> Reply:
    """A reply with several parallel tool calls, given as ``(name, input)`` pairs."""
    return Reply(text=text, tool_calls=[{"name": n, "input": i} for n, i in calls])


def error(status: int, retry_after: float | None = None, message: str | None = None) -> Reply:
    """An API error reply (429, 529, 500, 400, ...) instead of a model message."""
    return Reply(status=status, retry_after=retry_after, message=message)


# --------------------------------------------------------------------------- helpers


def _blocks_text(content: Any) -> str:
    """Text of a message ``content`` given as a string or a list of blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            b.get("text", "")
            for b in content
            if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
        )
    return ""


def last_user_text(body: dict) -> str:
    """Text of the last user message ("" if it holds only tool_result blocks)."""
    messages = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(messages, list):
        return ""
    for m in reversed(messages):
        if isinstance(m, dict) and m.get("role") == "user":
            return _blocks_text(m.get("content"))
    return ""


def _routing_text(body: dict) -> str:
    """Text used by ``enqueue_for``: the latest user message that has any text.

    Why not strictly the last user message: in a tool loop the follow-up request
    ends with a tool_result-only user message, and it must still route to the
    script of the session (human turn) that started the loop.
    """
    messages = body.get("messages")
    if not isinstance(messages, list):
        return ""
    for m in reversed(messages):
        if isinstance(m, dict) and m.get("role") == "user":
            t = _blocks_text(m.get("content"))
            if t:
                return t
    return ""


def _new_id(prefix: str) -> str:
    """A random id shaped like the real API's (``msg_…``, ``toolu_…``)."""
    return prefix + os.urandom(12).hex()


def _dumps(obj: Any) -> str:
    """Compact JSON, as the real API sends it."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def _validate(body: Any) -> str | None:
    """Return an error message if the request would be rejected by the real API.

    Checks the rules that catch real client bugs: required fields, non-empty
    messages/content, unique tool_use ids, and tool_use/tool_result pairing
    between an assistant message and the user message right after it.
    """
    if not isinstance(body, dict):
        return "request body must be a JSON object"
    model = body.get("model")
    if not isinstance(model, str) or not model:
        return "model: Field required"
    max_tokens = body.get("max_tokens")
    if max_tokens is None:
        return "max_tokens: Field required"
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        return "max_tokens: Input should be a valid integer greater than or equal to 1"
    messages = body.get("messages")
    if messages is None:
        return "messages: Field required"
    if not isinstance(messages, list):
        return "messages: Input should be a valid list"
    if not messages:
        return "messages: at least one message is required"

    last = len(messages) - 1
    seen_tool_ids: set[str] = set()
    prev_tool_ids: list[str] = []  # tool_use ids of the immediately preceding assistant message
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            return f"messages.{i}: Input should be a valid dictionary"
        role = m.get("role")
        if role not in ("user", "assistant"):
            return f"messages.{i}.role: Input should be 'user' or 'assistant'"
        content = m.get("content")
        may_be_empty = i == last and role == "assistant"
        this_tool_ids: list[str] = []
        result_ids: set[str] = set()
        if isinstance(content, str):
            if not content and not may_be_empty:
                return (
                    f"messages.{i}: all messages must have non-empty content except for "
                    "the optional final assistant message"
                )
        elif isinstance(content, list):
            if not content and not may_be_empty:
                return (
                    f"messages.{i}: all messages must have non-empty content except for "
                    "the optional final assistant message"
                )
            for j, b in enumerate(content):
                where = f"messages.{i}.content.{j}"
                if not isinstance(b, dict) or not isinstance(b.get("type"), str):
                    return f"{where}: Input should be a valid content block"
                btype = b["type"]
                if btype == "text":
                    t = b.get("text")
                    if not isinstance(t, str):
                        return f"{where}.text: Field required"
                    if not t.strip():
                        return "messages: text content blocks must contain non-whitespace text"
                elif btype == "tool_use":
                    if role != "assistant":
                        return f"{where}: `tool_use` blocks can only be in `assistant` messages"
                    tid = b.get("id")
                    if not isinstance(tid, str) or not tid:
                        return f"{where}.id: Field required"
                    if not isinstance(b.get("name"), str):
                        return f"{where}.name: Field required"
                    if not isinstance(b.get("input"), dict):
                        return f"{where}.input: Input should be a valid dictionary"
                    if tid in seen_tool_ids:
                        return f"messages: `tool_use` ids must be unique; duplicate id: {tid}"
                    seen_tool_ids.add(tid)
                    this_tool_ids.append(tid)
                elif btype == "tool_result":
                    if role != "user":
                        return f"{where}: `tool_result` blocks can only be in `user` messages"
                    tid = b.get("tool_use_id")
                    if tid not in prev_tool_ids:
                        return (
                            f"{where}: unexpected `tool_use_id` found in `tool_result` blocks: {tid}. "
                            "Each `tool_result` block must have a corresponding `tool_use` block "
                            "in the previous message."
                        )
                    result_ids.add(tid)
        else:
            return f"messages.{i}.content: Input should be a valid string or list"

        if prev_tool_ids:
            missing = [t for t in prev_tool_ids if t not in result_ids]
            if missing:
                return (
                    f"messages.{i - 1}: `tool_use` ids were found without `tool_result` blocks "
                    f"immediately after: {', '.join(missing)}. Each `tool_use` block must have a "
                    "corresponding `tool_result` block in the next message."
                )
        prev_tool_ids = this_tool_ids
    return None


def _chunks(s: str, n: int) -> list[str]:
    """Split ``s`` into at most ``n`` roughly equal non-empty pieces."""
    if not s:
        return []
    n = max(1, min(n, len(s)))
    size = -(-len(s) // n)
    return [s[k : k + size] for k in range(0, len(s), size)]


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
        super().__init__((HOST, port), _Handler)

    def server_bind(self) -> None:
        """Skip HTTPServer's ``socket.getfqdn`` lookup, which can stall on reverse DNS."""
        socketserver.TCPServer.server_bind(self)
        self.server_name = HOST
        self.server_port = self.server_address[1]

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._conns_lock:
            self._conns.add(request)
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
        return bool(self.headers.get("x-api-key") or self.headers.get("authorization"))

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
        body = self._parse(raw)
        if body is not None:
            # Recorded before any check, so tests can inspect even rejected requests.
            fake._record(body, {k.lower(): v for k, v in self.headers.items()})
        if not self._auth_ok():
            self._send_error(401, "x-api-key header is required")
            return
        if body is None:
            self._send_error(400, "There was an error parsing the body of your request as JSON")
            return
        problem = _validate(body)
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
        if body.get("stream") is True:
            self._stream(model, content, stop, in_tok, out_tok)
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
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
            },
        }
        self._send(200, _dumps(msg).encode())

    def _stream(self, model: str, content: list[dict], stop: str, in_tok: int, out_tok: int) -> None:
        """Send the real SSE event sequence as one chunked HTTP/1.1 body (keeps keep-alive)."""
        events: list[tuple[str, dict]] = [
            (
                "message_start",
                {
                    "type": "message_start",
                    "message": {
                        "id": _new_id("msg_"),
                        "type": "message",
                        "role": "assistant",
                        "model": model,
                        "content": [],
                        "stop_reason": None,
                        "stop_sequence": None,
                        "usage": {
                            "input_tokens": in_tok,
                            "output_tokens": 1,
                            "cache_creation_input_tokens": 0,
                            "cache_read_input_tokens": 0,
                        },
                    },
                },
            ),
            ("ping", {"type": "ping"}),
        ]
        for idx, block in enumerate(content):
            if block["type"] == "text":
                start: dict = {"type": "text", "text": ""}
                deltas = [{"type": "text_delta", "text": piece} for piece in _chunks(block["text"], 4)]
            else:
                start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
                # Like the API: an empty first fragment, then the JSON in pieces.
                deltas = [{"type": "input_json_delta", "partial_json": ""}] + [
                    {"type": "input_json_delta", "partial_json": piece}
                    for piece in _chunks(_dumps(block["input"]), 3)
                ]
            events.append(("content_block_start", {"type": "content_block_start", "index": idx, "content_block": start}))
            events.extend(
                ("content_block_delta", {"type": "content_block_delta", "index": idx, "delta": d}) for d in deltas
            )
            events.append(("content_block_stop", {"type": "content_block_stop", "index": idx}))
        events.append(
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": out_tok},
                },
            )
        )
        events.append(("message_stop", {"type": "message_stop"}))

        out = [
            (
                "HTTP/1.1 200 OK\r\n"
                "content-type: text/event-stream; charset=utf-8\r\n"
                "cache-control: no-cache\r\n"
                "transfer-encoding: chunked\r\n"
                f"request-id: {_new_id('req_')}\r\n"
                + ("connection: close\r\n" if self.close_connection else "")
                + "\r\n"
            ).encode("latin-1")
        ]
        for name, data in events:
            payload = f"event: {name}\ndata: {_dumps(data)}\n\n".encode()
            out.append(b"%x\r\n%s\r\n" % (len(payload), payload))
        out.append(b"0\r\n\r\n")
        self.wfile.write(b"".join(out))


def _content_blocks(reply: Reply) -> list[dict]:
    """Response content: a text block (omitted if empty with tool calls), then tool_use blocks."""
    blocks: list[dict] = []
    if reply.text or not reply.tool_calls:
        blocks.append({"type": "text", "text": reply.text})
    for call in reply.tool_calls:
        blocks.append(
            {
                "type": "tool_use",
                "id": call.get("id") or _new_id("toolu_"),
                "name": call["name"],
                "input": call.get("input") or {},
            }
        )
    return blocks


def _estimate_output(content: list[dict]) -> int:
    """Rough token count (~4 chars per token), at least 1 like the real API."""
    n = 0
    for b in content:
        n += len(b["text"]) if b["type"] == "text" else len(b["name"]) + len(_dumps(b["input"]))
    return max(1, n // 4)


def last_user_block(body: dict) -> str:
    """The last text block of the last user message: what the person typed, without any
    context block a client puts before it."""
    messages = body.get("messages") if isinstance(body, dict) else None
    for m in reversed(messages if isinstance(messages, list) else []):
        if isinstance(m, dict) and m.get("role") == "user":
            content = m.get("content")
            if isinstance(content, str):
                return content
            texts = [b.get("text", "") for b in content or [] if isinstance(b, dict) and b.get("type") == "text"]
            return texts[-1] if texts else ""
    return ""


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
        self.headers: list[dict] = []
        self.responder_errors: list[BaseException] = []
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

    def wait_requests(self, n: int, timeout: float = 10.0) -> None:
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
    args = parser.parse_args(argv)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    fake = FakeAnthropic(latency=args.latency, port=args.port).start()
    print(f"READY {fake.base_url}", flush=True)
    try:
        while not stop.wait(1.0):
            pass
    finally:
        fake.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
