"""Telegram channel (python-telegram-bot): long polling, access control, replies, approvals.

See docs/telegram.md. `build(settings, services, db)` returns the channel when it is enabled
(by default: whenever a bot token is configured), else None. The channel (and
python-telegram-bot, a few hundred milliseconds to import) is only imported when it is on.
"""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

from clawgate.agent.services import Services
from clawgate.config.schema import TelegramSettings
from clawgate.workspace.users import Workspaces

if TYPE_CHECKING:
    from .channel import TelegramChannel

log = logging.getLogger("clawgate.telegram")


def build(settings: TelegramSettings, services: Services, db: sqlite3.Connection, *,
          workspace: Path | None = None, workspaces: Workspaces | None = None) -> TelegramChannel | None:
    """The Telegram channel, or None when it is off (no token, or enabled = false)."""
    if settings.enabled is False:
        return None
    if not settings.token:
        if settings.enabled:
            log.error("channels.telegram.enabled is true but no bot token is set; set TELEGRAM_BOT_TOKEN "
                      "(from @BotFather) or channels.telegram.token")
        return None
    from .channel import TelegramChannel

    return TelegramChannel(settings, services, db, workspace=workspace, workspaces=workspaces)


__all__ = ["build"]
