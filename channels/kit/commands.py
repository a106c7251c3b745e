"""Reading a chat command (`/new`, `/stop@bot args`) out of a message, with the names injected.

The names come from the agent's command router through the composition root (the kit never
imports the agent's command module), plus the kit's own `/approve ID` and `/deny ID`. An unknown
`/word` is ordinary text for the model; `/cmd@otherbot` is for another bot.
"""

from __future__ import annotations

import re
from typing import Collection

_COMMAND = re.compile(r"^/([A-Za-z0-9_]{1,32})(?:@([A-Za-z0-9_.-]+))?(?:\s+(.*))?$", re.DOTALL)
KIT_COMMANDS: list[tuple[str, str]] = [("approve", "Approve a pending risky action: /approve ID (owners only)"),
                                       ("deny", "Deny a pending risky action: /deny ID (owners only)")]


def parse_command(text: str, names: Collection[str], bot_name: str | None = None) -> tuple[str, str] | None:
    """(name, args) when `text` is one of `names` addressed to us (bare, or `@bot_name`); else None."""
    match = _COMMAND.match(text.strip())
    if not match:
        return None
    name, target, args = match.group(1).lower(), match.group(2), (match.group(3) or "").strip()
    if target is not None and (bot_name is None or target.lower() != bot_name.lower()):
        return None
    return (name, args) if name in names else None


def for_another_bot(text: str, bot_name: str | None) -> bool:
    """`/cmd@otherbot …`: a command explicitly addressed to a different bot (never ours to read)."""
    match = _COMMAND.match(text.strip())
    return bool(match and match.group(2) and (bot_name is None or match.group(2).lower() != bot_name.lower()))


__all__ = ["KIT_COMMANDS", "for_another_bot", "parse_command"]
