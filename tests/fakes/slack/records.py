"""What the fake Slack server records: Web API calls, socket frames, envelopes, messages."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

JSONDict = dict[str, Any]


@dataclass
class ApiCall:
    """One Web API request as the server saw it, and what it answered."""

    method: str
    params: JSONDict
    token: str | None
    status: int
    response: JSONDict
    at: float = field(default_factory=time.monotonic)

    @property
    def ok(self) -> bool:
        return self.status == 200 and bool(self.response.get("ok"))


@dataclass
class Frame:
    """One Socket Mode WebSocket text frame; direction is "out" (server → app) or "in"."""

    connection: int
    direction: str
    data: JSONDict
    at: float = field(default_factory=time.monotonic)


@dataclass
class Envelope:
    """One delivery attempt of a Socket Mode envelope and what became of it."""

    envelope_id: str
    type: str  # events_api | interactive | slash_commands
    payload: JSONDict
    accepts_response_payload: bool
    retry_attempt: int = 0
    retry_reason: str = ""
    connection: int | None = None  # None while queued for want of an open connection
    sent_at: float | None = None
    acked_at: float | None = None
    ack_payload: JSONDict | None = None
    late: bool = False  # acknowledged after the server gave up on it (retried or expired)
    expired: bool = False  # not acknowledged in time; a retry (events_api) or nothing follows

    @property
    def acked(self) -> bool:
        return self.acked_at is not None

    @property
    def event_id(self) -> str | None:
        return self.payload.get("event_id")

    def frame(self) -> JSONDict:
        data: JSONDict = {
            "envelope_id": self.envelope_id,
            "payload": self.payload,
            "type": self.type,
            "accepts_response_payload": self.accepts_response_payload,
        }
        if self.type == "events_api":
            data["retry_attempt"] = self.retry_attempt
            data["retry_reason"] = self.retry_reason
        return data
