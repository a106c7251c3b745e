"""One MCP connection in-process against the real fake server process: timeouts, stop, and
that the daemon does not load the SDK unless a server is configured."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest

from clawgate.agent.mcp.connection import McpConnection
from clawgate.agent.tools import ToolError
from clawgate.config.mcp import McpServerSettings
from tests.harness import ROOT
from tests.waiting import DEFAULT_TIMEOUT, wait_until_async


def fake_settings(tmp_path: Path, **extra: Any) -> McpServerSettings:
    return McpServerSettings(command=sys.executable, args=["-m", "tests.fakes.mcp_server"], cwd=str(ROOT),
                             env={"FAKE_MCP_NOTES": str(tmp_path / "notes.txt")}, startup_timeout_seconds=60, **extra)


def servers() -> list[psutil.Process]:
    return [p for p in psutil.Process().children(recursive=True) if "tests.fakes.mcp_server" in " ".join(p.cmdline())]


async def test_a_slow_call_times_out_with_unknown_outcome_and_the_server_stays_usable(tmp_path) -> None:
    listed: list[list[Any]] = []
    conn = McpConnection("fake", fake_settings(tmp_path, call_timeout_seconds=1), cwd=tmp_path,
                         stderr_file=tmp_path / "logs/mcp-fake.log", on_tools=lambda c, tools: listed.append(tools))
    conn.start()
    try:
        await asyncio.wait_for(conn.first_try(), 90)
        assert conn.state == "up" and "sleep" in {t.name for t in listed[0]}
        with pytest.raises(ToolError) as raised:
            await conn.call("sleep", {"seconds": 10 * DEFAULT_TIMEOUT})  # still running when the stop comes
        assert "did not answer sleep within 1 s" in raised.value.problem and "outcome is unknown" in raised.value.problem
        result = await conn.call("add", {"a": 2, "b": 40})
        assert result.content[0].text == "42" and conn.state == "up"
        [process] = servers()
    finally:
        await asyncio.wait_for(conn.stop(), DEFAULT_TIMEOUT)  # a server busy in a call does not hold the stop
    assert conn.state == "stopped" and conn.down_message().startswith("MCP server fake is stopped")
    process.wait(15)  # the server process ended with the connection
    assert not servers()
    assert (tmp_path / "logs/mcp-fake.log").stat().st_mode & 0o077 == 0


def test_the_daemon_does_not_import_the_sdk_without_servers() -> None:
    """Importing the SDK costs seconds on a loaded machine; a daemon without MCP servers must not pay."""
    code = "import sys, clawgate.gateway.app, clawgate.gateway.doctor; print(any(m == 'mcp' or m.startswith('mcp.') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "False", out.stderr


async def test_a_tool_list_changed_notification_is_followed(tmp_path) -> None:
    listed: list[set[str]] = []
    conn = McpConnection("fake", fake_settings(tmp_path), cwd=tmp_path, stderr_file=tmp_path / "mcp.log",
                         on_tools=lambda c, tools: listed.append({t.name for t in tools}))
    conn.start()
    try:
        await asyncio.wait_for(conn.first_try(), 90)
        assert "multiply" not in listed[-1]
        await conn.call("grow", {})
        await wait_until_async(lambda: "multiply" in listed[-1], "the re-read tool list", describe=lambda: repr(listed))
        assert (await conn.call("multiply", {"a": 6, "b": 7})).content[0].text == "42"
        assert conn.state == "up" and conn.restarts == 0  # read again without a restart
    finally:
        await conn.stop()
