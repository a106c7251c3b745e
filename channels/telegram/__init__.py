"""Telegram channel (python-telegram-bot): the Bot API's protocol on the channel kit.

See docs/telegram.md. Registered as the `telegram` entry point of the `clawgate.channels` group
(pyproject.toml), like any third-party channel; the adapter and python-telegram-bot (a few
hundred milliseconds to import) are only imported when the channel is built.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "TelegramAdapter":
        from .channel import TelegramAdapter

        return TelegramAdapter
    raise AttributeError(name)


__all__ = ["TelegramAdapter"]
