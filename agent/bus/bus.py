"""The MessageBus interface: the only path between channels, triggers and the agent.

Publishing inbound commits the message to the inbox first; once `durable()` returned, a channel
may acknowledge its platform. Publishing outbound commits the reply to the outbox (and marks
the inbound answered) in one step; the dispatcher awaits `durable()` before anything is sent.

Callers see only this interface; the embedded implementation is SQLite (agent/bus/sqlite.py).
A Redis Streams implementation (consumer groups for the queues, a hash per message for its
status) satisfies the same methods, which is why nothing outside the bus touches its storage.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Iterable, Protocol

from .messages import InboundMessage, OutboundMessage


class Intake(Protocol):
    """Where channels put what people say: accepted, or False for a duplicate id. Await
    `durable()` before telling the platform or client it arrived (a power cut loses nothing then)."""

    def publish_inbound(self, msg: InboundMessage) -> bool: ...

    async def publish_inbound_async(self, msg: InboundMessage) -> bool: ...

    async def durable(self) -> None: ...


class MessageBus(ABC):
    # intake ------------------------------------------------------------------------------
    @abstractmethod
    def publish_inbound(self, msg: InboundMessage) -> bool:
        """Durably accept `msg`; False (and nothing queued) if this id was already accepted."""

    async def publish_inbound_async(self, msg: InboundMessage) -> bool:
        """publish_inbound from a coroutine on the message path. A bus whose storage is a round trip
        away (a fleet's Redis) sends it with other callers' writes instead of blocking the event loop;
        the embedded one simply commits."""
        return self.publish_inbound(msg)

    async def durable(self) -> None:
        """Return once everything published so far survives a power cut. Call it before telling
        anyone outside (a platform, a client) that a message was accepted, and before sending a
        reply. Concurrent callers share one flush (group commit). Raises OSError."""
        return None

    @abstractmethod
    async def next_inbound(self) -> InboundMessage:
        """The next accepted message, in acceptance order."""

    @abstractmethod
    def begin_attempt(self, inbound_id: str, progress: int) -> int:
        """Count a processing start of `inbound_id`; returns the starts without progress so far
        (an attempt that begins further along — `progress` grew — resets the count)."""

    async def begin_attempt_async(self, inbound_id: str, progress: int) -> int:
        """begin_attempt from a coroutine (see publish_inbound_async)."""
        return self.begin_attempt(inbound_id, progress)

    @abstractmethod
    def settle(self, inbound_id: str) -> None:
        """Mark a message answered without a reply (a suppressed heartbeat, a skipped run)."""

    @abstractmethod
    def is_unanswered(self, inbound_id: str) -> bool:
        """Accepted and not answered yet (still queued or running)."""

    @abstractmethod
    def has_unanswered(self, session_key: str) -> bool:
        """Some accepted message of this session is not answered yet."""

    # delivery ----------------------------------------------------------------------------
    @abstractmethod
    def publish_outbound(self, msg: OutboundMessage, *, answers: str | None = None) -> bool:
        """Durably queue a reply; `answers` marks that inbound message answered in the same step.
        False (and nothing queued) if a reply with this id was queued before."""

    async def publish_outbound_async(self, msg: OutboundMessage, *, answers: str | None = None) -> bool:
        """publish_outbound from a coroutine (see publish_inbound_async)."""
        return self.publish_outbound(msg, answers=answers)

    @abstractmethod
    async def next_outbound(self) -> OutboundMessage:
        """The next reply to deliver."""

    def deliverable(self, outbound_id: str) -> bool:
        """Checked right before a reply is handed to its channel: False when this process may no
        longer deliver it (a fleet worker whose partition moved on; the new holder delivers it)."""
        return True

    @abstractmethod
    def mark_delivered(self, outbound_id: str) -> None:
        """The channel's send returned: never deliver this reply again."""

    @abstractmethod
    def mark_failed(self, outbound_id: str, error: str) -> None:
        """Delivery failed for good (permanent error or a channel that keeps raising)."""

    @abstractmethod
    def delivery_status(self, outbound_id: str) -> str | None:
        """pending | delivered | failed, or None for an unknown (or forgotten) id."""

    # recovery and upkeep -----------------------------------------------------------------
    @abstractmethod
    def replay_pending(self) -> tuple[int, int]:
        """After a restart: requeue accepted-but-unanswered and queued-but-undelivered messages."""

    @abstractmethod
    def unanswered(self) -> Iterable[InboundMessage]:
        """Accepted messages not answered yet, oldest first (for inspection and recovery)."""

    @abstractmethod
    def undelivered(self) -> Iterable[OutboundMessage]:
        """Queued replies not delivered yet, oldest first."""

    @abstractmethod
    def prune(self, keep_days: float) -> int:
        """Forget answered and finished rows older than `keep_days`; returns how many."""

    @abstractmethod
    def counts(self) -> dict[str, int]:
        """Open work: {"inboxOpen": n, "outboxPending": m}."""

    @abstractmethod
    def close(self) -> None:
        """Release the storage."""
