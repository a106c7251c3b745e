"""Sending to Telegram without losing a message and without sending one twice.

Rules, per chunk: RetryAfter is waited out; failures where the request provably never reached
Telegram (connect errors, pool timeouts) and 5xx answers are retried a bounded number of times
with backoff; rejected formatting ("can't parse entities") is resent once as plain text; 400
and 403 are permanent and never retried. A failure where the request may have been processed
(a read timeout after sending) is *not* retried: it is reported as Unconfirmed and the caller
treats the chunk as delivered, because a duplicate is the failure users complain about most.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import warnings
from typing import Any, Awaitable, Callable

import httpx
from telegram import Bot, InlineKeyboardMarkup, InputFile, Message, MessageEntity, ReplyParameters
from telegram.error import BadRequest, ChatMigrated, Forbidden, InvalidToken, NetworkError, RetryAfter, TelegramError
from telegram.warnings import PTBDeprecationWarning

from clawgate.channels.base import DeliveryError
from clawgate.channels.kit.adapter import Unconfirmed  # the request may have reached Telegram: not resent

from .render import Chunk

log = logging.getLogger("clawgate.telegram")

MAX_FILE_BYTES = 50 * 1024 * 1024  # the Bot API's upload limit (sendDocument answers 413 above it)
CAPTION_CHARS = 1024  # a longer caption is refused by sendDocument: it is cut

_UNSENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


def retry_seconds(exc: RetryAfter) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PTBDeprecationWarning)
        value = exc.retry_after
    return value.total_seconds() if isinstance(value, dt.timedelta) else float(value)


def provably_unsent(exc: NetworkError) -> bool:
    """True when Telegram answered with an error status (nothing done) or the connection never opened."""
    cause = exc.__cause__
    return cause is None or isinstance(cause, _UNSENT)


def is_format_error(exc: BadRequest) -> bool:
    text = exc.message.lower()
    return "parse entities" in text or ("entit" in text and "can't" in text)


class Sender:
    """Calls one Bot API method under the rules above."""

    def __init__(self, bot: Bot, *, retries: int = 3, base_delay: float = 1.0, max_retry_after: float = 120.0,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
                 on_migrated: Callable[[int | str, int], None] | None = None) -> None:
        """`on_migrated(old, new)`: told when a group turned out to be a supergroup now (ChatMigrated)."""
        self.bot = bot
        self.on_migrated = on_migrated
        self.retries = retries
        self.base_delay = base_delay
        self.max_retry_after = max_retry_after
        self._sleep = sleep

    async def call(self, what: str, fn: Callable[[], Awaitable[Any]]) -> Any:
        """Run `fn` (one Bot API call) with RetryAfter and safe network retries; map errors to DeliveryError."""
        attempt = 0
        while True:
            try:
                return await fn()
            except RetryAfter as exc:
                wait = retry_seconds(exc)
                if wait > self.max_retry_after:
                    raise DeliveryError(f"{what}: Telegram asks to wait {wait:.0f}s", retry_after=wait) from None
                log.info("%s rate-limited; waiting %.1fs as asked", what, wait)
                await self._sleep(wait)
            except (BadRequest, Forbidden, ChatMigrated, InvalidToken):
                raise
            except NetworkError as exc:
                if not provably_unsent(exc):
                    raise Unconfirmed(f"{what}: {exc.message}") from None
                attempt += 1
                if attempt > self.retries:
                    raise DeliveryError(f"{what}: {exc.message} (gave up after {self.retries} retries)") from None
                delay = self.base_delay * 2 ** (attempt - 1)
                log.warning("%s failed (%s); retry %d/%d in %.1fs", what, exc.message, attempt, self.retries, delay)
                await self._sleep(delay)

    async def send_chunk(self, chat_id: int | str, chunk: Chunk, *, thread_id: int | None = None,
                         reply_to: int | None = None, markup: InlineKeyboardMarkup | None = None) -> Message:
        """Send one chunk; falls back to plain text if Telegram rejects the formatting. Raises DeliveryError."""
        entities = [MessageEntity.de_json(e, None) for e in chunk.entities] or None
        reply = ReplyParameters(reply_to, allow_sending_without_reply=True) if reply_to else None
        target = chat_id
        while True:
            def attempt(to: int | str = target, ents: list[MessageEntity] | None = entities) -> Awaitable[Message]:
                return self.bot.send_message(to, chunk.text, entities=ents, message_thread_id=thread_id,
                                             reply_parameters=reply, reply_markup=markup)
            try:
                return await self.call("sendMessage", attempt)
            except BadRequest as exc:
                if entities and is_format_error(exc):
                    log.warning("chat %s refused the formatting (%s); resending as plain text", target, exc.message)
                    entities = None
                    continue
                raise DeliveryError(f"Telegram refused the message: {exc.message}", permanent=True) from None
            except ChatMigrated as exc:
                if target == exc.new_chat_id:
                    raise DeliveryError(f"chat {chat_id} migrated twice", permanent=True) from None
                log.info("chat %s became supergroup %s; sending there", chat_id, exc.new_chat_id)
                if self.on_migrated is not None:
                    self.on_migrated(target, exc.new_chat_id)
                target = exc.new_chat_id
            except Forbidden as exc:
                raise DeliveryError(f"Telegram forbids sending to chat {chat_id}: {exc.message}", permanent=True) from None
            except InvalidToken as exc:
                raise DeliveryError(f"Telegram rejected the bot token ({exc.message}); fix TELEGRAM_BOT_TOKEN") from None

    async def send_document(self, chat_id: int | str, name: str, data: bytes, caption: str, *,
                            thread_id: int | None = None) -> Message:
        """sendDocument with the same rules; a refused file (400, 413 too large, 403) is permanent."""
        text = caption[:CAPTION_CHARS] or None

        async def attempt() -> Message:
            try:
                return await self.bot.send_document(chat_id, InputFile(data, filename=name), caption=text,
                                                    message_thread_id=thread_id)
            except NetworkError as exc:
                if "too large" in exc.message.lower():  # PTB's answer to HTTP 413
                    raise BadRequest(exc.message) from None
                raise
        try:
            return await self.call("sendDocument", attempt)
        except BadRequest as exc:
            raise DeliveryError(f"Telegram refused the file {name}: {exc.message}", permanent=True) from None
        except Forbidden as exc:
            raise DeliveryError(f"Telegram forbids sending to chat {chat_id}: {exc.message}", permanent=True) from None
        except ChatMigrated as exc:
            raise DeliveryError(f"chat {chat_id} is now {exc.new_chat_id}", permanent=True) from None
        except InvalidToken as exc:
            raise DeliveryError(f"Telegram rejected the bot token ({exc.message}); fix TELEGRAM_BOT_TOKEN") from None

    async def best_effort(self, what: str, fn: Callable[[], Awaitable[Any]]) -> Any:
        """For typing, status edits and notices: same retries, but a failure is logged, never raised."""
        try:
            return await self.call(what, fn)
        except (TelegramError, DeliveryError, Unconfirmed) as exc:
            log.info("%s not done: %s", what, getattr(exc, "message", exc))
            return None
