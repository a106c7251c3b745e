"""Sending a reply without losing it and without sending any part twice, for any platform.

A reply is rendered by the adapter into chunks under the platform's limit and sent in order.
Per chunk: a rate limit's `retry_after` is waited out (a very long one hands the reply back to the
dispatcher, which retries it later); other temporary failures are retried a bounded number of
times with exponential backoff; permanent ones (a bad request, blocked by the user) are never
retried and reach the dispatcher, which reports them. A send that may have reached the platform
(Unconfirmed) counts as sent: a duplicate is the failure users complain about most. How many
chunks went out is recorded, so a reply sent again (after a failure or a restart) resumes after
the last sent chunk. The dispatcher acknowledges the outbox row only when this returned.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from typing import Awaitable, Callable

from clawgate.agent.bus import OutboundMessage, read_file, unsent_line
from clawgate.channels.base import DeliveryError

from .adapter import PlatformAdapter, Target, Unconfirmed
from .forward import RoutedAdapter
from .store import ChannelStore


class Delivery:
    def __init__(self, adapter: PlatformAdapter | RoutedAdapter, store: ChannelStore, log: logging.Logger, *,
                 retries: int = 3, base_delay: float = 1.0, max_retry_after: float = 120.0, max_rate_limits: int = 20,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self.adapter = adapter
        self.store = store
        self.log = log
        self.retries = retries
        self.base_delay = base_delay
        self.max_retry_after = max_retry_after
        self.max_rate_limits = max_rate_limits
        self._sleep = sleep

    async def send(self, msg: OutboundMessage, target: Target) -> None:
        """Deliver a reply in order, chunk by chunk; a chunk already sent is never sent again."""
        if msg.file is not None:
            return await self.send_file(msg, target)
        text = f"⚠️ {msg.text}" if msg.kind == "error" else msg.text
        chunks = self.adapter.render(text)
        done = self.store.chunks_sent(msg.id)
        for index, chunk in enumerate(chunks):
            if index < done:
                continue
            try:
                await self.send_chunk(target if index == 0 else replace(target, reply_to=None), chunk)
            except Unconfirmed as exc:
                self.log.warning("reply %s part %d/%d unconfirmed (%s); not resent, to avoid a duplicate",
                                 msg.id, index + 1, len(chunks), exc)
            if len(chunks) > 1:
                self.store.record_chunk(msg.id, index + 1)

    async def send_file(self, msg: OutboundMessage, target: Target) -> None:
        """A file from the agent's send_file, sent once: recorded as this message's one part when sent.
        A channel without files, or a file over its limit, gets a line saying so instead (never dropped)."""
        if self.store.chunks_sent(msg.id) >= 1:
            return
        caps, file = self.adapter.capabilities, msg.file or {}
        if not caps.files:
            reason: str | None = f"this channel ({self.adapter.name}) cannot carry files."
        elif caps.max_file_bytes and int(file.get("size", 0)) > caps.max_file_bytes:
            reason = f"it is over {self.adapter.name}'s limit of {caps.max_file_bytes} bytes."
        else:
            reason = None
        try:
            data = None if reason else read_file(file)
        except OSError as exc:
            reason = f"its stored copy is gone ({exc.strerror})."
        try:
            if data is None:
                for chunk in self.adapter.render(unsent_line(msg, reason or "")):
                    await self.send_chunk(target, chunk)
            else:
                await self.retrying(lambda: self.adapter.send_file(target, str(file["name"]), data, msg.text))
        except Unconfirmed as exc:
            self.log.warning("file %s unconfirmed (%s); not resent, to avoid a duplicate", msg.id, exc)
        self.store.record_chunk(msg.id, 1)

    async def send_chunk(self, target: Target, text: str) -> str:
        """One chunk under the retry rules; DeliveryError when it cannot be sent now, Unconfirmed as is."""
        return await self.retrying(lambda: self.adapter.send_text(target, text))

    async def retrying(self, send: Callable[[], Awaitable[str]]) -> str:
        """One platform call under the retry rules above."""
        failures = rate_limits = 0
        while True:
            try:
                return await send()
            except DeliveryError as exc:
                if exc.permanent:
                    raise
                if exc.retry_after is not None:
                    rate_limits += 1
                    if exc.retry_after > self.max_retry_after or rate_limits > self.max_rate_limits:
                        raise
                    self.log.info("send rate-limited; waiting %.1fs as asked", exc.retry_after)
                    await self._sleep(exc.retry_after)
                    continue
                failures += 1
                if failures > self.retries:
                    raise DeliveryError(f"{exc} (gave up after {self.retries} retries)") from None
                delay = self.base_delay * 2 ** (failures - 1)
                self.log.warning("send failed (%s); retry %d/%d in %.1fs", exc, failures, self.retries, delay)
                await self._sleep(delay)


__all__ = ["Delivery"]
