"""Token usage since the daemon started, summed from `turn_end` events.

An EventHub subscriber, so it costs nothing on the model path; `status` shows it (the web page's
usage panel reads it there). It resets on restart: the traces under state/traces keep the history.
"""

from __future__ import annotations

from typing import Any

from .events import Event

KEYS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")


class UsageMeter:
    def __init__(self) -> None:
        self.total: dict[str, int] = dict.fromkeys(KEYS, 0)
        self.turns = 0

    def __call__(self, event: Event) -> None:
        if event["type"] != "turn_end":
            return
        usage = event.get("usage") or {}
        self.turns += 1
        for key in KEYS:
            value = usage.get(key)
            if isinstance(value, int) and value > 0:
                self.total[key] += value

    def snapshot(self) -> dict[str, Any]:
        """Model turns and tokens since start (the traces keep per-session history)."""
        return {"turns": self.turns, **self.total}
