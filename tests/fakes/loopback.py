"""Small servers on 127.0.0.1 that attacker-style tests own: a web page and a raw TCP listener.

`web_page(respond)` serves GET requests with whatever `respond(path, port)` returns (status,
headers, body) and records the paths asked for; `tcp_listener()` records the first bytes of each
connection, so a test can tell that a sandboxed program reached (or never reached) the network.
"""

from __future__ import annotations

import socket
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterator

Respond = Callable[[str, int], tuple[int, dict[str, str], bytes]]


def html(body: str) -> tuple[int, dict[str, str], bytes]:
    """A 200 answer with an HTML page."""
    return 200, {"content-type": "text/html"}, body.encode()


@contextmanager
def web_page(respond: Respond) -> Iterator[tuple[int, list[str]]]:
    """Yields the port and the list of paths requested so far."""
    hits: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits.append(self.path)
            status, headers, body = respond(self.path, self.server.server_address[1])
            self.send_response(status)
            for name, value in {**headers, "content-length": str(len(body))}.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:  # quiet: the test reads `hits`
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], hits
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


@contextmanager
def tcp_listener() -> Iterator[tuple[int, list[bytes]]]:
    """Yields the port and what each connection sent (its first 100 bytes)."""
    got: list[bytes] = []
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(10)
                got.append(conn.recv(100))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1], got
    finally:
        stop.set()
        thread.join(5)
        server.close()
