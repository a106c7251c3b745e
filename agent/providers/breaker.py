"""A circuit breaker per provider: stop calling a provider that keeps failing, try it again later.

Why: a provider that is down or overloaded fails only after its own retries and back-offs, so
every turn would wait through them before the chain moves on. After `threshold` such failures
in a row the breaker opens and the chain skips the provider at once; after `cooldown` seconds
one trial request (half-open) decides: success closes it, failure opens it for another cooldown.

Only failures that are the provider's fault count (a retryable ProviderError: 429/529/5xx,
timeouts, connection errors, after the provider's retries). A request the provider rejects
(400-class: a bad key, a request too large) is our fault: it neither counts nor resets.

No I/O and no clock of its own: `clock` (monotonic) and `wall` (for the retry time shown to
people) are injected, so the state machine is tested without sleeping.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Literal

State = Literal["closed", "open", "half_open"]
# (event name, fields): "breaker_open" or "breaker_close"; the composition root emits it as an event.
OnChange = Callable[[str, dict[str, Any]], None]


class CircuitBreaker:
    def __init__(self, name: str, *, threshold: int, cooldown: float, clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time, on_change: OnChange | None = None) -> None:
        if threshold < 1 or cooldown < 0:
            raise ValueError("threshold must be >= 1 and cooldown >= 0")
        self.name = name
        self.threshold = threshold
        self.cooldown = cooldown
        self._clock, self._wall = clock, wall
        self.on_change = on_change
        self._state: State = "closed"
        self.failures = 0  # consecutive failures (reset by a success)
        self.last_error = ""
        self._opened_at = 0.0
        self._trial = False  # a half-open trial request is in flight

    # reading ---------------------------------------------------------------------------------
    @property
    def state(self) -> State:
        """The state as a caller sees it now: an open breaker whose cooldown passed is half-open."""
        if self._state == "open" and self.retry_in() <= 0:
            return "half_open"
        return self._state

    def retry_in(self) -> float:
        """Seconds until an open breaker lets a trial through (0 when it would now)."""
        if self._state != "open":
            return 0.0
        return max(0.0, self._opened_at + self.cooldown - self._clock())

    def retry_at(self) -> float | None:
        """Wall-clock time (epoch seconds) of the next trial, while open."""
        return self._wall() + self.retry_in() if self._state == "open" else None

    def snapshot(self) -> dict[str, Any]:
        at = self.retry_at()
        return {"name": self.name, "state": self.state, "failures": self.failures,
                "retryAt": round(at, 3) if at is not None else None, "lastError": self.last_error}

    # deciding --------------------------------------------------------------------------------
    def allow(self) -> bool:
        """May a request go to this provider now? In half-open, only one trial at a time."""
        if self._state == "closed":
            return True
        if self._state == "open":
            if self.retry_in() > 0:
                return False
            self._state, self._trial = "half_open", False
        if self._trial:
            return False
        self._trial = True
        return True

    # outcomes --------------------------------------------------------------------------------
    def success(self) -> None:
        was = self._state
        self._state, self.failures, self._trial = "closed", 0, False
        if was != "closed":
            self._emit("breaker_close", {})

    def failure(self, error: str) -> None:
        """A failure that is the provider's fault, after its own retries."""
        self.failures += 1
        self.last_error = error
        trial, self._trial = self._state == "half_open", False
        if trial or (self._state == "closed" and self.failures >= self.threshold):
            self._state, self._opened_at = "open", self._clock()
            self._emit("breaker_open", {"trial": trial, "error": error, "cooldownSeconds": self.cooldown,
                                        "retryAt": self.retry_at()})

    def release(self) -> None:
        """Neither success nor failure (a rejected request, a cancelled call): free the trial slot."""
        self._trial = False

    def describe(self) -> str:
        """One line for people: which provider, since when it is paused, when it is tried again."""
        wait = self.retry_in()
        at = time.strftime("%H:%M:%S UTC", time.gmtime(self._wall() + wait))
        when = f"until {at} (in {wait:.0f} s)" if wait > 0 else "until its trial request finishes"
        cause = f": {self.last_error}" if self.last_error else ""
        return f"{self.name} is paused {when} after {self.failures} failed call(s){cause}"

    def _emit(self, kind: str, fields: dict[str, Any]) -> None:
        if self.on_change is not None:
            self.on_change(kind, {"provider": self.name, "failures": self.failures, **fields})
