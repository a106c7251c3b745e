"""One MCP server: connect, list its tools, watch it, restart it with backoff when it dies.

Why one long-lived task per server: the SDK's transports are context managers with task groups
inside, which must be entered and left by the same task. The supervisor task owns the connection
from start to stop; tool calls from agent runs only send requests on the session it holds.

A server that dies is noticed by a failed call (the connection closed) or a failed ping, then
restarted after 1, 2, 4 … seconds (capped). Meanwhile its tools stay registered and answer with a
clear "down, restarting" error. Each (re)connection lists the tools again, and so does a
tools/list_changed notification, so a changed tool list is picked up. Nothing here can stop the daemon: failures become a log line and a status entry.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import IO, Any, Callable, Literal
from urllib.parse import urlsplit

from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client  # the SDK's client defaults (timeouts); tested by the HTTP e2e test
from mcp.shared.exceptions import MCPError
from mcp.types import CONNECTION_CLOSED, REQUEST_TIMEOUT, PaginatedRequestParams, ToolListChangedNotification

from clawgate.config.mcp import McpServerSettings

from ..tools.base import ToolError
from ..trust.untrusted import wrap_untrusted
from .tool import needs_task

log = logging.getLogger(__name__)

State = Literal["starting", "up", "down", "stopped"]
LOG_CAP_BYTES = 1_000_000  # a server's stderr file is started afresh past this


class McpConnection:
    def __init__(self, name: str, settings: McpServerSettings, *, cwd: Path, stderr_file: Path,
                 on_tools: Callable[["McpConnection", list[Any]], None]) -> None:
        """`on_tools` is told the server's tool list after every (re)connection."""
        self.name, self.settings = name, settings
        self.cwd, self.stderr_file = cwd, stderr_file
        self.on_tools = on_tools
        self.state: State = "starting"
        self.error = ""  # why it is down, one line (never headers or env values)
        self.attempt = 0  # tries since the last successful connection
        self.restarts = 0  # successful reconnections after the first start
        self.tool_count = 0
        self.session: ClientSession | None = None
        self._ever_up = False
        self._http_status = 0
        self._lost = asyncio.Event()
        self._relist = asyncio.Event()  # the server said its tool list changed
        self._stopping = asyncio.Event()
        self._first_try = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    # lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        self._task = asyncio.create_task(self._supervise(), name=f"mcp {self.name}")

    async def first_try(self) -> None:
        """Returns once the first connection attempt succeeded or failed."""
        await self._first_try.wait()

    async def stop(self, timeout: float = 10.0) -> None:
        """Close the session and end the server (stdin closed, then signals, by the SDK)."""
        self._stopping.set()
        task = self._task
        if task is None:
            return
        try:
            await asyncio.wait_for(asyncio.shield(task), timeout)
        except asyncio.TimeoutError:
            log.warning("mcp server %s did not stop within %g s; cancelling", self.name, timeout)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        self.state = "stopped"

    async def _supervise(self) -> None:
        while True:
            try:
                await self._connect_and_serve()  # returns when a connected server is lost, or on stop
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # one line, never a traceback: it is the server's problem, not ours
                error = self.explain(exc)
                # A server that keeps failing the same way is logged once, then every 10th try.
                if not self._stopping.is_set() and (error != self.error or self.attempt % 10 == 0):
                    log.error("mcp server %s did not %s: %s", self.name, "restart" if self._ever_up else "start", error)
                self.error = error
            finally:
                self.session = None
                self._first_try.set()
            if self._stopping.is_set():
                return
            self.state = "down"
            self.attempt += 1
            # (the exponent is capped: a server down for days must not overflow the float)
            delay = min(self.settings.restart_base_seconds * 2 ** min(self.attempt - 1, 30),
                        self.settings.restart_max_seconds)
            log.debug("mcp server %s: restart attempt %d in %.1f s", self.name, self.attempt, delay)
            try:
                await asyncio.wait_for(self._stopping.wait(), delay)
                return
            except asyncio.TimeoutError:
                pass

    async def _connect_and_serve(self) -> None:
        async with AsyncExitStack() as stack:
            session = await self.open(stack)
            tools = await self.list_tools(session)
            self.on_tools(self, tools)
            self.tool_count = len(tools)
            if self._ever_up:
                self.restarts += 1
            was = self.attempt
            self._ever_up, self.attempt, self.error = True, 0, ""
            self._lost.clear()
            self.session, self.state = session, "up"
            self._first_try.set()
            log.info("mcp server %s up with %d tool(s)%s", self.name, len(tools),
                     f" (restart attempt {was})" if was else "")
            await self._watch(session)
            self.session = None
            if not self._stopping.is_set():
                self.state = "down"
                self.error = self.error or "the connection was lost"
                log.error("mcp server %s is down: %s", self.name, self.error)

    async def open(self, stack: AsyncExitStack) -> ClientSession:
        """Start (or reach) the server and hand-shake; everything it opened closes with `stack`."""
        settings = self.settings
        self._http_status = 0
        if settings.command is not None:
            command = settings.command
            if shutil.which(command) is None and not Path(command).is_file():
                raise FileNotFoundError(f"command {command!r} not found on PATH")
            params = StdioServerParameters(command=command, args=settings.args, env=settings.env or None,
                                           cwd=str(Path(settings.cwd).expanduser()) if settings.cwd else str(self.cwd))
            read, write = await stack.enter_async_context(stdio_client(params, errlog=self._errlog(stack)))
        else:
            assert settings.url is not None
            http = create_mcp_http_client(headers=dict(settings.headers) or None)
            http.event_hooks["response"].append(self._note_status)
            await stack.enter_async_context(http)
            read, write = await stack.enter_async_context(streamable_http_client(settings.url, http_client=http))
        # The session's default request timeout bounds the handshake, the listing and pings.
        session = await stack.enter_async_context(
            ClientSession(read, write, read_timeout_seconds=settings.startup_timeout_seconds,
                          message_handler=self._on_message))
        await session.initialize()
        return session

    async def _on_message(self, message: Any) -> None:
        """Server notifications: a changed tool list is read again by the watcher."""
        if isinstance(message, ToolListChangedNotification):
            self._relist.set()

    def explain(self, exc: BaseException) -> str:
        """One line about a failed start: for an HTTP server, the status it answered and its URL
        (without query or credentials), which the SDK's own error leaves out."""
        text = describe(exc, self.settings)
        if self.settings.url is None:
            return text
        where = public_url(self.settings.url)
        if self._http_status:
            return f"{text} (HTTP {self._http_status} from {where})"
        return f"{text} ({where})"

    async def _note_status(self, response: Any) -> None:
        """Remember a refusal (401, 403, 5xx): the SDK reports it only as "an error response"."""
        if response.status_code >= 400:
            self._http_status = response.status_code

    async def list_tools(self, session: ClientSession) -> list[Any]:
        tools: list[Any] = []
        cursor: str | None = None
        for _ in range(100):  # a server paging forever must not hang the start
            page = await session.list_tools(params=PaginatedRequestParams(cursor=cursor) if cursor else None)
            tools += page.tools
            cursor = page.next_cursor
            if not cursor:
                break
        return tools

    async def _watch(self, session: ClientSession) -> None:
        """Return when the server is gone (a call saw the connection close, a ping failed) or on stop."""
        interval = self.settings.ping_interval_seconds
        while not self._stopping.is_set():
            waiters = [asyncio.ensure_future(e.wait()) for e in (self._stopping, self._lost, self._relist)]
            done, pending = await asyncio.wait(waiters, timeout=interval, return_when=asyncio.FIRST_COMPLETED)
            for waiter in pending:
                waiter.cancel()
            if self._stopping.is_set() or self._lost.is_set():
                return
            if self._relist.is_set():
                self._relist.clear()
                try:
                    tools = await self.list_tools(session)
                except Exception as exc:
                    log.warning("mcp server %s: could not read its changed tool list: %s", self.name,
                                describe(exc, self.settings))
                    continue
                self.on_tools(self, tools)
                self.tool_count = len(tools)
                log.info("mcp server %s: tool list changed, %d tool(s)", self.name, len(tools))
                continue
            try:
                await session.send_ping()
            except Exception as exc:
                self.error = f"it stopped answering ({describe(exc, self.settings)})"
                return

    def _errlog(self, stack: AsyncExitStack) -> IO[str]:
        """The server's stderr goes to its own file (logs/mcp-<name>.log), not into the daemon's log."""
        path = self.stderr_file
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        mode = "w" if path.exists() and path.stat().st_size > LOG_CAP_BYTES else "a"
        handle = open(path, mode, encoding="utf-8")
        path.chmod(0o600)
        stack.callback(handle.close)
        return handle

    # calls -------------------------------------------------------------------------------
    def down_message(self) -> str:
        """Empty when calls can go through; else the one line the model gets instead of a result."""
        if self.session is not None and self.state == "up":
            return ""
        if self.state == "stopped":
            return f"MCP server {self.name} is stopped (the daemon is shutting down)"
        if self.state == "starting":
            return f"MCP server {self.name} is still starting; try again in a moment"
        return (f"MCP server {self.name} is down, restarting (attempt {max(self.attempt, 1)}); try again later"
                + (f". Last error: {self.error}" if self.error else ""))

    async def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        session = self.session
        if session is None:
            raise ToolError(self.down_message() or f"MCP server {self.name} is not connected")
        started = time.monotonic()
        try:
            return await session.call_tool(tool, arguments, read_timeout_seconds=self.settings.call_timeout_seconds)
        except MCPError as exc:
            if exc.error.code == CONNECTION_CLOSED:
                if self.session is session:  # not a connection that was already replaced
                    self.error = f"it exited or closed the connection during a call to {tool}"
                    self.state = "down"
                    self._lost.set()
                raise ToolError(f"MCP server {self.name} stopped while handling this call, so its outcome is "
                                "unknown; it is restarting",
                                "check whether the call had its effect before running it again, once the "
                                "server is back") from None
            if exc.error.code == REQUEST_TIMEOUT or time.monotonic() - started >= self.settings.call_timeout_seconds:
                raise ToolError(f"MCP server {self.name} did not answer {tool} within "
                                f"{self.settings.call_timeout_seconds:g} s; its outcome is unknown",
                                "check its effect before retrying") from None
            # the server wrote this message: data, like its results
            raise ToolError(f"MCP server {self.name} refused the call to {tool}:\n"
                            + wrap_untrusted(f"mcp {self.name}.{tool}", exc.error.message[:1000])) from None
        except Exception as exc:  # the transport failed (HTTP errors, an unexpected answer): one line, no traceback
            log.warning("mcp server %s: call to %s failed: %s", self.name, tool, describe(exc, self.settings))
            raise ToolError(f"MCP server {self.name}: the call to {tool} failed ({describe(exc, self.settings)}); "
                            "its outcome is unknown", "check its effect before retrying") from None

    def snapshot(self) -> dict[str, Any]:
        out: dict[str, Any] = {"state": self.state, "tools": self.tool_count, "restarts": self.restarts,
                               "transport": "stdio" if self.settings.command else "http"}
        if self.state != "up" and self.attempt:
            out["attempt"] = self.attempt
        if self.error:
            out["error"] = self.error
        return out


class ProbeFailed(Exception):
    """A server did not start for `clawgate doctor`; the text is the one line to show."""


async def probe(name: str, settings: McpServerSettings, *, cwd: Path, stderr_file: Path) -> tuple[int, list[str]]:
    """Start the server once, hand-shake and list its tools, then stop it (`clawgate doctor`).
    Returns the number of tools offered to the model and the names of those skipped because they
    can only run as MCP tasks; raises ProbeFailed with the line the daemon would log."""
    connection = McpConnection(name, settings, cwd=cwd, stderr_file=stderr_file, on_tools=lambda c, t: None)
    try:
        async with AsyncExitStack() as stack:
            session = await connection.open(stack)
            tools = await connection.list_tools(session)
    except Exception as exc:
        raise ProbeFailed(connection.explain(exc)) from None
    allowed = None if settings.tools is None else set(settings.tools)
    listed = [tool for tool in tools if allowed is None or tool.name in allowed]
    task_only = [tool.name for tool in listed if needs_task(tool)]
    return len(listed) - len(task_only), task_only


def public_url(url: str) -> str:
    """The URL to show: scheme, host, port and path; user info, query and fragment can hold secrets."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path}"


def describe(exc: BaseException, settings: McpServerSettings) -> str:
    """One line about a failure, without header or env values (masked again by the log filter)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, FileNotFoundError):
        text = str(exc) if "not found on PATH" in str(exc) else f"command {settings.command!r} not found"
        return f"{text}; install it or fix mcp.servers.<name>.command"
    if isinstance(exc, MCPError):
        text = exc.error.message
    else:
        text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    for secret in [*settings.headers.values(), *settings.env.values()]:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "***")
    return " ".join(text.split())[:300]

