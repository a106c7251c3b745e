"""Several agents in one daemon (`[agents.<id>]`) and the bindings that route chats to them (`[[bindings]]`).

Why here, beside schema.py: both are plain settings, checked once at load so a daemon never starts
with two agents claiming the default, a binding naming an agent that does not exist, or two
bindings that would tie for the same message (which would make the route depend on file order).

A config without `[agents.*]` is today's single agent: the implicit agent `main`, whose workspace
is `agent.workspace` (default $CLAWGATE_HOME/workspace) and whose sessions keep their keys, so an
existing home needs nothing. The default agent of a config with `[agents.*]` keeps that same
workspace and those same keys; every other agent lives under $CLAWGATE_HOME/agents/<id>/.
"""

# No `from __future__ import annotations` here: pydantic would compile every field's annotation text at each start.

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Literal, Mapping

from pydantic import BaseModel, ConfigDict, Field, field_validator

AGENT_ID = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
# "telegram:42", "telegram.work:42"; the user id is all after the first colon and may hold colons of its own
# (Matrix's "@alice:example.org", Teams' "29:1abc…", DingTalk's "$:LWCP_v1:$…")
_OWNER = re.compile(r"^[a-z][a-z0-9_-]*(\.[A-Za-z0-9_-]+)?:\S+$")
IMPLICIT_AGENT = "main"  # the one agent of a config without [agents.*]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class AgentToolPolicy(_Section):
    """What this agent's runs may use; unset keys mean the daemon-wide `[tools]` / `[mcp]` settings."""

    allow: list[str] | None = Field(None, description="tool names this agent may use; default: every tool")
    exec_allowlist: list[str] | None = Field(None, description=(
        "programs exec runs without asking (inside the workspace); default: tools.exec.allowlist"))
    approval_mode: Literal["ask", "deny", "allow"] | None = Field(None, description=(
        "risky calls: ask the owner, refuse, or run; default: tools.approval_mode"))
    mcp_servers: list[str] | None = Field(None, description=(
        "the [mcp.servers.*] whose tools this agent is offered (they run in the default agent's workspace); "
        "default: all of them for the default agent, none for another (unless `allow` names their tools)"))


class AgentConfig(_Section):
    """One `[agents.<id>]` section; unset keys fall back to `[agent]`."""

    default: bool = Field(False, description="the agent of every chat no binding routes elsewhere (exactly one)")
    name: str | None = Field(None, min_length=1, max_length=100, description="what it calls itself; default: agent.name")
    workspace: str | None = Field(None, description=(
        "its workspace (SOUL.md, AGENTS.md, USER.md, MEMORY.md, skills/); default: $CLAWGATE_HOME/agents/<id>/workspace, "
        "and for the default agent agent.workspace ($CLAWGATE_HOME/workspace)"))
    model: str | None = Field(None, min_length=1, description="its model; default: agent.model")
    fallback_models: list[str] | None = Field(None, description=(
        "models tried after `model` fails; default: providers.anthropic.fallback_models"))
    max_tokens: int | None = Field(None, ge=1, description="longest answer per model call; default: agent.max_tokens")
    drift_model: str | None = Field(None, min_length=1, description=(
        "model of drift control's reflections on its runs; default: drift.model, else its `model`"))
    completeness_model: str | None = Field(None, min_length=1, description=(
        "model of the completeness check of its runs; default: reflection.model, else its `model`"))
    daily_tokens: int | None = Field(None, ge=1, description=(
        "tokens per day (as `clawgate usage` counts them) its sessions may use before its model calls are "
        "refused until the next day; default: no limit"))
    heartbeat_deliver: str | None = Field(None, min_length=1, description=(
        "where its heartbeat's news (a HEARTBEAT.md beat's reply that is not HEARTBEAT_OK) goes: \"last\" (the "
        "chat its owner last talked to it from), a target like \"telegram.work:123456\", or \"none\"; default: "
        "\"last\", and for the default agent heartbeat.deliver"))
    owners: list[str] | None = Field(None, description=(
        "who owns this agent (\"<channel>:<user id>\"); default: each channel's owners"))
    tools: AgentToolPolicy = Field(default_factory=AgentToolPolicy)


class BindingMatch(_Section):
    """What a message must carry for its binding to apply; every key given must match."""

    channel: str | None = Field(None, min_length=1, description="platform name: telegram, discord, slack, matrix, email, gateway")
    account: str | None = Field(None, min_length=1, description="the channel's account (default: \"default\")")
    peer: str | None = Field(None, min_length=1, description="a DM user's id, or a group/room/channel id")
    guild: str | None = Field(None, min_length=1, description="a Discord server (guild) id")
    roles: list[str] | None = Field(None, min_length=1, description="Discord role ids: the sender has at least one of them")
    team: str | None = Field(None, min_length=1, description="a Slack workspace (team) id")
    room: str | None = Field(None, min_length=1, description="a Matrix room id")

    @field_validator("roles")
    @classmethod
    def _roles_need_text(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and not all(role.strip() for role in value):
            raise ValueError("a role id is empty; give Discord role ids (numbers)")
        return value


class Binding(_Section):
    agent: str = Field(..., min_length=1, description="the `[agents.<id>]` a matching message goes to")
    match: BindingMatch


# The keys of [agents.<id>] the daemon applies today; the others are refused at load rather than read and
# ignored (docs/agents.md).
APPLIED = frozenset({"default", "name", "workspace", "model", "max_tokens", "fallback_models", "tools", "owners",
                     "daily_tokens", "drift_model", "completeness_model", "heartbeat_deliver"})

# The order of specificity: a binding setting an earlier key beats one that does not, whatever else.
SPECIFICITY = ("peer", "room", "roles", "guild", "team", "account", "channel")


def specificity(match: BindingMatch) -> tuple[bool, ...]:
    return tuple(getattr(match, key) is not None for key in SPECIFICITY)


def describe(binding: Binding) -> str:
    """A binding as one short phrase, for errors and listings: `work <- channel=telegram account=work`."""
    keys = [f"{key}={','.join(v) if isinstance(v, list) else v}" for key in reversed(SPECIFICITY)
            if (v := getattr(binding.match, key)) is not None]
    return f"{binding.agent} <- {' '.join(keys) or 'everything'}"


def _could_tie(a: BindingMatch, b: BindingMatch) -> bool:
    """Both set the same keys and one message could match both: the same values (roles: a member
    may hold a role of each list, so any two role lists tie)."""
    if specificity(a) != specificity(b):
        return False
    return all(getattr(a, key) == getattr(b, key) for key in SPECIFICITY if key != "roles")


def problem(agents: Mapping[str, AgentConfig], bindings: list[Binding],
            mcp_servers: Iterable[str] = ()) -> str | None:
    """The first thing wrong with `[agents.*]` and `[[bindings]]` together (and an agent's `mcp_servers`
    naming a server `[mcp.servers]` does not have), as one line with the fix."""
    for ident in agents:
        if not AGENT_ID.match(ident):
            return (f"agent id {ident!r} is not valid; use 1 to 32 lowercase letters, digits, - or _, "
                    "starting with a letter (e.g. [agents.work])")
    servers = set(mcp_servers)
    for ident, agent in agents.items():
        unapplied = sorted(agent.model_fields_set - APPLIED)
        if agent.tools.mcp_servers is not None and (bad := next(
                (name for name in agent.tools.mcp_servers if name not in servers), None)) is not None:
            return (f"agents.{ident}.tools.mcp_servers names {bad!r}, which has no [mcp.servers.{bad}] section; "
                    f"use one of: {', '.join(sorted(servers)) or '(none configured)'}")
        if agent.owners is not None and (bad := next((o for o in agent.owners if not _OWNER.match(o)), None)) is not None:
            return (f"agents.{ident}.owners has {bad!r}, which is not \"<channel>:<user id>\"; "
                    "write e.g. \"telegram:123456\" (any account) or \"telegram.work:123456\" (one account)")
        if unapplied:
            return (f"agents.{ident}.{unapplied[0]} is not applied yet: in this version each agent has its own "
                    "workspace, model, tool policy, owners, daily_tokens and heartbeat_deliver, but they share "
                    "[agent]'s other settings; remove it")
    defaults = [ident for ident, agent in agents.items() if agent.default]
    if agents and len(defaults) != 1:
        which = "none is marked" if not defaults else f"{', '.join(defaults)} are all marked"
        return f"exactly one [agents.<id>] needs default = true, but {which}; set it on the agent of unrouted chats"
    known = set(agents) or {IMPLICIT_AGENT}
    for index, binding in enumerate(bindings):
        if binding.agent not in known:
            return (f"bindings[{index}] names agent {binding.agent!r}, which has no [agents.{binding.agent}] section; "
                    f"add it or use one of: {', '.join(sorted(known))}")
        if binding.match.roles is not None and binding.match.guild is None:
            return f"bindings[{index}] matches Discord roles without a guild; add guild = \"<server id>\" to its match"
        for earlier_index, earlier in enumerate(bindings[:index]):
            if _could_tie(earlier.match, binding.match):
                return (f"bindings[{earlier_index}] ({describe(earlier)}) and bindings[{index}] ({describe(binding)}) "
                        "match the same messages equally; make one more specific or remove one")
    return None


@dataclass(frozen=True)
class Agent:
    """An agent as the daemon runs it: its id, whether it is the default, its workspace and its settings."""

    id: str
    default: bool
    workspace: Path
    config: AgentConfig

    def owned_by(self, channel: str, user_id: str) -> bool:
        """Whether a sender of `channel` (a kit's name: "telegram" or "telegram.work") owns this agent by its
        `owners` ("telegram:42" any account of the platform, "telegram.work:42" that account only)."""
        platform = channel.split(".", 1)[0]
        owners = self.config.owners or []
        return f"{channel}:{user_id}" in owners or f"{platform}:{user_id}" in owners

    def session_key(self, key: str) -> str:
        """The key of one of this agent's sessions: the default agent's keys are today's keys (nothing
        migrates); another agent's carry `agent:<id>:` in front."""
        return key if self.default else f"{AGENT_PREFIX}{self.id}:{key}"


AGENT_PREFIX = "agent:"


def agent_of_key(key: str) -> tuple[str | None, str]:
    """(agent id, the key without the agent) of a session key; None for a key of the default agent."""
    if key.startswith(AGENT_PREFIX):
        ident, sep, rest = key[len(AGENT_PREFIX):].partition(":")
        if sep and AGENT_ID.match(ident) and rest:
            return ident, rest
    return None, key


def agent_id_of(key: str) -> str | None:
    """The agent a session belongs to (None: the default agent), a sub-agent's by its parent's key
    (`sub-<digest>@<parent>`, agent/jobs/subagents.py)."""
    while key.startswith("sub-") and "@" in key:
        key = key.split("@", 1)[1]
    return agent_of_key(key)[0]


def resolve(agents: Mapping[str, AgentConfig], *, home: Path, default_workspace: Path) -> dict[str, Agent]:
    """The agents the daemon runs, by id, the default first. `default_workspace` is the single-agent
    workspace (agent.workspace or $CLAWGATE_HOME/workspace): the default agent's unless it names one."""
    if not agents:
        return {IMPLICIT_AGENT: Agent(IMPLICIT_AGENT, True, default_workspace, AgentConfig(default=True))}
    resolved: dict[str, Agent] = {}
    for ident, config in sorted(agents.items(), key=lambda item: not item[1].default):
        if config.workspace:
            workspace = Path(config.workspace).expanduser()
        else:
            workspace = default_workspace if config.default else home / "agents" / ident / "workspace"
        resolved[ident] = Agent(ident, config.default, workspace.absolute(), config)
    return resolved


@dataclass(frozen=True)
class Place:
    """Where a message came from, as bindings see it: decided by the channel after access admitted it."""

    channel: str
    account: str = "default"
    peer: str | None = None  # the DM user in a private chat, else the group/room/channel
    guild: str | None = None
    roles: frozenset[str] = frozenset()
    team: str | None = None
    room: str | None = None


def matches(match: BindingMatch, place: Place) -> bool:
    for key in ("channel", "account", "peer", "guild", "team", "room"):
        wanted = getattr(match, key)
        if wanted is not None and wanted != getattr(place, key):
            return False
    return match.roles is None or bool(place.roles.intersection(match.roles))


def choose(bindings: list[Binding], place: Place, default: str) -> str:
    """The agent of a message from `place`: the most specific matching binding's, else the default.
    Ties cannot happen: `problem` refused them at load."""
    best: tuple[tuple[bool, ...], str] | None = None
    for binding in bindings:
        if matches(binding.match, place):
            rank = specificity(binding.match)
            if best is None or rank > best[0]:
                best = (rank, binding.agent)
    return best[1] if best is not None else default


class UnknownAgent(ValueError):
    """A client or a job named an agent the config does not have."""


@dataclass(frozen=True)
class Roster:
    """The agents of a daemon and the bindings between them: where a message goes, decided once at
    intake (the route is stored with the message, in its session key)."""

    agents: Mapping[str, Agent]
    bindings: tuple[Binding, ...] = ()
    heartbeat_deliver: str = "last"  # [heartbeat] deliver: the default agent's when it sets no heartbeat_deliver

    @property
    def default(self) -> Agent:
        return next(agent for agent in self.agents.values() if agent.default)

    def get(self, ident: str | None) -> Agent:
        """The agent named `ident` (None or "": the default); UnknownAgent names the known ones."""
        if not ident:
            return self.default
        if (agent := self.agents.get(ident)) is None:
            raise UnknownAgent(f"no agent {ident!r}; this daemon has: {', '.join(self.agents)}")
        return agent

    def route(self, place: Place) -> Agent:
        return self.agents[choose(list(self.bindings), place, self.default.id)]

    def of_key(self, key: str) -> Agent:
        """The agent a session key belongs to (a key naming an agent no longer configured: the default's
        rules apply to nothing, so it is refused by `get`)."""
        ident, _ = agent_of_key(key)
        return self.get(ident)

    def heartbeat_target(self, agent: Agent) -> tuple[str, str]:
        """Where `agent`'s heartbeat news goes and the setting that decides it ("default" when none does), as
        the heartbeat delivers it (gateway/agent_scope.py `heartbeat_deliver`): shown by `clawgate agents list`."""
        if agent.config.heartbeat_deliver:
            return agent.config.heartbeat_deliver, f"agents.{agent.id}.heartbeat_deliver"
        if agent.default:
            return self.heartbeat_deliver, "heartbeat.deliver"
        return "last", "default"

    def refusal(self, session_key: str, named: str | None) -> str | None:
        """Why a client acting for the agent `named` (None: a client that named none, which acts for the
        default agent) may not touch `session_key` (a checkpoint's session, a fork's new session), or None.
        Only naming a session's own agent reaches it: a bare checkpoint id or session key never crosses."""
        acting = self.get(named)
        owner = agent_id_of(session_key)
        if owner == (None if acting.default else acting.id):
            return None
        whose = self.default.id if owner is None else owner
        if named:
            return f"session {session_key!r} belongs to another agent ({whose!r}) than {named!r}; name its own agent"
        return (f"session {session_key!r} belongs to agent {whose!r}, not the default agent; "
                f"name it to act on it (--agent {whose}, or `agent` in the request)")

    @classmethod
    def single(cls, workspace: Path) -> "Roster":
        """Today's one agent, for callers built without a config (tests, tools)."""
        return cls({IMPLICIT_AGENT: Agent(IMPLICIT_AGENT, True, workspace, AgentConfig(default=True))})


def workspace_of(session_key: str, user: str) -> str:
    """Which workspace a session's person works in, as `roots` is asked: the person's key for the default
    agent (as before several agents), `agent:<id>:<person>` for another agent's session (config/agents.py)."""
    ident = agent_id_of(session_key)
    return user if ident is None else f"{AGENT_PREFIX}{ident}:{user}"


def split_workspace(where: str) -> tuple[str | None, str]:
    """(agent id or None for the default agent, person) of a `workspace_of` key."""
    if where.startswith(AGENT_PREFIX):
        ident, sep, user = where[len(AGENT_PREFIX):].partition(":")
        if sep and ident:
            return ident, user
    return None, where


def as_table(config: AgentConfig) -> dict[str, Any]:
    """An agent's section as written to config.toml: only the keys that are set."""
    return config.model_dump(exclude_none=True, exclude_defaults=True)


__all__ = ["AGENT_ID", "AGENT_PREFIX", "Agent", "AgentConfig", "AgentToolPolicy", "Binding", "BindingMatch",
           "IMPLICIT_AGENT", "Place", "Roster", "UnknownAgent", "SPECIFICITY", "agent_id_of", "agent_of_key", "as_table", "choose", "describe", "matches", "problem", "resolve",
           "specificity", "split_workspace", "workspace_of"]
