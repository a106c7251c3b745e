"""The EchoChat platform: a small chat HTTP API for the example third-party channel (tests/plugins/echochat).

Real HTTP on 127.0.0.1 (the daemon runs as a subprocess). GET /me checks the bearer token, GET /updates
long-polls the events after a cursor (the highest cursor asked for is what the bot acknowledged), POST
/send records a message or answers an injected failure. Standard library only; one lock for the state
the HTTP threads and the test thread share.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

BOT = "echobot"
MAX_CHARS = 500


@dataclass
class EchoChatServer:
    token: str = "echo-token"
    events: list[dict[str, Any]] = field(default_factory=list)
    sent: list[dict[str, Any]] = field(default_factory=list)
    attempts: list[float] = field(default_factory=list)  # monotonic time of every POST /send
    acked: int = 0  # the highest cursor the bot asked after
    failures: list[tuple[int, dict[str, Any]]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._cond = threading.Condition()
        self._next_message = 1
        self._server: ThreadingHTTPServer | None = None

    # the test's side ---------------------------------------------------------------------------------
    def start(self) -> "EchoChatServer":
        handler = type("Handler", (_Handler,), {"fake": self})
        self._server = _Server(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def base_url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def inject(self, *, chat: str, user: str, text: str, chat_type: str = "dm", mentions_bot: bool = False) -> int:
        """A user's message; returns its event id."""
        with self._cond:
            event = {"id": len(self.events) + 1, "message_id": self._next_message, "chat": chat, "chat_type": chat_type,
                     "user": user, "username": f"user{user}", "text": text, "mentions_bot": mentions_bot}
            self._next_message += 1
            self.events.append(event)
            self._cond.notify_all()
            return int(event["id"])

    def redeliver(self, event_id: int) -> None:
        """The same event (same ids) once more, after the ones already queued."""
        with self._cond:
            again = dict(self.events[event_id - 1], id=len(self.events) + 1)
            self.events.append(again)
            self._cond.notify_all()

    def fail_next_send(self, status: int, **body: Any) -> None:
        with self._cond:
            self.failures.append((status, body))

    # the bot's side --------------------------------------------------------------------------------
    def updates(self, after: int, timeout: float) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        with self._cond:
            self.acked = max(self.acked, after)
            while len(self.events) <= after and time.monotonic() < deadline:
                self._cond.wait(max(0.0, deadline - time.monotonic()))
            return [dict(e) for e in self.events[after:]]

    def send(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self._cond:
            self.attempts.append(time.monotonic())
            if self.failures:
                return self.failures.pop(0)
            if len(str(body.get("text", ""))) > MAX_CHARS:  # what the real platform would refuse
                return 400, {"error": f"text longer than {MAX_CHARS} characters"}
            record = {"id": len(self.sent) + 1, "chat": str(body["chat"]), "text": str(body["text"]),
                      "reply_to": body.get("reply_to")}
            self.sent.append(record)
            return 200, {"id": record["id"]}


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away (a killed daemon) is not the fake's error; anything else is printed."""
        import sys

        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    fake: EchoChatServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        return None

    def _answer(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        try:
            self.send_response(status)
        except (BrokenPipeError, ConnectionResetError):
            return
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        try:
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the bot went away mid long poll (a stopped daemon)
            return

    def _authorized(self) -> bool:
        if self.headers.get("Authorization") != f"Bearer {self.fake.token}":
            self._answer(401, {"error": "bad token"})
            return False
        return True

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        if not self._authorized():
            return
        url = urlsplit(self.path)
        if url.path == "/me":
            self._answer(200, {"name": BOT})
        elif url.path == "/updates":
            query = parse_qs(url.query)
            after, timeout = int(query.get("after", ["0"])[0]), float(query.get("timeout", ["0"])[0])
            self._answer(200, {"events": self.fake.updates(after, min(timeout, 5.0))})
        else:
            self._answer(404, {"error": "not found"})

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        if not self._authorized():
            return
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        if urlsplit(self.path).path != "/send":
            self._answer(404, {"error": "not found"})
            return
        self._answer(*self.fake.send(body))
