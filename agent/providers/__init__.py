"""Model providers: thin adapters that turn a ModelRequest into a ModelResponse."""

from .base import ModelRequest, ModelResponse, Provider, ProviderError, UnconfiguredProvider

__all__ = ["ModelRequest", "ModelResponse", "Provider", "ProviderError", "UnconfiguredProvider"]
