"""Long polling that confirms an update to Telegram only after it was handled durably.

Why not PTB's Updater: it confirms an offset on its next getUpdates whatever became of the
updates it handed over, so a crash between receive and accept would lose them. Here the loop
calls `bot.get_updates` itself; the offset moves past an update (and is saved) only once the
handler returned, i.e. the message is committed to the inbox or otherwise fully decided. A
crash before that makes Telegram deliver the update again, and the inbox's id check answers
it once.

A supervisor restarts the loop when it stops making progress (no getUpdates answer or error
within `stall_after` seconds): a dead connection must not silence the bot.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from typing import Any, Awaitable, Callable, Protocol, Sequence

from telegram import Update
from telegram.error import Conflict, InvalidToken, NetworkError, RetryAfter, TelegramError

from .delivery import retry_seconds

log = logging.getLogger("clawgate.telegram")
ALLOWED_UPDATES = ("message", "callback_query")


class UpdateSource(Protocol):
    async def get_updates(self, offset: int | None = ..., limit: int | None = ..., timeout: Any = ...,
                          allowed_updates: Sequence[str] | None = ...) -> Sequence[Update]: ...


class OffsetStore(Protocol):
    def offset(self) -> int: ...
    def save_offset(self, offset: int) -> None: ...


class TokenRejected(Exception):
    """Telegram refuses the token: polling stops, since retrying cannot help."""


class Poller:
    def __init__(self, bot: UpdateSource, handle: Callable[[Update], Awaitable[None]], offsets: OffsetStore, *,
                 timeout: int = 30, stall_after: float = 60.0, check_every: float = 1.0, max_backoff: float = 30.0,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
                 on_health: Callable[[str | None], None] | None = None) -> None:
        """`on_health(problem)`: told why polling fails while it retries (None once it works again)."""
        self.bot = bot
        self.on_health = on_health or (lambda problem: None)
        self.handle = handle
        self.offsets = offsets
        self.timeout = timeout
        self.stall_after = stall_after
        self.check_every = check_every
        self.max_backoff = max_backoff
        self.clock = clock
        self._sleep = sleep
        self.last_progress = clock()
        self.restarts = 0
        self.polls = 0

    async def run(self) -> None:
        """Poll until cancelled; restart the loop whenever it stalls or fails unexpectedly."""
        while True:
            self.last_progress = self.clock()
            loop = asyncio.create_task(self._loop(), name="telegram-poll")
            try:
                while not loop.done():
                    await asyncio.wait({loop}, timeout=self.check_every)
                    stalled = self.clock() - self.last_progress
                    if not loop.done() and stalled > self.stall_after:
                        self.restarts += 1
                        log.warning("polling made no progress for %.0fs; restarting it (restart %d)",
                                    stalled, self.restarts)
                        loop.cancel()
                        await asyncio.gather(loop, return_exceptions=True)
                        break
            except asyncio.CancelledError:
                loop.cancel()
                await asyncio.gather(loop, return_exceptions=True)
                raise
            if loop.done() and not loop.cancelled():
                exc = loop.exception()
                if isinstance(exc, TokenRejected):
                    log.error("%s", exc)
                    return
                if exc is not None:
                    log.error("polling loop failed (%s: %s); restarting in 1s", type(exc).__name__, exc)
                    await self._sleep(1.0)

    async def _loop(self) -> None:
        offset = self.offsets.offset()
        failures = 0
        while True:
            try:
                updates = await self.bot.get_updates(offset=offset or None, timeout=self.timeout,
                                                     allowed_updates=list(ALLOWED_UPDATES))
                if failures:
                    self.on_health(None)
                failures = 0
            except RetryAfter as exc:
                self.last_progress = self.clock()
                await self._sleep(retry_seconds(exc))
                continue
            except InvalidToken as exc:
                raise TokenRejected(f"the bot token was rejected ({exc.message}); fix TELEGRAM_BOT_TOKEN "
                                    "(or channels.telegram.token) and restart") from None
            except (Conflict, NetworkError, TelegramError) as exc:
                self.last_progress = self.clock()
                failures += 1
                delay = min(self.max_backoff, 0.5 * 2 ** min(failures, 10))
                level = logging.WARNING if failures in (1, 5) or failures % 50 == 0 else logging.DEBUG
                hint = " (another bot instance or a webhook is using this token)" if isinstance(exc, Conflict) else ""
                log.log(level, "getUpdates failed (%s)%s; retry %d in %.1fs", exc.message, hint, failures, delay)
                self.on_health(f"getUpdates failed ({exc.message}){hint}")
                await self._sleep(delay)
                continue
            self.polls += 1
            self.last_progress = self.clock()
            for update in updates:
                # A redelivered update is handled again: the inbox (or the seen table) recognises it.
                if not await self._handle_one(update):
                    break  # leave the offset: this update comes again on the next poll
                offset = max(offset, update.update_id + 1)
                self.offsets.save_offset(offset)
                self.last_progress = self.clock()

    async def _handle_one(self, update: Update) -> bool:
        """Handle one update; False when it must be retried (storage failed), True otherwise."""
        try:
            await self.handle(update)
            return True
        except sqlite3.Error as exc:
            log.error("could not store update %d (%s); it stays unconfirmed and is retried", update.update_id, exc)
            await self._sleep(1.0)
            return False
        except Exception as exc:
            log.exception("update %d could not be handled (%s); skipped", update.update_id, exc)
            return True
