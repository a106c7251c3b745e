"""What the outside may use of the agent: narrow services, built once by the composition root.

Channels, gateway methods and triggers receive these (or just the ones they need) instead of
the daemon, so each consumer's reach is visible in its constructor, and a new consumer
(checkpoints, a web page) plugs into the same surface.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from clawgate.config.agents import Agent, Roster, UnknownAgent

from .approvals import ApprovalBroker
from .bus import Intake
from .commands import CommandRouter
from .control import SessionControl, TaskControl
from .core.errors import Forbidden, NotFound
from .core.events import EventHub
from .health import Health

if TYPE_CHECKING:
    from .checkpoints import CheckpointService
    from .triggers.cron import CronService
    from .usage.ledger import UsageLedger


__all__ = ["DeviceLinking", "Intake", "Services"]


class DeviceLinking(Protocol):
    """Linking a chat platform's device (a WhatsApp QR code) from a gateway client: gateway/device_links.py."""

    async def start(self, conn: Any, channel: str, account: str, phone: str | None = None) -> dict[str, Any]: ...

    async def cancel(self, conn: Any, channel: str, account: str) -> dict[str, Any]: ...  # Intake is defined by the bus; consumers may keep reaching it here


@dataclass(frozen=True)
class Services:
    intake: Intake
    sessions: SessionControl
    tasks: TaskControl
    approvals: ApprovalBroker
    cron: "CronService"
    events: EventHub
    status: Health
    commands: CommandRouter
    checkpoints: "CheckpointService"
    usage: "UsageLedger | None" = None  # token usage per day and session (the `usage` method)
    agents: Roster | None = None  # the agents and bindings (config/agents.py); None: the one agent of before
    device_links: DeviceLinking | None = None  # `channels.link`: pairing a device from the web page

    def agent_key(self, session: str, agent: str | None) -> str:
        """The key of `session` of the agent named (None: the default agent, whose keys are plain);
        NotFound (one line naming the agents) for a name the config does not have."""
        return self.agent_named(agent).session_key(session) if agent else session

    def keyed_agent(self, agent: str | None) -> str | None:
        """The id that goes into the keys of the agent named: None for the default agent (plain keys)."""
        if not agent:
            return None
        found = self.agent_named(agent)
        return None if found.default else found.id

    def agent_named(self, agent: str) -> Agent:
        if self.agents is None:
            raise NotFound(f"no agent {agent!r}; this daemon runs one agent (no [agents.*] in config.toml)")
        try:
            return self.agents.get(agent)
        except UnknownAgent as exc:
            raise NotFound(str(exc)) from None

    def check_agent(self, session_key: str, agent: str | None) -> None:
        """Forbidden unless `session_key` is a session of the agent named (None: the default agent): a client
        acting for one agent never restores or forks another's checkpoints, and one that names no agent (the
        web page, `clawgate checkpoints`) reaches another agent's only by naming it (config/agents.py)."""
        if self.agents is None:
            if agent:
                self.agent_named(agent)  # NotFound: this daemon runs one agent
            return
        try:
            refusal = self.agents.refusal(session_key, agent)
        except UnknownAgent as exc:
            raise NotFound(str(exc)) from None
        if refusal is not None:
            raise Forbidden(refusal)
