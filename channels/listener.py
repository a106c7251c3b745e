"""An HTTP listener a platform calls (webhooks, button presses): one aiohttp server, started and stopped.

Written once because every listener faces the same callers: the platform, and anyone on the network who
finds the port. So each gets the same guards: aiohttp's keep-alive timer, which also runs while a
request's headers arrive and is not reset by each byte, closes a client trickling its headers after
`read_seconds`; the unread rest of a refused body is drained (so the client reads the status, not a
reset) for at most that long; no `Server` header tells a scanner which library answers; no access log
(a URL can carry a token). A port of 0 binds a free one, read back as `port`. `reuse_port` lets every
process of a fleet on one host listen on the same port (the kernel spreads the connections).
"""

from __future__ import annotations

from aiohttp import web

READ_SECONDS = 30.0
LINGER_SECONDS = 10.0  # aiohttp's default lingering_time
SHUTDOWN_SECONDS = 2.0  # a request still in flight at stop is cut; the platform resends what was not answered


async def _no_server_header(request: web.Request, response: web.StreamResponse) -> None:
    """A public endpoint does not tell scanners which HTTP library (and version) answers it."""
    response.headers.popall("Server", None)


class HttpListener:
    """`app` served on `host:port` until `close()`."""

    def __init__(self, app: web.Application, *, host: str, port: int, read_seconds: float = READ_SECONDS,
                 reuse_port: bool = False) -> None:
        self.app, self.host, self._want_port = app, host, port
        self.read_seconds = read_seconds
        self._reuse_port = reuse_port
        self._runner: web.AppRunner | None = None
        app.on_response_prepare.append(_no_server_header)

    @property
    def port(self) -> int:
        """The bound port once started (the asked one before)."""
        if self._runner is None or not self._runner.addresses:
            return self._want_port
        return int(self._runner.addresses[0][1])

    @property
    def running(self) -> bool:
        return self._runner is not None

    async def start(self) -> int:
        """Listen; returns the bound port. A port taken by another program raises OSError(EADDRINUSE)."""
        runner = web.AppRunner(self.app, access_log=None, handle_signals=False, keepalive_timeout=self.read_seconds,
                               lingering_time=min(LINGER_SECONDS, self.read_seconds), shutdown_timeout=SHUTDOWN_SECONDS)
        await runner.setup()
        try:
            await web.TCPSite(runner, self.host, self._want_port, reuse_port=self._reuse_port or None).start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        return self.port

    async def close(self) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()


__all__ = ["HttpListener", "READ_SECONDS"]
