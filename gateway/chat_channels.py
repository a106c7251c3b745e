"""Building the chat channels: the `[channels.<name>]` sections through the channel registry.

The one place that lends the channels what they may use of the agent (channels/kit/kit.py
`ChannelServices`): the kit never imports the agent's command or session modules itself.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clawgate.agent.commands import COMMANDS
from clawgate.agent.core.redact import register_secrets
from clawgate.agent.services import Services
from clawgate.agent.session import check_session_key
from clawgate.config.loader import ConfigError
from clawgate.config.schema import ChannelSettings
from clawgate.workspace.users import Workspaces

if TYPE_CHECKING:  # the kit is imported when a chat channel is configured (build), not by a daemon without one
    from clawgate.channels.kit.kit import ChannelServices
    from clawgate.channels.kit.registry import Built

SECRET_WORDS = ("token", "secret", "password", "key")


def channel_services(services: Services, settings: ChannelSettings, *, workspace: Path | None,
                     workspaces: Workspaces | None) -> ChannelServices:
    from clawgate.channels.kit.kit import ChannelServices

    commands = services.commands
    return ChannelServices(
        intake=services.intake,
        commands=lambda name, key, args, user, **how: commands.handle(name, key, args, user=user, **how),
        command_list=list(COMMANDS), check_session_key=check_session_key,
        # late-bound: a fleet replaces approvals.resolve with one that reaches the run's process
        resolve_approval=lambda approval_id, approved: services.approvals.resolve(approval_id, approved),
        events=services.events, busy=services.sessions.busy,
        workspace=workspace, workspaces=workspaces, owner_shared_session=settings.owner_shared_session,
        route=services.agents.route if services.agents is not None else None,
        agent_of_key=services.agents.of_key if services.agents is not None else None)


def sections(settings: ChannelSettings) -> dict[str, Any]:
    """The channel sections to build: Telegram's when it could be on (a token, or `enabled` set: then
    its adapter says why it is off), and every other `[channels.<name>]` table unless `enabled = false`."""
    out: dict[str, Any] = {}
    telegram = settings.telegram
    if telegram.enabled is not False and (telegram.token or telegram.enabled) or telegram.accounts:
        out["telegram"] = telegram
    for name, table in settings.sections().items():
        out[name] = table
    return out


def build(settings: ChannelSettings, services: Services, db: sqlite3.Connection, *, workspace: Path | None,
          workspaces: Workspaces | None) -> Built | NoChannels:
    """The enabled channels' runners; ConfigError (one line) for a section the installed channels cannot use."""
    wanted = sections(settings)
    if not wanted:
        return NoChannels()
    from clawgate.channels.kit.registry import ChannelConfigError, build_channels

    for table in wanted.values():
        if not isinstance(table, dict):  # Telegram's typed section: its token is registered at start
            table = {"accounts": getattr(table, "accounts", {})}
        accounts = table.get("accounts")  # any shape here: the registry refuses a bad one in one line
        own = [a for a in accounts.values() if isinstance(a, dict)] if isinstance(accounts, dict) else []
        for keys in [table, *own]:
            register_secrets([str(v) for k, v in keys.items() if any(w in k.lower() for w in SECRET_WORDS) and v])
    try:
        return build_channels(wanted, channel_services(services, settings, workspace=workspace, workspaces=workspaces),
                              db)
    except ChannelConfigError as exc:
        raise ConfigError(str(exc)) from None


class NoChannels:
    """What `build` gives when no `[channels.*]` section is enabled: the kit's `Built`, empty,
    without importing the kit (channels/kit/registry.py) for nothing."""

    def __init__(self) -> None:
        self.runners: dict[str, Any] = {}
        self.broken: dict[str, str] = {}

    def states(self) -> dict[str, dict[str, Any]]:
        return {}


__all__ = ["NoChannels", "build", "channel_services", "sections"]
