"""Per-key serial lanes under a global concurrency cap.

Items for one key run strictly in submission order, one at a time; different keys run
concurrently, at most `max_concurrent` at once. The running item of a key can be cancelled
without disturbing the items queued behind it.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import Awaitable, Callable, Generic, Hashable, TypeVar

from .errors import WriteRefused

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")
log = logging.getLogger(__name__)


class Lanes(Generic[K, T]):
    def __init__(self, handler: Callable[[K, T], Awaitable[None]], max_concurrent: int | None = None) -> None:
        self._handler = handler
        self._queues: dict[K, deque[T]] = {}
        self._workers: dict[K, asyncio.Task[None]] = {}
        self._current: dict[K, asyncio.Task[None]] = {}
        self._cap = asyncio.Semaphore(max_concurrent) if max_concurrent else None

    def submit(self, key: K, item: T) -> None:
        self._queues.setdefault(key, deque()).append(item)
        if key not in self._workers:
            self._workers[key] = asyncio.create_task(self._work(key), name=f"lane:{key}")

    def busy(self, key: K) -> bool:
        return key in self._workers

    def pending(self, key: K) -> int:
        return len(self._queues.get(key, ()))

    def active_keys(self) -> list[K]:
        return list(self._current)

    def drop_queued(self, key: K) -> int:
        """Forget the items waiting behind the first one of `key` (a fleet worker whose partition
        moved on: they are another worker's to run); returns how many."""
        queue = self._queues.get(key)
        if not queue or len(queue) < 2:
            return 0
        head, dropped = queue[0], len(queue) - 1
        queue.clear()
        queue.append(head)
        return dropped

    def take_queued(self, key: K, which: Callable[[T], bool]) -> list[T]:
        """Remove and return the items waiting behind the first one of `key` that `which` picks
        (a person cancelling their own messages; the running item and the others stay)."""
        queue = self._queues.get(key)
        if not queue or len(queue) < 2:
            return []
        head, rest = queue[0], list(queue)[1:]
        taken = [item for item in rest if which(item)]
        if taken:
            queue.clear()
            queue.extend([head, *(item for item in rest if not any(item is t for t in taken))])
        return taken

    def cancel_current(self, key: K) -> bool:
        """Cancel the item now running for `key` (queued items still run)."""
        task = self._current.get(key)
        if task is None or task.done():
            return False
        task.cancel()
        return True

    async def join(self) -> None:
        while self._workers:
            await asyncio.gather(*list(self._workers.values()), return_exceptions=True)

    async def close(self) -> None:
        for task in list(self._workers.values()):
            task.cancel()
        await asyncio.gather(*list(self._workers.values()), return_exceptions=True)

    async def _work(self, key: K) -> None:
        queue = self._queues[key]
        try:
            while queue:
                item = queue[0]
                if self._cap:
                    await self._cap.acquire()
                try:
                    task = asyncio.create_task(self._handler(key, item))
                    self._current[key] = task
                    try:
                        await asyncio.shield(task)
                    except asyncio.CancelledError:
                        if not task.cancelled():
                            # The lane itself is being shut down: stop the item too.
                            task.cancel()
                            raise
                    except WriteRefused as exc:  # a fleet worker that lost the session: one line, no traceback
                        log.warning("lane %s: %s", key, exc)
                    except Exception:
                        log.exception("lane %s: handler failed", key)
                finally:
                    self._current.pop(key, None)
                    if self._cap:
                        self._cap.release()
                queue.popleft()
        finally:
            self._workers.pop(key, None)
            if not queue:
                self._queues.pop(key, None)
