"""The control page over plain HTTP on the gateway port, and who may open a WebSocket from a page.

No browser needed: these hold on any machine. tests/e2e/test_web_e2e.py drives the page itself.
"""

from __future__ import annotations

import asyncio
import hashlib
import http.client
import json
import re

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from clawgate.gateway.web import CSP, page_origins, page_url
from tests.fakes.anthropic_api import text
from tests.harness import ROOT, TOKEN, DaemonProcess


def get(daemon: DaemonProcess, path: str, method: str = "GET") -> http.client.HTTPResponse:
    conn = http.client.HTTPConnection("127.0.0.1", daemon.port, timeout=10)
    conn.request(method, path)
    response = conn.getresponse()
    response.read()
    conn.close()
    return response


def get_body(daemon: DaemonProcess, path: str) -> tuple[http.client.HTTPResponse, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", daemon.port, timeout=10)
    conn.request("GET", path)
    response = conn.getresponse()
    body = response.read()
    conn.close()
    return response, body


def test_page_and_assets_are_served_with_strict_headers(daemon):
    response, body = get_body(daemon, "/")
    assert response.status == 200
    assert response.getheader("Content-Type") == "text/html; charset=utf-8"
    csp = response.getheader("Content-Security-Policy")
    assert "default-src 'self'" in csp and "frame-ancestors 'none'" in csp and "unsafe-inline" not in csp
    assert response.getheader("X-Frame-Options") == "DENY"
    assert response.getheader("X-Content-Type-Options") == "nosniff"
    assert response.getheader("Cache-Control") == "no-store"
    page = body.decode()
    assert '<script type="module" src="/static/app.js"></script>' in page
    assert "<script>" not in page and "onclick" not in page  # no inline script: the CSP would block it
    for asset, kind in (("app.js", "text/javascript"), ("style.css", "text/css"), ("gateway.js", "text/javascript")):
        response, body = get_body(daemon, f"/static/{asset}")
        assert response.status == 200 and response.getheader("Content-Type").startswith(kind), asset
        assert response.getheader("Content-Security-Policy") == csp and body
        assert response.getheader("Cache-Control") == "no-cache"


@pytest.mark.parametrize("path", ["/static/nope.js", "/static/../__init__.py", "/../gateway/server.py",
                                  "/static/%2e%2e/__init__.py", "/static/", "/config.toml", "/state/gateway.token"])
def test_unknown_paths_are_not_found(daemon, path):
    response = get(daemon, path)
    assert response.status == 404
    assert response.getheader("X-Frame-Options") == "DENY"


def test_only_get_is_served(daemon):
    assert get(daemon, "/", method="POST").status in (400, 405)  # never the page


async def _connect_ok(daemon: DaemonProcess, origin: str | None) -> bool:
    async with connect(daemon.url, origin=origin) as ws:
        await ws.send(json.dumps({"type": "req", "id": "1", "method": "connect", "params": {"auth": {"token": TOKEN}}}))
        return json.loads(await ws.recv())["ok"] is True


async def test_the_pages_own_origin_may_connect_and_no_other(daemon):
    for origin in (f"http://127.0.0.1:{daemon.port}", f"http://localhost:{daemon.port}"):
        assert await _connect_ok(daemon, origin), origin
    for origin in (f"http://127.0.0.1:{daemon.port + 1}", f"https://127.0.0.1:{daemon.port}", "http://evil.example",
                   f"http://evil.example:{daemon.port}", "null", f"http://127.0.0.1.evil.example:{daemon.port}"):
        with pytest.raises(InvalidStatus) as info:
            async with connect(daemon.url, origin=origin):
                pass
        assert info.value.response.status_code == 403, origin
        assert b"gateway.allowed_origins" in info.value.response.body
    assert await _connect_ok(daemon, None)  # a CLI or script sends no Origin


async def test_status_counts_token_usage(daemon, fake_model):
    """The page's usage panel reads `status.usage`: model calls and tokens today, in total, since start."""
    zero = {"calls": 0, "input_tokens": 0, "output_tokens": 0, "cache_read_input_tokens": 0,
            "cache_creation_input_tokens": 0}
    async with daemon.client() as client:
        before = (await client.request("status"))["usage"]
        assert before["today"] == before["total"] == before["sinceStart"] == zero and before["topSessions"] == []
        fake_model.enqueue(text("one", input_tokens=120, output_tokens=7), text("two", input_tokens=80, output_tokens=5))
        for question in ("first", "second"):
            await asyncio.wait_for(client.chat(question, session="usage"), 60)
        usage = (await client.request("status"))["usage"]
    for scope in ("today", "total", "sinceStart"):
        assert usage[scope]["calls"] == 2
        assert (usage[scope]["input_tokens"], usage[scope]["output_tokens"]) == (200, 12)
    assert [s["session"] for s in usage["topSessions"]] == ["usage"]


def test_page_origins_are_loopback_plus_a_specific_bind_address():
    loopback = {"http://127.0.0.1:8", "http://localhost:8", "http://[::1]:8"}
    assert page_origins("127.0.0.1", 8) == loopback
    assert page_origins("0.0.0.0", 8) == page_origins("::", 8) == loopback  # wildcard: list others in config
    assert page_origins("192.168.1.5", 8) == loopback | {"http://192.168.1.5:8"}
    assert page_url("0.0.0.0", 8) == "http://127.0.0.1:8/" and page_url("fd00::2", 8) == "http://[fd00::2]:8/"


def test_the_vendored_renderer_and_sanitizer_are_served_as_published(daemon):
    """marked and DOMPurify are plain static files (no build step): served as scripts under the
    same CSP, their licence headers intact, and the versions README names are the ones shipped."""
    readme = (ROOT / "README.md").read_text()
    versions = (ROOT / "gateway/web/static/vendor/VERSIONS").read_text()
    for asset, header in (("marked.umd.js", "marked v{v} - a markdown parser"),
                          ("purify.min.js", "@license DOMPurify {v} |")):
        name = "marked" if asset.startswith("marked") else "dompurify"
        version = re.search(rf"^{name} (\S+) ", versions, re.M).group(1)
        assert f"{name} {version}" in readme.lower(), f"README's dependency section does not name {name} {version}"
        response, body = get_body(daemon, f"/static/vendor/{asset}")
        assert response.status == 200 and response.getheader("Content-Type").startswith("text/javascript")
        assert response.getheader("Content-Security-Policy") == CSP
        assert header.format(v=version) in body[:400].decode()
        digest = hashlib.sha256(body).hexdigest()
        assert f"{digest}  {asset}" in versions, f"{asset} differs from the published file recorded in VERSIONS"
    for licence in ("marked.LICENSE.md", "dompurify.LICENSE"):
        response, body = get_body(daemon, f"/static/vendor/{licence}")
        assert response.status == 200 and b"License" in body
    assert get(daemon, "/static/vendor/../app.js").status == 404
    assert get(daemon, "/static/vendor/").status == 404
