"""The anthropic SDK's private names that the direct path (anthropic_http.py) relies on.

The direct path is faster because it reuses the SDK's internals; the SDK may rename them in any
release. pyproject.toml pins the SDK to one minor line, and at start-up every name below is
resolved: if any is missing the provider uses the SDK's public `post` path (slower, same answers)
and says so in one log line naming what is missing, instead of failing on the first message.
"""

from __future__ import annotations

import importlib
from typing import Any

# "module:attribute.attribute" resolved on the imported module (classes and functions).
PRIVATE_NAMES: tuple[str, ...] = (
    "anthropic._models:FinalRequestOptions.construct",
    "anthropic._streaming:SSEDecoder.aiter_bytes",
    "anthropic._vendor.httpx_aiohttp.transport:AiohttpTransport.get_client",
    "anthropic._vendor.httpx_aiohttp.transport:map_aiohttp_exceptions",
    "anthropic._client:AsyncAnthropic._build_request",
    "anthropic._client:AsyncAnthropic._make_status_error",
    "anthropic._client:AsyncAnthropic._make_status_error_from_response",
    "httpx2:AsyncClient._transport_for_url",
)
# Resolved on a built client: instance attributes that exist only once it is constructed.
CLIENT_NAMES: tuple[str, ...] = ("client._client", "transport.proxy", "transport.client")


def _resolve(spec: str) -> bool:
    module_name, _, attributes = spec.partition(":")
    try:
        value: Any = importlib.import_module(module_name)
    except ImportError:
        return False
    for attribute in attributes.split("."):
        if not hasattr(value, attribute):
            return False
        value = getattr(value, attribute)
    return True


def missing_private_names(client: Any = None) -> list[str]:
    """Every private name the direct path needs that this SDK lacks ([] when all resolve).
    With `client` (an AsyncAnthropic), its instance attributes are checked too."""
    missing = [spec for spec in PRIVATE_NAMES if not _resolve(spec)]
    if client is None:
        return missing
    inner = getattr(client, "_client", None)
    if inner is None:
        return [*missing, "client._client"]
    transport_for_url = getattr(inner, "_transport_for_url", None)
    if transport_for_url is None:
        return missing  # already named above
    transport = transport_for_url(client.base_url)
    if type(transport).__name__ == "AiohttpTransport":  # other transports never take the direct path
        missing += [spec for spec in CLIENT_NAMES if spec.startswith("transport.")
                    and not hasattr(transport, spec.partition(".")[2])]
    return missing
