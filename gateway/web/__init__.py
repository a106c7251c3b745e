"""The control page: static files answered over plain HTTP on the gateway's own port.

The page is a gateway client like any other (it speaks docs/protocol.md over the WebSocket and
asks for the token), so serving it needs no second server: websockets' `process_request` hook
answers GETs before an upgrade. Files are read once, at the first request, and looked up by exact name,
so no request path ever reaches the file system. Every answer carries strict headers: the page runs
only its own scripts, cannot be framed, and the index is never cached (docs/web.md).
"""

from __future__ import annotations

import functools
import mimetypes
from http import HTTPStatus
from pathlib import Path

from websockets.datastructures import Headers
from websockets.http11 import Request, Response

STATIC = Path(__file__).resolve().parent / "static"
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
WILDCARD_HOSTS = ("", "0.0.0.0", "::")
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
# Every suffix the page ships, so that building the site at start never initialises `mimetypes`
# (it reads the system's type tables: tens of milliseconds, most of this module's start-up cost).
_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8",
          ".html": "text/html; charset=utf-8", ".svg": "image/svg+xml", ".md": "text/markdown",
          "": "application/octet-stream", ".LICENSE": "application/octet-stream"}  # VERSIONS, dompurify.LICENSE


def _url_name(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def page_url(host: str, port: int) -> str:
    """Where to open the page (a wildcard bind is reachable on loopback too)."""
    return f"http://{'127.0.0.1' if host in WILDCARD_HOSTS else _url_name(host)}:{port}/"


def page_origins(host: str, port: int) -> set[str]:
    """The origins the page has when served by this gateway: loopback names, and the bound host
    when it is a specific address. A wildcard bind leaves other names to gateway.allowed_origins."""
    names = set(LOOPBACK_NAMES)
    if host not in WILDCARD_HOSTS:
        names.add(_url_name(host))
    return {f"http://{name}:{port}" for name in names}


class StaticSite:
    """index.html at `/`, the other files at `/static/<name>` (vendored libraries at
    `/static/vendor/<name>`); anything else is 404."""

    def __init__(self, folder: Path = STATIC) -> None:
        self.folder = folder

    @functools.cached_property
    def files(self) -> dict[str, tuple[bytes, str]]:
        """Every file, read at the first request (not before the daemon listens: ~200 KB in 18 files)."""
        files: dict[str, tuple[bytes, str]] = {}
        for prefix, where in (("", self.folder), ("vendor/", self.folder / "vendor")):
            for path in sorted(where.iterdir()) if where.is_dir() else ():
                if path.is_file() and not path.name.startswith("."):
                    kind = _TYPES.get(path.suffix) or mimetypes.guess_type(path.name)[0] or "application/octet-stream"
                    files[prefix + path.name] = (path.read_bytes(), kind)
        return files

    def answer(self, request: Request) -> Response:
        if getattr(request, "method", "GET") != "GET":
            return self.error(HTTPStatus.METHOD_NOT_ALLOWED, "only GET is served here\n")
        path = request.path.split("?", 1)[0].split("#", 1)[0]
        if path in ("/", "/index.html"):
            name = "index.html"
        elif path.startswith("/static/"):
            name = path[len("/static/"):]
        else:
            return self.error(HTTPStatus.NOT_FOUND, "not found: the control page is at /\n")
        found = self.files.get(name)
        if found is None:
            return self.error(HTTPStatus.NOT_FOUND, "not found: the control page is at /\n")
        body, kind = found
        # The index names the scripts; never cache it, so an upgrade is seen at once. Assets are
        # revalidated too (no build step means no content hashes in their names).
        cache = "no-store" if name == "index.html" else "no-cache"
        return self.respond(HTTPStatus.OK, body, kind, cache)

    def error(self, status: HTTPStatus, text: str) -> Response:
        return self.respond(status, text.encode(), "text/plain; charset=utf-8", "no-store")

    @staticmethod
    def respond(status: HTTPStatus, body: bytes, kind: str, cache: str) -> Response:
        headers = Headers([
            ("Content-Type", kind),
            ("Content-Length", str(len(body))),
            ("Cache-Control", cache),
            ("Content-Security-Policy", CSP),
            ("X-Frame-Options", "DENY"),
            ("X-Content-Type-Options", "nosniff"),
            ("Referrer-Policy", "no-referrer"),
            ("Cross-Origin-Opener-Policy", "same-origin"),
            ("Cross-Origin-Resource-Policy", "same-origin"),
            ("Connection", "close"),
        ])
        return Response(status.value, status.phrase, headers, body)
