"""The one way tests wait for a condition: poll until it holds, with a generous deadline.

Why one helper: the suite runs real daemons on a loaded 2-core machine, so every wait needs the same
generous deadline and the same failure message (what was awaited, the last value seen) instead of a
dozen hand-written loops with short deadlines and bare "timed out" errors.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

DEFAULT_TIMEOUT = 60.0  # generous: a loaded 2-core machine can stall a daemon for many seconds
INTERVAL = 0.02


def _failure(what: str, timeout: float, last: object, describe: Callable[[], str] | None) -> AssertionError:
    shown = repr(last)
    shown = shown if len(shown) <= 2000 else shown[:2000] + "…"
    extra = f"\n{describe()}" if describe is not None else ""
    return AssertionError(f"timed out after {timeout:g} s waiting for {what}; last value seen: {shown}{extra}")


def wait_until(check: Callable[[], T], what: str, *, timeout: float = DEFAULT_TIMEOUT,
               interval: float = INTERVAL, describe: Callable[[], str] | None = None) -> T:
    """Call `check` until it returns something truthy, and return that; AssertionError naming `what` on timeout.

    Blocks this thread: never call it from the event loop that runs the code under test (use wait_until_async).
    `describe` adds context to the failure message (a daemon's log tail, a fake's last calls).
    """
    deadline = time.monotonic() + timeout
    while True:
        last = check()
        if last:
            return last
        if time.monotonic() > deadline:
            raise _failure(what, timeout, last, describe)
        time.sleep(interval)


async def wait_until_async(check: Callable[[], T | Awaitable[T]], what: str, *, timeout: float = DEFAULT_TIMEOUT,
                           interval: float = INTERVAL, describe: Callable[[], str] | None = None) -> T:
    """Like wait_until, but yields to the event loop; `check` may be a plain or an async function."""
    deadline = time.monotonic() + timeout
    while True:
        last = check()
        if inspect.isawaitable(last):
            last = await last
        if last:
            return last  # type: ignore[return-value]
        if time.monotonic() > deadline:
            raise _failure(what, timeout, last, describe)
        await asyncio.sleep(interval)


def wait_past(seconds: float) -> None:
    """Before a negative check ("nothing more was sent"): give whatever is due `seconds` from now (a
    retry's backoff, a poll's timeout) its chance, twice over, since a loaded machine runs it late.
    Not a condition wait: an event that must not happen has nothing to wait for."""
    time.sleep(2 * seconds)
