"""Channel-agnostic messages: the only things that cross the MessageBus."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any


def new_id(prefix: str = "") -> str:
    return prefix + uuid.uuid4().hex[:16]


@dataclass
class InboundMessage:
    """Something for the agent. `id` is stable across redelivery so duplicates are recognised."""

    channel: str
    chat_id: str
    sender_id: str
    session_key: str
    text: str
    id: str = field(default_factory=lambda: new_id("in_"))
    attachments: list[dict[str, Any]] = field(default_factory=list)
    received_at: float = field(default_factory=time.time)
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)  # shallow: the fields are JSON data already (asdict deep-copied them)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "InboundMessage":
        return cls(**data)


@dataclass
class OutboundMessage:
    """Something for a channel to deliver. `in_reply_to` names the inbound message (the run)."""

    channel: str
    chat_id: str
    text: str
    session_key: str = ""
    in_reply_to: str | None = None
    id: str = field(default_factory=lambda: new_id("out_"))
    kind: str = "reply"  # reply | error | notice | file
    metadata: dict[str, Any] = field(default_factory=dict)
    # kind "file": {"name", "size", "mime", "path"} of a copy under state/outbox-files/<id>/ (agent/bus/outbox_files.py);
    # `text` is then its caption. Rows written before this field existed have none.
    file: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "OutboundMessage":
        return cls(**data)
