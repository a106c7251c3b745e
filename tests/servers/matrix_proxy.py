"""A loopback proxy in front of the real Synapse, for the failures a homeserver does not make on demand.

Why: the conformance suite (tests/conformance) needs a rate limit, a permanent refusal, a redelivered
event and a homeserver that goes away, at a moment the test chooses. Everything else passes through
to Synapse unchanged; the proxy only watches (/sync batches, send attempts) and, when asked, answers
the next send itself or rewinds the next /sync to an earlier position (which is how a Matrix client
is sent events again).
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable
from urllib.parse import parse_qsl, urlencode, urlsplit

HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "content-length", "host", "proxy-connection"}


@dataclass
class Batch:
    """One /sync answer the proxy passed on: the position asked for, the next one, the events in it."""

    since: str | None
    next_batch: str
    event_ids: set[str] = field(default_factory=set)


class MatrixProxy:
    """Forwards to `upstream` (Synapse's base URL); `base_url` is what the daemon is configured with."""

    def __init__(self, upstream_port: int, on_send: Callable[[dict[str, Any]], None] | None = None) -> None:
        """`on_send`: called with each message the daemon sends (the bench notes when each arrived)."""
        self.upstream_port = upstream_port
        self.on_send = on_send
        self.batches: list[Batch] = []
        self.sync_requests: list[str | None] = []  # the `since` of each /sync the daemon asked for
        self.send_times: list[float] = []
        self._fail_next_send: tuple[int, dict[str, Any]] | None = None
        self._held = threading.Event()  # set: answers to message sends are held (the sends still reach Synapse)
        self._release = threading.Event()
        self.sent_bodies: list[dict[str, Any]] = []  # each message send the daemon asked for, in order
        self._rewind_to: str | None = None
        self._lock = threading.Lock()
        self._stopped = False
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                proxy._handle(self)

            do_POST = do_PUT = do_DELETE = do_GET

            def log_message(self, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, name="matrix-proxy", daemon=True)

    def start(self) -> "MatrixProxy":
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening: from now on connections are refused. Safe to call twice."""
        if self._stopped:
            return
        self._stopped = True
        self.server.shutdown()
        self.server.server_close()

    # --- what tests ask for --------------------------------------------------------------------------
    def fail_next_send(self, status: int, body: dict[str, Any]) -> None:
        with self._lock:
            self._fail_next_send = (status, body)

    def hold_send_answers(self) -> None:
        """From now on a message send reaches Synapse (which stores the event) but its answer waits for
        release_send_answers(): a daemon killed meanwhile never learns that its event was stored."""
        self._release.clear()
        self._held.set()

    def release_send_answers(self) -> None:
        self._held.clear()
        self._release.set()

    def redeliver(self, event_id: str) -> None:
        """The next /sync starts where the batch holding `event_id` started: Synapse sends it (and what followed) again."""
        with self._lock:
            batch = next(b for b in self.batches if event_id in b.event_ids)
            self._rewind_to = batch.since

    def acknowledged(self, event_id: str) -> bool:
        """The daemon asked for the position after the batch holding `event_id`: it was done with that batch."""
        with self._lock:
            done = {b.next_batch for b in self.batches if event_id in b.event_ids}
            return any(since in done for since in self.sync_requests)

    # --- forwarding ----------------------------------------------------------------------------------
    def _handle(self, req: BaseHTTPRequestHandler) -> None:
        parts = urlsplit(req.path)
        query = parse_qsl(parts.query, keep_blank_values=True)
        is_sync = parts.path.endswith("/sync") and req.command == "GET"
        is_send = req.command == "PUT" and "/send/m.room.message/" in parts.path
        since = dict(query).get("since")
        with self._lock:
            if is_sync:
                self.sync_requests.append(since)
                if self._rewind_to is not None:
                    since, self._rewind_to = self._rewind_to, None
                    query = [(k, v) for k, v in query if k != "since"] + [("since", since)]
            failure = None
            if is_send:
                self.send_times.append(time.monotonic())
                failure, self._fail_next_send = self._fail_next_send, None
        length = int(req.headers.get("Content-Length") or 0)
        body = req.rfile.read(length) if length else None
        if is_send and failure is None and body:
            sent = json.loads(body)
            with self._lock:
                self.sent_bodies.append(sent)
            if self.on_send is not None:
                self.on_send(sent)
        if failure is not None:
            self._reply(req, failure[0], {"Content-Type": "application/json"}, json.dumps(failure[1]).encode())
            return
        path = parts.path + ("?" + urlencode(query) if query else "")
        headers = {k: v for k, v in req.headers.items() if k.lower() not in HOP_HEADERS}
        upstream = http.client.HTTPConnection("127.0.0.1", self.upstream_port, timeout=120)
        try:
            upstream.request(req.command, path, body=body, headers=headers)
            resp = upstream.getresponse()
            data = resp.read()
            status, out_headers = resp.status, {k: v for k, v in resp.getheaders() if k.lower() not in HOP_HEADERS}
        finally:
            upstream.close()
        if is_sync and status == 200:
            self._note_batch(since, data)
        if is_send and self._held.is_set():
            self._release.wait(300)
        self._reply(req, status, out_headers, data)

    def _note_batch(self, since: str | None, data: bytes) -> None:
        answer = json.loads(data)
        batch = Batch(since, answer.get("next_batch", ""))
        for room in (answer.get("rooms") or {}).get("join", {}).values():
            for event in (room.get("timeline") or {}).get("events", []):
                if "event_id" in event:
                    batch.event_ids.add(event["event_id"])
        with self._lock:
            self.batches.append(batch)

    @staticmethod
    def _reply(req: BaseHTTPRequestHandler, status: int, headers: dict[str, str], data: bytes) -> None:
        try:
            req.send_response(status)
            for name, value in headers.items():
                req.send_header(name, value)
            req.send_header("Content-Length", str(len(data)))
            req.send_header("Connection", "close")
            req.end_headers()
            req.wfile.write(data)
        except OSError:
            return  # the daemon went away (killed by the test) while its request was under way
