"""`clawgate doctor`'s MCP checks: each configured server started once, hand-shaken, its tools counted.

Why start it rather than only look for the program: a server that is installed but crashes at
start, wants a missing variable or refuses our token fails the same way inside the daemon, where
it only shows as "down" in `clawgate status`. Streamable-HTTP servers are not contacted with
--offline; local programs are still started (no network involved).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from clawgate.config.paths import Paths
from clawgate.config.schema import Settings

PROBE_SECONDS = 30.0


def check_mcp(paths: Paths, settings: Settings, offline: bool) -> list[tuple[str, str, str, str]]:
    """(name, status, detail, fix) per configured server; nothing when none is configured."""
    workspace = Path(settings.agent.workspace).expanduser() if settings.agent.workspace else paths.default_workspace
    out: list[tuple[str, str, str, str]] = []
    if settings.mcp.servers:
        from clawgate.agent.mcp.connection import ProbeFailed, probe  # the SDK is slow to import: only when needed
    for name, server in settings.mcp.servers.items():
        label = f"mcp {name}"
        if not server.enabled:
            out.append((label, "skip", "disabled (enabled = false)", ""))
            continue
        if offline and server.url:
            out.append((label, "skip", f"{server.url} not contacted (--offline)", ""))
            continue
        quick = server.model_copy(update={"startup_timeout_seconds": min(server.startup_timeout_seconds, PROBE_SECONDS)})
        try:
            count, task_only = asyncio.run(probe(name, quick, cwd=workspace,
                                                 stderr_file=paths.logs / f"mcp-{name}.log"))
        except ProbeFailed as exc:
            out.append((label, "fail", f"did not start: {exc}",
                        f"fix mcp.servers.{name} in config.toml; the server's own messages are in "
                        f"{paths.logs / f'mcp-{name}.log'}"))
            continue
        detail = f"started and listed {count} tool(s)"
        if task_only:
            detail += (f"; {len(task_only)} more not offered to the model, they run only as MCP tasks: "
                       f"{', '.join(task_only[:5])}")
        out.append((label, "ok", detail, ""))
    return out
