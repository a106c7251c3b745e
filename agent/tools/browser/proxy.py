"""The gate every browser request passes: a small HTTP proxy on loopback, one per person's context.

Why a proxy and not Playwright's request interception: interception does not see the hops of a
redirect (a public page answering 302 to http://127.0.0.1:8080/admin would go through unchecked), nor
WebSockets, and Chromium would resolve the name again after the check (DNS rebinding). Here every
request, sub-request, redirect hop and WebSocket arrives as a proxy request (Playwright makes Chromium
send loopback through the proxy too), its host is resolved once and classified with web_fetch's rules
(agent/tools/netpolicy.py), and the connection goes to exactly the checked address.

A private address passes only when its host was approved for this context (the owner approved a
navigation to it, or listed it in tools.browser.allowed_private_hosts); anything else is answered
403 and recorded, so the tool can say what was refused and why.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field

from ..netpolicy import FetchProblem, Resolver, check_url, system_resolve

log = logging.getLogger(__name__)
HEAD_LIMIT = 64 * 1024
CONNECT_SECONDS = 15.0
KEPT_REFUSALS = 50


@dataclass
class Gate:
    """What one context may reach beyond the public web, and what it was refused."""

    allowed_hosts: set[str] = field(default_factory=set)  # lower-case host names or address literals
    refused: list[str] = field(default_factory=list)      # the latest refused requests, one line each
    total: int = 0                                         # refused since the context began

    def allows(self, host: str) -> bool:
        return host.lower().strip("[]").rstrip(".") in self.allowed_hosts

    def refuse(self, line: str) -> None:
        self.total += 1
        self.refused.append(line)
        del self.refused[:-KEPT_REFUSALS]  # a page firing thousands of requests cannot grow this

    def since(self, seen: int) -> list[str]:
        """The refusals after the first `seen` (as many as are kept)."""
        fresh = self.total - seen
        return self.refused[-fresh:] if fresh > 0 else []


class GateProxy:
    """One listening proxy; `gate` says which private hosts pass."""

    def __init__(self, gate: Gate, resolve: Resolver | None = None) -> None:
        self.gate = gate
        self.resolve = resolve or system_resolve
        self._server: asyncio.AbstractServer | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, limit=HEAD_LIMIT)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await self._one(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            pass
        finally:
            self._tasks.discard(task)
            with contextlib.suppress(Exception):
                writer.close()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        first, _, rest = head.partition(b"\r\n")
        method, target, version = first.decode("latin-1").split(" ", 2)
        if method == "CONNECT":
            url = f"https://{target}/"
        elif target.startswith("http://"):
            url = target
        else:
            return await _answer(writer, 400, "this proxy takes absolute http URLs and CONNECT only")
        checked = await self._check(url)
        if isinstance(checked, str):
            return await _answer(writer, 403, checked)
        addresses, port = checked
        upstream = await self._connect(addresses, port)
        if upstream is None:
            return await _answer(writer, 502, f"cannot connect to {url}")
        up_reader, up_writer = upstream
        try:
            if method == "CONNECT":
                writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                await writer.drain()
            else:
                up_writer.write(_origin_form(method, target, version, rest))
                await up_writer.drain()
            # the request body (a POST) flows up while the answer is awaited
            await _pipe_both(reader, writer, up_reader, up_writer, head=method != "CONNECT")
        finally:
            with contextlib.suppress(Exception):
                up_writer.close()

    async def _check(self, url: str) -> tuple[list[str], int] | str:
        """The addresses to connect to, or the reason the request is refused (also recorded)."""
        try:
            target = await check_url(url, self.resolve, CONNECT_SECONDS)
        except FetchProblem as exc:
            return str(exc)
        if target.private and not self.gate.allows(target.host):
            shown = url if not url.startswith("https://") else f"https://{target.host}:{target.port}"
            line = f"refused {shown}: {target.private}"
            self.gate.refuse(line)
            return line + " (only a host the owner approved for this browser may be private)"
        return target.addresses, target.port

    @staticmethod
    async def _connect(addresses: list[str], port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        for address in addresses:
            try:
                return await asyncio.wait_for(asyncio.open_connection(address, port), CONNECT_SECONDS)
            except (OSError, asyncio.TimeoutError):
                continue
        return None


def _origin_form(method: str, target: str, version: str, rest: bytes) -> bytes:
    """The request as a server expects it: path only, no proxy headers, and the connection closed after it
    (so Chromium never sends a second request, perhaps for another host, down this checked connection)."""
    after_scheme = target[len("http://"):]
    slash = after_scheme.find("/")
    path = after_scheme[slash:] if slash >= 0 else "/"
    lines = [line for line in rest.split(b"\r\n") if line]
    upgrade = any(line.lower().startswith(b"upgrade:") for line in lines)
    kept = [line for line in lines if not line.lower().startswith((b"proxy-", b"connection:", b"keep-alive:"))]
    kept.append(b"Connection: upgrade" if upgrade else b"Connection: close")
    return f"{method} {path} {version}\r\n".encode("latin-1") + b"\r\n".join(kept) + b"\r\n\r\n"


async def _relay_head(up_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """The response head with `Connection: close` (unless it switches protocols), then the body is piped."""
    head = await up_reader.readuntil(b"\r\n\r\n")
    status, _, rest = head.partition(b"\r\n")
    lines = [line for line in rest.split(b"\r\n") if line]
    if b" 101 " not in status + b" ":
        lines = [line for line in lines if not line.lower().startswith((b"connection:", b"keep-alive:"))]
        lines.append(b"Connection: close")
    writer.write(status + b"\r\n" + b"\r\n".join(lines) + b"\r\n\r\n")
    await writer.drain()


async def _pipe_both(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                     up_reader: asyncio.StreamReader, up_writer: asyncio.StreamWriter, *, head: bool) -> None:
    """Both directions until the server's side ends (the client's may only half-close); with `head`, the
    answer's head is rewritten on its way down (_relay_head)."""
    async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            while chunk := await source.read(65536):
                sink.write(chunk)
                await sink.drain()

    up = asyncio.ensure_future(pipe(reader, up_writer))
    try:
        if head:
            await _relay_head(up_reader, writer)
        await pipe(up_reader, writer)
    finally:
        up.cancel()


async def _answer(writer: asyncio.StreamWriter, status: int, text: str) -> None:
    reason = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway"}[status]
    body = f"clawgate browser: {text}\n".encode()
    writer.write(f"HTTP/1.1 {status} {reason}\r\ncontent-type: text/plain; charset=utf-8\r\n"
                 f"content-length: {len(body)}\r\nconnection: close\r\n\r\n".encode() + body)
    await writer.drain()
