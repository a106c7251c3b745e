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
    """A send failed. `permanent` errors (bad request, blocked by user) are never retried.
    `too_large`: the platform refused this one message for its size (the kit splits it and sends the
    parts). `channel_down`: nothing can be sent on this channel now (our credentials or configuration
    refused), so no notice of the failure is tried there either."""

    def __init__(self, message: str, *, permanent: bool = False, retry_after: float | None = None,
                 too_large: bool = False, channel_down: bool = False) -> None:
        super().__init__(message)
        self.permanent = permanent
        self.retry_after = retry_after
        self.too_large = too_large
        self.channel_down = channel_down


async def run_alone(name: str, body: Callable[[], Awaitable[None]]) -> None:
    """One process: a connection that may exist once per bot simply runs."""
    await body()


class Channel(ABC):
    name: str
    # Runs a connection that may exist only once per bot (a Telegram long-poller, a Discord gateway
    # socket, a Slack Socket Mode socket): `await self.exclusive("<kind>:<bot id>", body)`. In a fleet
    # the daemon sets it to the fleet's singleton lease (agent/fleet/leases.py): the body runs only in
    # the process holding the lease and moves to another when that one dies.
    exclusive: Callable[[str, Callable[[], Awaitable[None]]], Awaitable[None]] = staticmethod(run_alone)

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
