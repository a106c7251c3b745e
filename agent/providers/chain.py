"""An ordered list of providers tried in turn (SPEC 4): Anthropic first, then e.g. a local model.

A provider is left for the next only when it fails with a retryable ProviderError (it is down,
overloaded or unreachable after its own retries); a permanent error (a rejected key, a request
too large) is the answer, since the next provider would not make it right.
"""

from __future__ import annotations

import logging

from .base import ModelRequest, ModelResponse, Provider, ProviderError, TextCallback

log = logging.getLogger(__name__)


class ProviderChain:
    def __init__(self, providers: list[Provider]) -> None:
        if not providers:
            raise ValueError("ProviderChain needs at least one provider")
        self.providers = list(providers)
        self.name = "->".join(p.name for p in self.providers)

    def warm(self) -> None:
        """Warm every provider that can be warmed (the daemon calls this in a thread)."""
        for provider in self.providers:
            warm = getattr(provider, "warm", None)
            if warm is not None:
                warm()

    async def complete(self, request: ModelRequest, on_text: TextCallback | None = None) -> ModelResponse:
        failures: list[str] = []
        for index, provider in enumerate(self.providers):
            try:
                return await provider.complete(request, on_text)
            except ProviderError as exc:
                if not exc.retryable:
                    raise
                failures.append(f"{provider.name}: {exc}")
                if index + 1 < len(self.providers):
                    log.warning("provider %s unavailable (%s); falling back to %s", provider.name, exc,
                                self.providers[index + 1].name)
        raise ProviderError(f"Every model provider failed ({'; '.join(failures)}). Please try again in a few minutes.",
                            retryable=True)

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
