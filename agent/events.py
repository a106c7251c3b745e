"""Run events (tool_start, tool_end, turn_end, text_delta, …) fanned out to subscribers.

The loop only calls `emit`; traces, gateway clients and logs subscribe without the loop
knowing them. A failing subscriber is logged and never breaks a run.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

Event = dict[str, Any]
Subscriber = Callable[[Event], None]
log = logging.getLogger(__name__)


class EventHub:
    def __init__(self) -> None:
        self._subscribers: list[Subscriber] = []

    def subscribe(self, fn: Subscriber) -> Callable[[], None]:
        self._subscribers.append(fn)
        return lambda: self._subscribers.remove(fn) if fn in self._subscribers else None

    def emit(self, type: str, **fields: Any) -> Event:
        event: Event = {"type": type, "ts": time.time(), **fields}
        for fn in list(self._subscribers):
            try:
                fn(event)
            except Exception:
                log.exception("event subscriber failed on %s", type)
        return event
