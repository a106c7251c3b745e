"""A fake OpenAI-compatible Chat Completions server (stdlib only) on 127.0.0.1.

Records every ``POST /v1/chat/completions`` body and answers from a FIFO script of
replies (``chat_text`` / ``chat_tool_call``), then by echoing the last user message.
``fail_next`` makes the next requests fail with an HTTP status first. A conversation in which two
tool calls share an id is refused with HTTP 400, as the real API does.

A request with ``"stream": true`` is answered the way the real API streams: a
``text/event-stream`` body of ``data: {chat.completion.chunk}`` events (role first, the
text in several deltas, a tool call's id and name first and its arguments' JSON in
fragments, then the finish reason), with ``stream_options.include_usage`` one more chunk
with empty ``choices`` and the usage, and finally ``data: [DONE]``.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.waiting import DEFAULT_TIMEOUT

USAGE = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}


def chat_text(text: str) -> dict[str, Any]:
    return {"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}


def chat_tool_call(name: str, arguments: dict[str, Any], call_id: str = "call_1") -> dict[str, Any]:
    return {"message": {"role": "assistant", "content": None, "tool_calls": [
        {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}]},
        "finish_reason": "tool_calls"}


def pieces(text: str, size: int) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


def stream_chunks(choice: dict[str, Any], model: str, include_usage: bool) -> list[dict[str, Any]]:
    """The chunk sequence the real API sends for one choice."""
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": int(time.time()), "model": model}
    if include_usage:
        base["usage"] = None  # every chunk but the last says so

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}

    message = choice["message"]
    chunks = [chunk({"role": "assistant", "content": ""})]
    chunks += [chunk({"content": part}) for part in pieces(message.get("content") or "", 4) if part]
    for index, call in enumerate(message.get("tool_calls") or []):
        function = call["function"]
        chunks.append(chunk({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                             "function": {"name": function["name"], "arguments": ""}}]}))
        chunks += [chunk({"tool_calls": [{"index": index, "function": {"arguments": part}}]})
                   for part in pieces(function["arguments"], 5)]
    chunks.append(chunk({}, choice["finish_reason"]))
    if include_usage:
        chunks.append({**base, "choices": [], "usage": USAGE})
    return chunks


class FakeOpenAI:
    def __init__(self, *, hold: threading.Event | None = None) -> None:
        # When set: a stream stops after its first text chunk until the test sets this event (at most
        # 30 s), so that chunk reaches the client on its own, whatever the machine's load.
        self.hold = hold
        self.requests: list[dict[str, Any]] = []
        self._script: deque[dict[str, Any]] = deque()
        self._fail: deque[int] = deque()
        self._cond = threading.Condition()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return None

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
                if self.path != "/v1/chat/completions":
                    return self._send(404, {"error": {"message": f"no route {self.path}"}})
                with fake._cond:
                    fake.requests.append(body)
                    fake._cond.notify_all()
                    problem = _duplicate_call_id(body)
                    if problem is not None:  # refused like the real API, after being recorded
                        return self._send(400, {"error": {"message": problem, "type": "invalid_request_error",
                                                          "param": "messages", "code": None}})
                    if fake._fail:
                        status = fake._fail.popleft()
                        return self._send(status, {"error": {"message": f"fake failure {status}", "type": "server_error"}})
                    choice = fake._script.popleft() if fake._script else chat_text(_echo(body))
                model = body.get("model", "")
                if body.get("stream") is True:
                    options = body.get("stream_options") or {}
                    return self._stream(stream_chunks(choice, model, bool(options.get("include_usage"))))
                self._send(200, {"id": "chatcmpl-1", "object": "chat.completion", "model": model,
                                 "choices": [{"index": 0, **choice}], "usage": USAGE})

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, chunks: list[dict[str, Any]]) -> None:
                # HTTP/1.0: the body ends when the connection closes, as with any SSE stream here.
                self.send_response(200)
                self.send_header("content-type", "text/event-stream; charset=utf-8")
                self.send_header("cache-control", "no-cache")
                self.end_headers()
                held = fake.hold is None
                for item in chunks:
                    self.wfile.write(f"data: {json.dumps(item)}\n\n".encode())
                    self.wfile.flush()
                    if not held and any((c.get("delta") or {}).get("content") for c in item.get("choices") or []):
                        held = True
                        fake.hold.wait(30)
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def enqueue(self, *choices: dict[str, Any]) -> None:
        with self._cond:
            self._script.extend(choices)

    def fail_next(self, status: int, times: int = 1) -> None:
        """Answer the next `times` requests with HTTP `status` (before any script)."""
        with self._cond:
            self._fail.extend([status] * times)

    def wait_requests(self, n: int, timeout: float = DEFAULT_TIMEOUT) -> None:
        with self._cond:
            if not self._cond.wait_for(lambda: len(self.requests) >= n, timeout):
                raise AssertionError(f"expected >= {n} requests to the fake OpenAI API, got {len(self.requests)}")

    def __enter__(self) -> "FakeOpenAI":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()


def _duplicate_call_id(body: dict[str, Any]) -> str | None:
    """The API refuses a conversation in which two tool calls share an id."""
    seen: set[str] = set()
    for i, message in enumerate(body.get("messages") or []):
        for call in message.get("tool_calls") or []:
            if call.get("id") in seen:
                return f"Invalid parameter: Duplicate value for 'tool_call_id' of {call['id']} in message[{i}]."
            seen.add(call.get("id"))
    return None


def _echo(body: dict[str, Any]) -> str:
    users = [m for m in body.get("messages", []) if m.get("role") == "user"]
    return f"echo: {users[-1]['content']}" if users else "echo"
