"""What bench/channels.py asks of each channel's fake server, and how it waits for a reply."""

from __future__ import annotations

import threading
import time
from typing import Callable


class Platform:
    """One channel's fake server as the bench drives it: inject a message, see when a text was sent."""

    name: str

    def env(self) -> dict[str, str]: ...
    def prepare(self, chats: int) -> None:
        """Set up `chats` + 1 chats before the daemon starts, where a platform needs that (Matrix rooms)."""
    def inject(self, chat: int, text: str) -> None: ...
    def close(self) -> None: ...

    def __init__(self) -> None:
        self.sent_at: dict[str, float] = {}  # text -> when the platform received it (first time)
        self.lock = threading.Lock()

    def saw(self, text: str) -> None:
        with self.lock:
            self.sent_at.setdefault(text, time.perf_counter())


def wait(check: Callable[[], float | None], timeout: float) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.0005)
    raise SystemExit("a reply did not arrive in time; see the daemon's log")
