"""The provider contract the loop depends on; adapters keep vendor SDKs out of the loop."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

TextCallback = Callable[[str], None]


def restart_preview(on_text: TextCallback | None) -> None:
    """Tell the receiver of streamed text that what it got so far is not part of the answer: the
    attempt failed and the reply starts again (a retry, a fallback model) or ends in an error.
    A receiver that shows a live preview has a `restart()` method; a plain callable needs none."""
    restart = getattr(on_text, "restart", None)
    if callable(restart):
        restart()


@dataclass
class ModelRequest:
    model: str
    system: list[dict[str, Any]]
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] = field(default_factory=list)
    max_tokens: int = 4096
    # Top-level automatic cache breakpoint (end of the messages); adapters without caching ignore it.
    cache_control: dict[str, Any] | None = None
    # Whose conversation this is; adapters ignore it, wrappers (checkpoint replay) key on it.
    session_key: str = ""
    # Models tried after `model` fails, of the session's agent (config/agents.py); None: the provider's own.
    fallback_models: list[str] | None = None


def text_of(blocks: list[dict[str, Any]]) -> str:
    """The text of a list of content blocks (tool_use and other blocks skipped)."""
    return "".join(b.get("text", "") for b in blocks if b.get("type") == "text")


@dataclass
class ModelResponse:
    content: list[dict[str, Any]]
    stop_reason: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    model: str = ""
    latency_ms: float = 0.0

    @property
    def text(self) -> str:
        return text_of(self.content)

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        return [b for b in self.content if b.get("type") == "tool_use"]


class ProviderError(Exception):
    """The model could not be reached or refused; `str(error)` is fit to show the user."""

    def __init__(self, message: str, *, retryable: bool = False, cause: str = "") -> None:
        super().__init__(message)
        self.retryable = retryable
        self.cause = cause  # the short technical reason (e.g. "overloaded_error from the model API"), if any


class Provider(Protocol):
    name: str

    async def complete(self, request: ModelRequest, on_text: TextCallback | None = None) -> ModelResponse: ...

    async def close(self) -> None: ...


class UnconfiguredProvider:
    """Stands in when no key is set, so the daemon runs and every answer says how to fix it."""

    name = "unconfigured"
    MESSAGE = (
        "No model provider is configured. Set ANTHROPIC_API_KEY (or providers.anthropic.api_key, or an "
        "OpenAI-compatible endpoint in providers.openai_compat in config.toml) and restart `clawgate gateway`."
    )

    async def complete(self, request: ModelRequest, on_text: TextCallback | None = None) -> ModelResponse:
        raise ProviderError(self.MESSAGE)

    async def close(self) -> None:
        return None
