"""Sending a reply without losing it and without sending any part twice, for any platform.

A reply is rendered by the adapter into chunks under the platform's limit and sent in order.
Per chunk: a rate limit's `retry_after` is waited out (a very long one hands the reply back to the
dispatcher, which retries it later); other temporary failures are retried a bounded number of
times with exponential backoff; permanent ones (a bad request, blocked by the user) are never
retried and reach the dispatcher, which reports them — and the user gets a short notice on the same
channel saying what failed and where the whole answer is (its session's history on the web page),
unless the channel itself is down (`channel_down`: our credentials refused), where no notice could
go either. A chunk the platform refuses as too large (`too_large`: the adapter's measure was off,
e.g. encryption grew it) is split in halves and each half sent, down to a sixteenth. A send that may have reached the platform
(Unconfirmed) counts as sent: a duplicate is the failure users complain about most. How many
chunks went out is recorded, so a reply sent again (after a failure or a restart) resumes after
the last sent chunk. The dispatcher acknowledges the outbox row only when this returned. What no
record can close is a crash after the platform took a part and before that was written down: each
part carries a `send_key` stable across restarts, and where the platform has an idempotency key the
adapter passes it on, so the part sent again is not a second message (docs/channels.md).
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
from .markdown import split_markdown
from .store import ChannelStore

MAX_SPLITS = 4  # a chunk refused as too large is halved at most this often (down to 1/16 of it)
REASON_CHARS = 200  # how much of the platform's error a notice of an undelivered answer quotes


def undelivered_notice(msg: OutboundMessage, exc: DeliveryError) -> str:
    """The line a user gets when an answer could not be delivered to them for good."""
    reason = " ".join(str(exc).split())
    reason = reason if len(reason) <= REASON_CHARS else reason[:REASON_CHARS - 1] + "…"
    where = f" (session `{msg.session_key}`)" if msg.session_key else ""
    what = "A file" if msg.file is not None else "An answer"
    return (f"⚠️ {what} could not be delivered here: {reason}. The whole answer is kept in this conversation's "
            f"history on the gateway's web page{where}.")


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
        """Deliver a reply in order, chunk by chunk; a chunk already sent is never sent again. A permanent
        failure tells the user on this channel (undelivered_notice), then goes to the dispatcher."""
        try:
            if msg.file is not None:
                return await self.send_file(msg, target)
            await self._send_text(msg, target)
        except DeliveryError as exc:
            if exc.permanent and not exc.channel_down:
                await self._tell_undelivered(msg, target, exc)
            raise

    async def _send_text(self, msg: OutboundMessage, target: Target) -> None:
        text = f"⚠️ {msg.text}" if msg.kind == "error" else msg.text
        chunks = self.adapter.render(text)
        done = self.store.chunks_sent(msg.id)
        for index, chunk in enumerate(chunks):
            if index < done:
                continue
            part = replace(target, send_key=f"{msg.id}:{index}")
            try:
                await self.send_fitting(part if index == 0 else replace(part, reply_to=None), chunk)
            except Unconfirmed as exc:
                self.log.warning("reply %s part %d/%d unconfirmed (%s); not resent, to avoid a duplicate",
                                 msg.id, index + 1, len(chunks), exc)
            if len(chunks) > 1:
                self.store.record_chunk(msg.id, index + 1)

    async def send_fitting(self, target: Target, chunk: str, depth: int = 0) -> None:
        """One chunk; refused as too large, its Markdown (the chunk, or its `source`) is halved, each half
        rendered and sent. A crash among the halves sends the chunk's halves again (at most one chunk)."""
        try:
            await self.send_chunk(target, chunk)
            return
        except DeliveryError as exc:
            if not exc.too_large or depth >= MAX_SPLITS:
                raise
            source = str(getattr(chunk, "source", None) or chunk)
            halves = split_markdown(source, max(1, len(source) // 2 + 1))
            if len(halves) < 2:
                raise
            parts = [part for half in halves for part in self.adapter.render(half)]
            self.log.warning("a part of %d characters was refused as too large (%s); sending it as %d smaller parts",
                             len(source), exc, len(parts))
        for number, part in enumerate(parts):
            key = f"{target.send_key}.{number}" if target.send_key else None
            where = replace(target, send_key=key) if number == 0 else replace(target, reply_to=None, send_key=key)
            try:
                await self.send_fitting(where, part, depth + 1)
            except Unconfirmed as exc:
                self.log.warning("a smaller part unconfirmed (%s); not resent, to avoid a duplicate", exc)

    async def _tell_undelivered(self, msg: OutboundMessage, target: Target, exc: DeliveryError) -> None:
        """The user's notice of a permanent failure: tried once, never itself followed by another. Keyed
        (`{id}:notice.{n}`), so the notice given again after a crash before the failure was recorded is
        recognised where the platform has a key."""
        try:
            for index, chunk in enumerate(self.adapter.render(undelivered_notice(msg, exc))):
                await self.send_fitting(replace(target, reply_to=None, send_key=f"{msg.id}:notice.{index}"), chunk)
        except (DeliveryError, Unconfirmed) as failed:
            self.log.warning("the notice that reply %s was not delivered could not be sent either: %s", msg.id, failed)

    async def send_file(self, msg: OutboundMessage, target: Target) -> None:
        """A file from the agent's send_file, sent once: recorded as this message's one part when sent, and
        keyed (`{id}:file`) like a text part against a crash between the platform's taking it and that record.
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
                for index, chunk in enumerate(self.adapter.render(unsent_line(msg, reason or ""))):
                    await self.send_chunk(replace(target, send_key=f"{msg.id}:{index}"), chunk)
            else:
                keyed = replace(target, send_key=f"{msg.id}:file")
                await self.retrying(lambda: self.adapter.send_file(keyed, str(file["name"]), data, msg.text))
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
