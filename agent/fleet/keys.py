"""Key names and the partition of a session: one place, so every process computes the same ones.

No redis import here: the names are plain strings (tests and the status view use them too).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

IN_GROUP = "workers"     # the consumer group on each inbound partition stream
OUT_GROUP = "delivery"   # the consumer group on each outbound partition stream


def route_key(session_key: str) -> str:
    """The key a session is partitioned by: a sub-agent's log (`sub-<digest>@<parent>`) goes with its
    parent, so the worker running the parent also holds the child's partition."""
    if session_key.startswith("sub-") and "@" in session_key:
        return session_key.split("@", 1)[1]
    return session_key


def partition_of(session_key: str, partitions: int) -> int:
    """Stable across processes and Python runs (crc32, not hash(): that one is salted per process)."""
    return zlib.crc32(route_key(session_key).encode()) % partitions


@dataclass(frozen=True)
class Keys:
    prefix: str

    @property
    def meta(self) -> str:
        return f"{self.prefix}:meta"

    @property
    def nodes(self) -> str:
        return f"{self.prefix}:nodes"

    def node_info(self, node: str) -> str:
        return f"{self.prefix}:node:{node}"

    def inbound(self, n: int) -> str:
        return f"{self.prefix}:in:{n}"

    def outbound(self, n: int) -> str:
        return f"{self.prefix}:out:{n}"

    def message(self, inbound_id: str) -> str:
        return f"{self.prefix}:msg:{inbound_id}"

    def reply(self, outbound_id: str) -> str:
        return f"{self.prefix}:reply:{outbound_id}"

    def open_set(self, session_key: str) -> str:
        return f"{self.prefix}:open:{session_key}"

    def lease(self, name: str) -> str:
        """`name`: "p<n>" for partition n, "s:<singleton>" for a singleton connection."""
        return f"{self.prefix}:lease:{name}"

    def fence(self, name: str) -> str:
        return f"{self.prefix}:fence:{name}"

    def claim(self, what: str) -> str:
        return f"{self.prefix}:claim:{what}"

    @property
    def inbox_open(self) -> str:
        return f"{self.prefix}:count:inbox"

    @property
    def outbox_pending(self) -> str:
        return f"{self.prefix}:count:outbox"

    @property
    def events(self) -> str:
        return f"{self.prefix}:events"

    @property
    def approvals(self) -> str:
        return f"{self.prefix}:approvals"


def partition_lease(n: int) -> str:
    return f"p{n}"
