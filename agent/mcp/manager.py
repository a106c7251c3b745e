"""All configured MCP servers: started with the daemon, their tools kept in the registry.

Why the registry is updated here rather than at build time: a server's tools are only known once
it runs, and may change when it restarts. Tools of a server that is down stay registered (they
answer "down, restarting"), so the model's tool list does not flicker with every crash; a tool
the restarted server no longer offers is removed, a new one added. A tool that can only be called
as an MCP task (`execution.taskSupport` "required") is never offered: clawgate calls tools directly,
and such a call would fail every time.

With several agents (docs/agents.md) a program clawgate starts without a configured `cwd` runs once per
agent that uses it, in that agent's workspace, and an agent's call goes to its own process: one agent's
server never reaches another's files. The registry holds each tool once (the first agent's process lists
them); a server reached by URL, or given its own `cwd`, is one process for all.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from clawgate.config.loader import is_secret_path
from clawgate.config.mcp import McpSettings

from ..core.redact import register_secrets
from ..tools.registry import ToolRegistry
from .tool import McpTool, needs_task, tool_name

if TYPE_CHECKING:
    from .connection import McpConnection

log = logging.getLogger(__name__)


AgentPlace = tuple["str | None", Path]  # (the agent's id in session keys, None the default; its workspace)


class McpManager:
    def __init__(self, settings: McpSettings, registry: ToolRegistry, *, workspace: Path, logs: Path,
                 users: Mapping[str, Sequence[AgentPlace]] | None = None) -> None:
        """`workspace`: a stdio server's default working folder; `logs`: where each server's stderr goes;
        `users`: per server, the agents whose runs may call it, the first one's process listing the tools
        (None: the one agent of `workspace` uses every server; a server no agent uses is not started)."""
        self.settings = settings
        self.registry = registry
        self.connections: dict[str, McpConnection] = {}  # the process whose tool list the registry holds
        self.by_agent: dict[str, dict[str | None, McpConnection]] = {}  # server -> agent id -> its process
        self._names: dict[str, dict[str, str]] = {}  # server -> its tool -> registered name
        self._task_only: dict[str, set[str]] = {}  # server -> tools skipped as task-only (warned once)
        for name, server in settings.servers.items():
            register_secrets(server.headers.values())
            register_secrets(v for k, v in server.env.items() if is_secret_path([k]))
            places = list(users.get(name, ())) if users is not None else [(None, workspace)]
            if server.enabled and places:
                self._connect(name, server, places, logs)

    def _connect(self, name: str, server: Any, places: list[AgentPlace], logs: Path) -> None:
        # The SDK takes seconds to import on a loaded machine: only a daemon that uses it pays.
        from .connection import McpConnection

        shared = server.command is None or server.cwd is not None  # nothing of a workspace is its folder
        first_agent, first_workspace = places[0]
        first = McpConnection(name, server, cwd=first_workspace, stderr_file=logs / f"mcp-{name}.log",
                              on_tools=self._sync_tools)
        self.connections[name] = first
        self.by_agent[name] = {first_agent: first}
        for agent, workspace in places[1:]:
            self.by_agent[name][agent] = first if shared else McpConnection(
                name, server, cwd=workspace, stderr_file=logs / f"mcp-{name}.{agent or 'default'}.log",
                on_tools=lambda connection, tools: None)

    def _all(self) -> list["McpConnection"]:
        return list({id(c): c for server in self.by_agent.values() for c in server.values()}.values())

    async def start(self) -> None:
        """Start every server; wait (bounded) for their first try, so the first messages see their tools."""
        if not self.connections:
            return
        for connection in self._all():
            connection.start()
        firsts = [asyncio.ensure_future(c.first_try()) for c in self._all()]
        _, pending = await asyncio.wait(firsts, timeout=self.settings.startup_wait_seconds)
        for waiter in pending:
            waiter.cancel()
        slow = sorted({c.name for c in self._all() if c.state == "starting"})
        if slow:
            log.warning("mcp server(s) %s still starting after %g s; their tools appear once they are up",
                        ", ".join(slow), self.settings.startup_wait_seconds)

    async def stop(self) -> None:
        await asyncio.gather(*(c.stop() for c in self._all()), return_exceptions=True)

    def _sync_tools(self, connection: McpConnection, listed: list[Any]) -> None:
        """Register what the server offers now (within the allow-list); drop what it no longer offers."""
        server = connection.settings
        allowed = None if server.tools is None else set(server.tools)
        previous = self._names.get(connection.name, {})
        current: dict[str, str] = {}
        taken = set(self.registry.names) - set(previous.values())
        for remote in listed:
            if allowed is not None and remote.name not in allowed:
                continue
            if needs_task(remote):
                if remote.name not in self._task_only.setdefault(connection.name, set()):
                    log.warning("mcp server %s: tool %r skipped: it can only be called as an MCP task "
                                "(execution.taskSupport = required), which clawgate does not support",
                                connection.name, remote.name[:80])
                    self._task_only[connection.name].add(remote.name)
                continue
            schema = remote.input_schema if isinstance(remote.input_schema, dict) else {}
            if schema.get("type") != "object":
                log.warning("mcp server %s: tool %r skipped: its input schema is not an object", connection.name,
                            remote.name[:80])
                continue
            name = previous.get(remote.name) or tool_name(connection.name, remote.name, taken)
            taken.add(name)
            current[remote.name] = name
            self.registry.add(McpTool(name=name, server=connection.name, remote=remote.name,
                                      description=remote.description or "", schema=schema, settings=server,
                                      connection=connection, by_agent=self.by_agent.get(connection.name)))
        for remote, name in previous.items():
            if remote not in current:
                self.registry.remove(name)
        if allowed:
            missing = sorted(allowed - {t.name for t in listed})
            if missing:
                log.warning("mcp server %s does not offer %s (named in mcp.servers.%s.tools)", connection.name,
                            ", ".join(missing), connection.name)
        self._names[connection.name] = current

    def status(self) -> dict[str, Any]:
        """For `clawgate status`: each configured server, up or down, its tools and restarts."""
        out: dict[str, Any] = {}
        for name, server in self.settings.servers.items():
            connection = self.connections.get(name)
            out[name] = connection.snapshot() if connection else {"state": "disabled" if not server.enabled
                                                                  else "unused: no agent lists it"}
            if connection:
                out[name]["tools"] = len(self._names.get(name, {}))
                out[name]["agents"] = {agent or "": c.state for agent, c in self.by_agent[name].items()}
        return out
