"""Helpers for the MCP end-to-end tests: a fake server configured through the environment."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from tests import lifeline
from tests.harness import ROOT, DaemonProcess, free_port
from tests.waiting import DEFAULT_TIMEOUT, wait_until, wait_until_async


def stdio_server_env(tmp: Path, name: str = "fake", **settings: Any) -> dict[str, str]:
    """CLAWGATE_* variables that configure tests/fakes/mcp_server.py as MCP server `name`.

    The switch files (notes, fail, extra) live in `tmp`; quick pings and restarts for tests."""
    server = {
        "command": sys.executable, "args": ["-m", "tests.fakes.mcp_server"], "cwd": str(ROOT),
        "env": {"FAKE_MCP_NOTES": str(tmp / "notes.txt"), "FAKE_MCP_FAIL": str(tmp / "fail"),
                "FAKE_MCP_EXTRA": str(tmp / "extra")},
        "ping_interval_seconds": 0.5, "restart_base_seconds": 0.2, "restart_max_seconds": 1.0,
        "startup_timeout_seconds": 60, **settings,
    }
    return {f"CLAWGATE_MCP__SERVERS__{name.upper()}": json.dumps(server), "CLAWGATE_MCP__STARTUP_WAIT_SECONDS": "60"}


async def mcp_status(daemon: DaemonProcess, name: str = "fake") -> dict[str, Any]:
    async with daemon.client() as client:
        status = await client.request("status")
    return status["mcp"][name.lower()]


async def wait_status(daemon: DaemonProcess, check: Callable[[dict[str, Any]], bool], name: str = "fake",
                      timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
    """Poll the daemon's status until the server's entry satisfies `check`."""
    async def entry() -> dict[str, Any] | None:
        found = await mcp_status(daemon, name)
        return found if check(found) else None
    return await wait_until_async(entry, f"mcp server {name} to reach the expected state", timeout=timeout,
                                  interval=0.1, describe=lambda: daemon.log_text()[-2000:])


async def wait_pending_approval(daemon: DaemonProcess, timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
    async with daemon.client() as client:
        async def first() -> dict[str, Any] | None:
            pending = (await client.request("approvals.list"))["pending"]
            return pending[0] if pending else None
        return await wait_until_async(first, "an approval request", timeout=timeout, interval=0.1)


@contextmanager
def http_server(tmp: Path, token: str) -> Iterator[str]:
    """tests/fakes/mcp_server.py serving streamable HTTP on 127.0.0.1 (bearer `token` required); yields its URL."""
    port = free_port()
    env = {**os.environ, "FAKE_MCP_NOTES": str(tmp / "notes.txt")}
    proc = subprocess.Popen([sys.executable, "-m", "tests.fakes.mcp_server", "--http", str(port), "--token", token],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    lifeline.hold(proc)  # dies with pytest, even a SIGKILLed one
    try:
        def listening() -> bool:
            assert proc.poll() is None, "the HTTP MCP server exited"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return True
            except OSError:
                return False
        wait_until(listening, "the HTTP MCP server to listen", interval=0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
