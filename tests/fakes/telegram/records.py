"""Records the fake keeps about its state: queued updates and known messages.

Why separate: the update-building and Bot API method modules both read and write them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

JSONDict = dict[str, Any]


@dataclass
class _Queued:
    """A pending update; ``protected`` survives one offset confirmation (see redeliver)."""

    update_id: int
    update: JSONDict
    protected: bool = False


@dataclass
class _Stored:
    """A message the fake knows about, so edits/replies/callbacks can refer to it."""

    message: JSONDict
    from_bot: bool
    raw_text: str = ""
    parse_mode: str | None = None
    reply_markup: JSONDict | None = None
    extra: JSONDict = field(default_factory=dict)
