"""The daemon's health as one dictionary, assembled from named sections.

Each part contributes what only it knows (the loop its busy sessions, the bus its queues, the
gateway its clients) as a section; `status`, `clawgate status` and the `/status` command all
read this one snapshot, so they never disagree.
"""

from __future__ import annotations

import time
from typing import Any, Callable


class Health:
    """Named sections, each read when a snapshot is taken."""

    def __init__(self, *, started_at: float | None = None) -> None:
        self.started_at = time.time() if started_at is None else started_at
        self._sections: dict[str, Callable[[], Any]] = {}

    def add(self, name: str, read: Callable[[], Any]) -> None:
        """Register a section; `read` is called for every snapshot (keep it cheap)."""
        self._sections[name] = read

    def uptime(self) -> float:
        return round(time.time() - self.started_at, 1)

    def snapshot(self) -> dict[str, Any]:
        return {"uptime": self.uptime(), **{name: read() for name, read in self._sections.items()}}

    def get(self, name: str, default: Any = None) -> Any:
        read = self._sections.get(name)
        return default if read is None else read()
