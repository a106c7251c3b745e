"""What a test reads back: sent texts, waits with helpful timeouts, queue state.

Why separate: inspection and waiting are the test-facing side of the fake and touch no
protocol details.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from tests.waiting import DEFAULT_TIMEOUT, wait_until, wait_until_async


class _Observation:
    """``FakeTelegram`` part: observe what the bot did and wait for it."""

    def messages_to(self, chat_id: int) -> list[str]:
        """Texts (as sent, markup included) of accepted sendMessage calls to ``chat_id``."""
        with self._cond:
            return [m["text"] for m in self.sent if m["chat_id"] == chat_id]

    def _describe_calls(self, last: int = 12) -> str:
        with self._cond:
            tail = self.calls[-last:]
        lines = []
        for method, params in tail:
            shown = json.dumps(params, default=str, ensure_ascii=False)
            lines.append(f"  {method} {shown[:300]}")
        return "\n".join(lines) or "  (no calls)"

    def wait_for(self, predicate: Callable[[], bool], timeout: float = DEFAULT_TIMEOUT) -> None:
        """Block (this thread only) until ``predicate()`` is true; AssertionError on timeout.

        Do not call from the event loop that runs the bot under test - use wait_for_async.
        """
        wait_until(predicate, self._what(predicate), timeout=timeout, describe=self._state)

    async def wait_for_async(self, predicate: Callable[[], bool], timeout: float = DEFAULT_TIMEOUT) -> None:
        """Like wait_for, but yields to the event loop (for in-process bots)."""
        await wait_until_async(predicate, self._what(predicate), timeout=timeout, describe=self._state)

    @staticmethod
    def _what(predicate: Callable[[], bool]) -> str:
        return "condition " + getattr(predicate, "__qualname__", repr(predicate))

    def _state(self) -> str:
        return (
            f"sent={len(self.sent)} pending_updates={self.pending_updates()} "
            f"confirmed_offset={self.confirmed_offset}\nlast Bot API calls:\n{self._describe_calls()}"
        )

    def wait_sent(self, chat_id: int, n: int = 1, timeout: float = DEFAULT_TIMEOUT) -> list[str]:
        """Wait until at least ``n`` messages were sent to ``chat_id``; returns all their texts."""
        self.wait_for(lambda: len(self.messages_to(chat_id)) >= n, timeout)
        return self.messages_to(chat_id)

    async def wait_sent_async(self, chat_id: int, n: int = 1, timeout: float = DEFAULT_TIMEOUT) -> list[str]:
        """Async variant of wait_sent."""
        await self.wait_for_async(lambda: len(self.messages_to(chat_id)) >= n, timeout)
        return self.messages_to(chat_id)

    @property
    def confirmed_offset(self) -> int:
        """Highest positive offset the bot has passed to getUpdates."""
        with self._cond:
            return self._confirmed_offset

    def pending_updates(self) -> int:
        """Updates Telegram would still hold (not yet confirmed by an offset)."""
        with self._cond:
            return len(self._queue)
