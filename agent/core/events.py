"""Run events (tool_start, tool_end, turn_end, text_delta, …) fanned out to subscribers.

The loop only calls `emit`; traces, gateway clients and logs subscribe without the loop
knowing them. A failing subscriber is logged and never breaks a run.
"""

from __future__ import annotations

import asyncio
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


class DeltaBuffer:
    """Text deltas that arrive in one event-loop step go out as one event: a single read of a model
    stream often holds several, and every event is a frame to each watching client. The owner
    calls `flush()` when the stream ends, so no delta is ever emitted after what follows it.
    `restart()` (called by a provider whose attempt failed after some text) drops what is not yet
    sent and tells the watchers that the text so far is not part of the answer."""

    def __init__(self, emit: Callable[[str], None], on_restart: Callable[[], None] | None = None) -> None:
        self._emit = emit
        self._on_restart = on_restart
        self._parts: list[str] = []
        self._scheduled = False

    def restart(self) -> None:
        self._parts.clear()
        if self._on_restart is not None:
            self._on_restart()

    def __call__(self, text: str) -> None:
        if not text:
            return
        self._parts.append(text)
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self.flush)

    def flush(self) -> None:
        self._scheduled = False
        if self._parts:
            text = "".join(self._parts)
            self._parts.clear()
            self._emit(text)
