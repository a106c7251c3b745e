"""Outbound delivery: take replies off the bus and hand them to their channel.

Per chat in order, chats independent of each other (a failing chat never delays the
others). A reply is marked delivered right after its channel's send returns; that mark is
the one write that separates "sent" from "sent twice" after a crash (see docs).
"""

from __future__ import annotations

import asyncio
import logging

from clawgate.agent.bus import MessageBus, OutboundMessage, discard_file
from clawgate.agent.core.lanes import Lanes
from clawgate.channels.base import Channel, DeliveryError

log = logging.getLogger(__name__)


class Dispatcher:
    """Retryable failures are retried for as long as it takes (backoff capped at `max_delay`):
    an outage of minutes must not turn into lost replies. Permanent failures are given up at once;
    unexpected exceptions (bugs) after `max_attempts`."""

    def __init__(self, bus: MessageBus, channels: dict[str, Channel], *, max_attempts: int = 5,
                 base_delay: float = 1.0, max_delay: float = 300.0, sleep=asyncio.sleep) -> None:
        self.bus = bus
        self.channels = channels
        self.max_attempts = max_attempts
        self.base_delay = base_delay
        self.max_delay = max_delay
        self._sleep = sleep
        self.lanes: Lanes[tuple[str, str], OutboundMessage] = Lanes(self._deliver)

    async def run(self) -> None:
        while True:
            msg = await self.bus.next_outbound()
            self.lanes.submit((msg.channel, msg.chat_id), msg)

    async def _deliver(self, key: tuple[str, str], msg: OutboundMessage) -> None:
        bus = self.bus
        channel = self.channels.get(msg.channel)
        if channel is None:
            bus.mark_failed(msg.id, f"no channel named {msg.channel!r} is running")
            log.error("reply %s dropped: channel %r is not running", msg.id, msg.channel)
            discard_file(msg)
            return
        attempt = 0
        while True:
            attempt += 1
            try:
                await bus.durable()  # the reply (and the answered mark) survive a power cut before it leaves
                if not bus.deliverable(msg.id):
                    return  # a fleet worker whose partition moved on: the new holder delivers it
                await channel.send(msg)
            except DeliveryError as exc:
                if exc.permanent:
                    bus.mark_failed(msg.id, str(exc))
                    log.error("reply %s to %s:%s failed for good: %s", msg.id, msg.channel, msg.chat_id, exc)
                    discard_file(msg)
                    return
                delay = exc.retry_after if exc.retry_after is not None else self._backoff(attempt)
                log.warning("reply %s to %s:%s not delivered (%s); attempt %d, next in %.1fs",
                            msg.id, msg.channel, msg.chat_id, exc, attempt, delay)
                await self._sleep(delay)
                continue
            except Exception as exc:
                if attempt >= self.max_attempts:
                    bus.mark_failed(msg.id, f"{type(exc).__name__}: {exc}")
                    log.exception("reply %s: channel %s keeps raising; giving up", msg.id, msg.channel)
                    discard_file(msg)
                    return
                log.exception("reply %s: channel %s raised; retrying", msg.id, msg.channel)
                await self._sleep(self._backoff(attempt))
                continue
            bus.mark_delivered(msg.id)
            discard_file(msg)  # the stored copy of a sent file (state/outbox-files) is no longer needed
            return

    def _backoff(self, attempt: int) -> float:
        return min(self.max_delay, self.base_delay * 2 ** (attempt - 1))
