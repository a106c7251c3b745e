"""Telegram channel (python-telegram-bot): long polling, access control, replies, approvals.

See docs/telegram.md. `build(daemon)` returns the channel when it is enabled (by default:
whenever a bot token is configured), else None.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from .channel import NAME, ChannelError, TelegramChannel

if TYPE_CHECKING:
    from gateway.daemon import Daemon

log = logging.getLogger("clawgate.telegram")


def build(daemon: "Daemon") -> TelegramChannel | None:
    """The Telegram channel for this daemon, or None when it is off (no token, or enabled = false)."""
    settings = daemon.settings.channels.telegram
    if settings.enabled is False:
        return None
    if not settings.token:
        if settings.enabled:
            log.error("channels.telegram.enabled is true but no bot token is set; set TELEGRAM_BOT_TOKEN "
                      "(from @BotFather) or channels.telegram.token")
        return None
    return TelegramChannel(settings, daemon)


__all__ = ["NAME", "ChannelError", "TelegramChannel", "build"]
