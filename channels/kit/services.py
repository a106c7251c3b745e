"""What the agent lends a channel: `ChannelServices`, filled by the composition root (gateway/chat_channels.py)
from the agent's Services. No channel imports the agent's command or session modules (an import-linter
contract in pyproject.toml); the kit and its intake reach the agent only through this.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Protocol

from clawgate.agent.bus import Intake as Inbox
from clawgate.agent.core.events import EventHub
from clawgate.config.agents import Agent, Place
from clawgate.workspace.users import Workspaces


class CommandHandler(Protocol):
    """The agent's command router as a channel calls it: the reply to `/name args`, or None when the
    run's own answer follows ("Stopped.")."""

    def __call__(self, name: str, key: str, args: str, user: str | None, *, shared: bool = False,
                 reply_to: str | None = None, extra: list[tuple[str, str]] | None = None) -> str | None: ...


@dataclass(frozen=True)
class ChannelServices:
    """What channels may use of the agent: one narrow surface, built by the composition root."""

    intake: Inbox
    commands: CommandHandler
    command_list: list[tuple[str, str]]
    check_session_key: Callable[[str], str]
    resolve_approval: Callable[[str, bool], bool]
    events: EventHub
    busy: Callable[[str], bool]
    workspace: Path | None = None  # the owner's workspace (received files go to its files_dir)
    workspaces: Workspaces | None = None  # guests' own workspaces
    owner_shared_session: bool = False
    # which agent a chat's messages go to (config/agents.py Roster.route); None: the one agent of before
    route: Callable[[Place], Agent] | None = None
    # the agent a session key belongs to (Roster.of_key); None: the one agent of before
    agent_of_key: Callable[[str], Agent] | None = None


__all__ = ["ChannelServices", "CommandHandler"]
