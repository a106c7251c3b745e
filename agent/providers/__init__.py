"""Model providers: thin adapters that turn a ModelRequest into a ModelResponse."""

from .base import ModelRequest, ModelResponse, Provider, ProviderError, UnconfiguredProvider

__all__ = ["ModelRequest", "ModelResponse", "OpenAICompatProvider", "Provider", "ProviderChain", "ProviderError",
           "UnconfiguredProvider"]


def __getattr__(name: str):
    # Lazy, so importing the package (the loop, the CLI) does not pull in httpx or the adapters.
    if name == "ProviderChain":
        from .chain import ProviderChain
        return ProviderChain
    if name == "OpenAICompatProvider":
        from .openai_compat import OpenAICompatProvider
        return OpenAICompatProvider
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
