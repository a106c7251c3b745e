"""The MessageBus: the only path between channels, triggers and the agent.

Publishing inbound commits the message to the inbox first, so a channel may acknowledge
its platform as soon as `publish_inbound` returns. Publishing outbound commits the reply to
the outbox (and marks the inbound answered) in one transaction before anything is sent.
"""

from __future__ import annotations

import asyncio

from .messages import InboundMessage, OutboundMessage
from .store import Store


class MessageBus:
    def __init__(self, store: Store) -> None:
        self.store = store
        self._inbound: asyncio.Queue[InboundMessage] = asyncio.Queue()
        self._outbound: asyncio.Queue[OutboundMessage] = asyncio.Queue()

    def publish_inbound(self, msg: InboundMessage) -> bool:
        """Durably accept `msg`; False (and nothing queued) if this id was already accepted."""
        if not self.store.accept(msg):
            return False
        self._inbound.put_nowait(msg)
        return True

    async def next_inbound(self) -> InboundMessage:
        return await self._inbound.get()

    def publish_outbound(self, msg: OutboundMessage, *, answers: str | None = None) -> bool:
        """Durably queue a reply; `answers` marks that inbound message answered atomically.
        False (and nothing queued) if a reply with this id was queued before."""
        if not self.store.enqueue(msg, answers=answers):
            return False
        self._outbound.put_nowait(msg)
        return True

    async def next_outbound(self) -> OutboundMessage:
        return await self._outbound.get()

    def replay_pending(self) -> tuple[int, int]:
        """After a restart: requeue accepted-but-unanswered and queued-but-undelivered messages."""
        inbound = list(self.store.unanswered())
        outbound = list(self.store.undelivered())
        for msg in inbound:
            self._inbound.put_nowait(msg)
        for out in outbound:
            self._outbound.put_nowait(out)
        return len(inbound), len(outbound)

    @property
    def inbound_depth(self) -> int:
        return self._inbound.qsize()
