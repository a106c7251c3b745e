"""What a run reaches, decided by the agent its session belongs to (config/agents.py, docs/agents.md): the
workspace and model its requests use, the checkpoints' workspace roots, the chats its `message` tool may post
into, the tools it is offered. Each is a small function of the session key that wiring.py installs; with one
agent they answer as before several agents existed."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Awaitable, Callable, Iterable, Literal, Protocol

from clawgate.agent.context.builder import AgentView
from clawgate.agent.mcp.tool import McpTool
from clawgate.agent.session import SessionManager
from clawgate.agent.tools import ToolRegistry
from clawgate.agent.usage.ledger import UsageLedger
from clawgate.config.agents import AGENT_PREFIX, Agent, AgentConfig, Place, Roster, agent_id_of, split_workspace
from clawgate.config.schema import AgentSettings
from clawgate.workspace.users import Workspaces

log = logging.getLogger(__name__)
SHARED_TIMEOUT = 2.0  # a Redis that does not answer in this long counts as away for this call


class SharedCount(Protocol):
    """A count the fleet shares (agent/fleet/counters.py `SharedCounter`)."""

    async def get(self, name: str) -> int: ...

    async def add(self, name: str, amount: int) -> int: ...


def person_root(workspaces: Workspaces, where: str) -> Path:
    """The workspace root a checkpoint key names (agent/checkpoints/service.py `workspace_of`): a person's
    in an agent's workspaces; guard() makes a guest's folder exist before their first snapshot."""
    ident, user = split_workspace(where)
    return workspaces.agent(ident).guard(user).root


def agent_place(workspaces: Workspaces, roster: Roster, agent: AgentSettings) -> Callable[[str], AgentView]:
    """A session's workspace, model, answer length and fallback models: its agent's (config/agents.py),
    `[agent]`'s and the provider's where it sets none."""
    def place(session_key: str) -> AgentView:
        ident = agent_id_of(session_key)
        known = (roster.default if ident is None else roster.agents.get(ident))
        config = known.config if known is not None else AgentConfig()
        return AgentView(workspaces.of(session_key).owner.root, config.model or agent.model,
                         config.max_tokens or agent.max_tokens, config.fallback_models)
    return place


def chat_of_agent(roster: Roster, sessions: SessionManager) -> Callable[[str, str, str], bool]:
    """Whether a run of a session may post into a chat (the `message` tool): the chat is its agent's when that
    agent already has a session of it, or when a message from it would be routed there (by the chat id as the
    peer: a binding on a Discord guild, a Slack team or a Matrix room a chat id alone cannot show is not
    matched, so such a chat is refused unless the agent has talked in it)."""
    def may_post(session_key: str, channel: str, chat_id: str) -> bool:
        mine = agent_id_of(session_key)
        own_key = f"{channel}:{chat_id}"
        if sessions.exists(own_key if mine is None else f"{AGENT_PREFIX}{mine}:{own_key}"):
            return True
        platform, _, account = channel.partition(".")
        routed = roster.route(Place(platform, account or "default", peer=chat_id))
        return (None if routed.default else routed.id) == mine
    return may_post


def uses_mcp_server(agent: Agent, server: str) -> bool:
    """Whether `agent` may be offered tools of the MCP server `server`, as `allowed_tools` decides: its
    `mcp_servers` names it, or (without that list) its `allow` names one of its tools (`mcp_<server>_…`),
    or (without either) it is the default agent."""
    own, listed = agent.config.tools.mcp_servers, agent.config.tools.allow
    if own is not None:
        return server in own
    if listed is not None:
        return any(name.startswith(f"mcp_{server}_") for name in listed)
    return agent.default


def mcp_users(roster: Roster, servers: Iterable[str]) -> dict[str, list[tuple[str | None, Path]]]:
    """Per MCP server, the agents that use it (the default agent first), each with the id its session keys
    carry and its workspace: agent/mcp/manager.py starts the server in each one's own workspace."""
    return {server: [(None if agent.default else agent.id, agent.workspace)
                     for agent in sorted(roster.agents.values(), key=lambda a: not a.default)
                     if uses_mcp_server(agent, server)]
            for server in servers}


def allowed_tools(roster: Roster, registry: ToolRegistry) -> Callable[[str, str], bool]:
    """Whether a session's agent may use a tool: its `[agents.<id>.tools] allow` list where it has one; an MCP
    server's tool only where the agent's `mcp_servers` names that server (where it sets them). Without either,
    every tool, but for another agent than the default no MCP server's (a server is somebody else's program:
    an agent gets one only by naming it). Each agent's calls go to the server's process in its own workspace
    (`mcp_users`). A session of an agent no longer configured: none."""
    allow = {ident: None if a.config.tools.allow is None else frozenset(a.config.tools.allow)
             for ident, a in roster.agents.items()}
    servers = {ident: None if a.config.tools.mcp_servers is None else frozenset(a.config.tools.mcp_servers)
               for ident, a in roster.agents.items()}

    def allowed(session_key: str, name: str) -> bool:
        ident = agent_id_of(session_key)
        agent = roster.default if ident is None else roster.agents.get(ident)
        if agent is None:
            return False
        tool = registry.get(name)
        mcp, listed, own_servers = isinstance(tool, McpTool), allow[agent.id], servers[agent.id]
        if mcp and own_servers is not None:
            return tool.server in own_servers and (listed is None or name in listed)
        if listed is not None:
            return name in listed
        return agent.default or not mcp
    return allowed


def exec_allowlist(roster: Roster) -> Callable[[str], tuple[list[str], str] | None]:
    """A session's own exec allowlist (its agent's `tools.exec_allowlist`) and the setting's name, or None for
    `tools.exec.allowlist`."""
    own = {(None if a.default else a.id): (list(a.config.tools.exec_allowlist), f"agents.{a.id}.tools.exec_allowlist")
           for a in roster.agents.values() if a.config.tools.exec_allowlist is not None}

    def allowlist(session_key: str) -> tuple[list[str], str] | None:
        return own.get(agent_id_of(session_key))
    return allowlist


def approval_mode(roster: Roster) -> Callable[[str], tuple[Literal["ask", "deny", "allow"], str] | None]:
    """A session's own approval mode (its agent's `tools.approval_mode`) and the setting's name, or None for
    `tools.approval_mode`."""
    own = {(None if a.default else a.id): (a.config.tools.approval_mode, f"agents.{a.id}.tools.approval_mode")
           for a in roster.agents.values() if a.config.tools.approval_mode is not None}

    def mode(session_key: str) -> tuple[Literal["ask", "deny", "allow"], str] | None:
        found = own.get(agent_id_of(session_key))
        return None if found is None or found[0] is None else (found[0], found[1])
    return mode


def agent_identity(roster: Roster, agent: AgentSettings) -> Callable[[str], tuple[str, str]]:
    """(name, model) of a session's agent, for /start, /status and the identity restatement: its own where it
    sets them, else `[agent]`'s."""
    def identity(session_key: str) -> tuple[str, str]:
        ident = agent_id_of(session_key)
        known = roster.default if ident is None else roster.agents.get(ident)
        config = known.config if known is not None else AgentConfig()
        return config.name or agent.name, config.model or agent.model
    return identity


class TokenBudget:
    """Why a session may not call the model now: its agent's `daily_tokens` are spent for today (the count of
    its sessions' calls, sub-agents', cron's and heartbeat's included), else None. A call already running
    finishes; the next one is refused in one line.

    Alone, the count is the ledger's (the day's stored totals at start plus this process's calls). In a
    fleet `shared` holds the fleet's count in Redis, one counter per agent per local day, added to after
    each call and read before each one; the larger of it and the ledger's is used (a Redis that lost the
    day's key still has the stored totals behind it). Redis away: the ledger's count, and one warning."""

    def __init__(self, roster: Roster, ledger: UsageLedger) -> None:
        self.ledger = ledger
        self.limits = {(None if a.default else a.id): (a.id, a.config.daily_tokens)
                       for a in roster.agents.values() if a.config.daily_tokens}
        self.shared: SharedCount | None = None
        self._shared_away = False

    def _name(self, ident: str | None) -> str:
        return f"tokens:{self.limits[ident][0]}:{self.ledger.current_day()}"

    async def refuse(self, session_key: str) -> str | None:
        ident = agent_id_of(session_key)
        if ident not in self.limits:
            return None
        name, limit = self.limits[ident]
        used = self.ledger.agent_today(ident)
        if self.shared is not None:
            fleet = await self._shared(self.shared.get(self._name(ident)))
            used = max(used, fleet or 0)
        if used < limit:
            return None
        return (f"Agent {name!r} has used its daily token budget ({used} of {limit} tokens today, "
                f"agents.{name}.daily_tokens); it answers again tomorrow, or the owner raises the limit.")

    async def spent(self, session_key: str, tokens: int) -> None:
        ident = agent_id_of(session_key)
        if self.shared is not None and ident in self.limits and tokens > 0:
            await self._shared(self.shared.add(self._name(ident), tokens))

    async def _shared(self, call: Awaitable[int]) -> int | None:
        """The fleet counter's answer, or None (and one warning until it answers again) when Redis is away."""
        try:
            value = await asyncio.wait_for(call, SHARED_TIMEOUT)
        except Exception as exc:  # noqa: BLE001 - any Redis failure: this process's own count is the fallback
            if not self._shared_away:
                log.warning("the fleet's token count is unreachable (%s); each agent's daily_tokens is checked "
                            "against this process's own count until Redis answers", type(exc).__name__)
            self._shared_away = True
            return None
        if self._shared_away:
            log.info("the fleet's token count answers again")
            self._shared_away = False
        return value


def token_budget(roster: Roster, ledger: UsageLedger) -> TokenBudget | None:
    """The token budget of the agents, or None when no agent sets `daily_tokens`."""
    budget = TokenBudget(roster, ledger)
    return budget if budget.limits else None


def heartbeat_deliver(roster: Roster, default_session: str) -> dict[str, tuple[str, str]]:
    """Each agent's heartbeat session -> (the setting's name, where its heartbeat's news goes): its own
    `heartbeat_deliver`, else "last" for another agent than the default (the default agent's, unset,
    follows `heartbeat.deliver` and is not listed)."""
    out: dict[str, tuple[str, str]] = {}
    for agent in roster.agents.values():
        target = agent.config.heartbeat_deliver or (None if agent.default else "last")
        if target is not None:
            out[agent.session_key(default_session)] = (f"agents.{agent.id}.heartbeat_deliver", target)
    return out


def check_model(roster: Roster, agent: AgentSettings, daemon_model: str | None,
                own: Literal["drift_model", "completeness_model"]) -> Callable[[str], str]:
    """The model of drift control's reflections or of the completeness check on a session's run: its agent's
    own (`drift_model` / `completeness_model`), else the daemon's (`drift.model` / `reflection.model`), else
    the agent's `model`, else `agent.model`."""
    def model(session_key: str) -> str:
        ident = agent_id_of(session_key)
        known = roster.default if ident is None else roster.agents.get(ident)
        config = known.config if known is not None else AgentConfig()
        return getattr(config, own) or daemon_model or config.model or agent.model
    return model
