"""An ordered list of providers tried in turn (SPEC 4): Anthropic first, then e.g. a local model.

A provider is left for the next only when it fails with a retryable ProviderError (it is down,
overloaded or unreachable after its own retries); a permanent error (a rejected key, a request
too large) is the answer, since the next provider would not make it right.

Each provider has a circuit breaker (breaker.py): one that failed `threshold` times in a row is
skipped without a request until its cooldown passes, so a dead provider costs no time per turn.
When every provider is skipped or failed, the error names each one and when it is tried again.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

from .base import ModelRequest, ModelResponse, Provider, ProviderError, TextCallback
from .breaker import CircuitBreaker, OnChange

log = logging.getLogger(__name__)
ERROR_CHARS = 160  # of a provider's error kept for the breaker's one-line description


class ProviderChain:
    def __init__(self, providers: list[Provider], *, threshold: int | None = 3, cooldown: float = 60.0,
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time,
                 on_breaker: OnChange | None = None) -> None:
        """threshold=None: no breakers (every provider is tried on every call)."""
        if not providers:
            raise ValueError("ProviderChain needs at least one provider")
        self.providers = list(providers)
        self.name = "->".join(p.name for p in self.providers)
        self.breakers: list[CircuitBreaker | None] = [
            CircuitBreaker(p.name, threshold=threshold, cooldown=cooldown, clock=clock, wall=wall,
                           on_change=self._changed) if threshold is not None else None
            for p in self.providers]
        self.on_breaker = on_breaker

    def warm(self) -> None:
        """Warm every provider that can be warmed (the daemon calls this in a thread)."""
        for provider in self.providers:
            warm = getattr(provider, "warm", None)
            if warm is not None:
                warm()

    def forget_session(self, key: str) -> None:
        """The session left memory: providers that cache per session drop theirs."""
        for provider in self.providers:
            if (forget := getattr(provider, "forget_session", None)) is not None:
                forget(key)

    def breaker_states(self) -> list[dict[str, Any]]:
        """Each provider's breaker, for `status` (closed for all when breakers are off)."""
        return [b.snapshot() if b is not None else {"name": p.name, "state": "closed", "failures": 0,
                                                    "retryAt": None, "lastError": ""}
                for p, b in zip(self.providers, self.breakers)]

    async def complete(self, request: ModelRequest, on_text: TextCallback | None = None) -> ModelResponse:
        failures: list[str] = []
        paused: list[CircuitBreaker] = []
        for index, (provider, breaker) in enumerate(zip(self.providers, self.breakers)):
            if breaker is not None and not breaker.allow():
                paused.append(breaker)
                continue
            try:
                response = await provider.complete(request, on_text)
            except ProviderError as exc:
                if not exc.retryable:
                    if breaker is not None:
                        breaker.release()
                    raise
                if breaker is not None:
                    breaker.failure(" ".join((exc.cause or str(exc)).split())[:ERROR_CHARS])
                failures.append(f"{provider.name}: {exc}")
                if index + 1 < len(self.providers):
                    log.warning("provider %s unavailable (%s); falling back to %s", provider.name, exc,
                                self.providers[index + 1].name)
                continue
            except BaseException:  # cancelled, or a bug: not the provider's fault
                if breaker is not None:
                    breaker.release()
                raise
            if breaker is not None:
                breaker.success()
            return response
        raise ProviderError(_all_failed(failures, paused), retryable=True)

    def _changed(self, kind: str, fields: dict[str, Any]) -> None:
        if kind == "breaker_open":
            log.warning("provider %s paused for %.0f s after %d failed call(s)", fields["provider"],
                        fields.get("cooldownSeconds", 0), fields["failures"])
        else:
            log.info("provider %s answered again; its breaker is closed", fields["provider"])
        if self.on_breaker is not None:
            self.on_breaker(kind, fields)

    async def close(self) -> None:
        errors: list[BaseException] = []
        for provider in self.providers:
            try:
                await provider.close()
            except Exception as exc:  # close them all, then report the first failure
                errors.append(exc)
        if errors:
            raise errors[0]

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"ProviderChain({self.providers!r})"


def _all_failed(failures: list[str], paused: list[CircuitBreaker]) -> str:
    """One line: what failed now, which providers are paused and until when."""
    if not failures:
        return ("No model provider is available right now: " + "; ".join(b.describe() for b in paused)
                + ". Send your message again after that.")
    also = f"; {'; '.join(b.describe() for b in paused)}" if paused else ""
    return f"Every model provider failed ({'; '.join(failures)}{also}). Please try again in a few minutes."
