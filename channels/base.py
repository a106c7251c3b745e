"""The adapter shape every channel follows: start, stop, close, send — and publish to the bus.

A channel never calls the agent. It publishes InboundMessages (acknowledging its platform
only after `bus.publish_inbound` returned, i.e. the message is durably in the inbox) and
delivers the OutboundMessages the dispatcher hands it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Awaitable, Callable

from clawgate.agent.bus import OutboundMessage


class DeliveryError(Exception):
    """A send failed. `permanent` errors (bad request, blocked by user) are never retried."""

    def __init__(self, message: str, *, permanent: bool = False, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.permanent = permanent
        self.retry_after = retry_after


class Channel(ABC):
    name: str

    @abstractmethod
    async def start(self) -> None:
        """Begin receiving; return once receiving has started."""

    @abstractmethod
    async def stop(self) -> None:
        """Stop receiving: no new input from now on. Sending still works; safe to call twice."""

    async def close(self) -> None:
        """Release what the channel holds (HTTP clients, sockets) after the last send; safe to call
        twice and on a channel that never started."""
        await self.stop()

    @abstractmethod
    async def send(self, msg: OutboundMessage) -> None:
        """Deliver one message completely or raise DeliveryError."""
