"""A tiny MCP server for tests, written with the official SDK's server API (MCPServer).

Why a real server: the daemon talks to it through the real `mcp` client over a real pipe (or
real HTTP on 127.0.0.1), so the handshake, tool listing, calls, a process dying mid-session and
a restart are exercised exactly as with a server a user installs.

Tools: add(a, b); write_note(text) appends a line to $FAKE_MCP_NOTES; echo(text) returns text
verbatim (hostile content for the untrusted-data wrapper); sleep(seconds) answers late; crash() exits
the process at once; grow() adds a `multiply` tool while running and notifies the client.

Switches (files, so a test can flip them while the daemon runs):
- $FAKE_MCP_FAIL: when this file exists the server exits at start (a server that cannot start);
- $FAKE_MCP_EXTRA: when this file exists at start, a `multiply` tool is offered too (a tool
  list that changes across a restart).
- $FAKE_MCP_TASKS=1: two more tools, `long_report` declared with `execution.taskSupport`
  "required" (callable only as an MCP task) and `quick_report` with "optional".
- $FAKE_MCP_WHERE=1: one more tool, `where`, answering the server's working folder (which workspace
  the daemon started it in).

Run: `python -m tests.fakes.mcp_server` (stdio) or `... --http PORT [--token T]` (streamable
HTTP on 127.0.0.1; with --token every request must carry `Authorization: Bearer T`).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import Tool, ToolExecution


class _Server(MCPServer):
    """Lists some tools with a declared task support, which MCPServer's decorator cannot set."""

    task_support: dict[str, str] = {}

    async def list_tools(self) -> list[Tool]:
        tools = await super().list_tools()
        return [t.model_copy(update={"execution": ToolExecution(task_support=self.task_support[t.name])})
                if t.name in self.task_support else t for t in tools]


def build() -> MCPServer:
    server = _Server("fake-tools")

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @server.tool()
    def write_note(text: str) -> str:
        """Append a note to the notes file."""
        with open(os.environ["FAKE_MCP_NOTES"], "a", encoding="utf-8") as notes:
            notes.write(text + "\n")
        return f"noted: {text}"

    @server.tool()
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @server.tool()
    async def sleep(seconds: float) -> str:
        """Wait, then answer (a slow tool)."""
        await anyio.sleep(seconds)
        return f"slept {seconds}"

    @server.tool()
    def crash() -> str:
        """Exit the server process at once, as a crash would."""
        os._exit(3)

    def multiply(a: int, b: int) -> int:
        """Multiply two integers."""
        return a * b

    extra = os.environ.get("FAKE_MCP_EXTRA")
    if extra and Path(extra).exists():
        server.add_tool(multiply)

    if os.environ.get("FAKE_MCP_TASKS") == "1":
        @server.tool()
        def long_report(topic: str) -> str:
            """Write a long report (a task-only tool: it must be called as an MCP task)."""
            return f"report on {topic}"

        @server.tool()
        def quick_report(topic: str) -> str:
            """Write a short report (may be called as a task or directly)."""
            return f"short report on {topic}"

        server.task_support = {"long_report": "required", "quick_report": "optional"}

    if os.environ.get("FAKE_MCP_WHERE") == "1":
        @server.tool()
        def where() -> str:
            """The folder this server runs in."""
            return f"cwd={os.getcwd()}"

    @server.tool()
    async def grow(ctx: Context) -> str:
        """Offer one more tool (multiply) from now on, and tell the client its tool list changed."""
        server.add_tool(multiply)
        await ctx.session.send_tool_list_changed()
        return "multiply added"

    return server


class _RequireBearer:
    """ASGI wrapper: 401 unless the request carries the expected bearer token."""

    def __init__(self, app: Any, token: str) -> None:
        self.app, self.expected = app, f"Bearer {token}".encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != self.expected:
            await send({"type": "http.response.start", "status": 401, "headers": [(b"content-length", b"0")]})
            await send({"type": "http.response.body", "body": b""})
            return
        await self.app(scope, receive, send)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, help="serve streamable HTTP on 127.0.0.1:PORT instead of stdio")
    parser.add_argument("--token", help="with --http: require this bearer token")
    args = parser.parse_args(argv)
    fail = os.environ.get("FAKE_MCP_FAIL")
    if fail and Path(fail).exists():
        print("fake mcp server: refusing to start (FAKE_MCP_FAIL exists)", file=sys.stderr)
        return 2
    server = build()
    if args.http is None:
        server.run()
        return 0
    import uvicorn

    app: Any = server.streamable_http_app(host="127.0.0.1")
    if args.token:
        app = _RequireBearer(app, args.token)
    config = uvicorn.Config(app, host="127.0.0.1", port=args.http, log_level="warning")
    anyio.run(uvicorn.Server(config).serve)
    return 0


if __name__ == "__main__":
    sys.exit(main())
