"""Each Discord bot's own API base and Gateway address, so several bots (accounts) run in one process.

discord.py builds every REST URL from one class attribute (`discord.http.Route.BASE`) and opens the
Gateway at another (`DiscordWebSocket.DEFAULT_GATEWAY`): setting them would point every bot of the
process at one server. Instead each client gets `AccountHTTP`, discord.py's own HTTP client that moves
its requests from the default base to its bot's `base_url` and its Gateway connection to the address
its base announced (GET /gateway/bot). Interaction answers go through discord.py's webhook adapter
with the client's session: `answer_interactions_at_own_base()` (idempotent) makes that adapter move
them to the base of the client that owns the session, and leaves every other request as it was.
"""

from __future__ import annotations

import weakref
from typing import Any

import aiohttp
import discord.gateway
import discord.http
import discord.webhook.async_ as webhook_async
import yarl

# a client's aiohttp session -> its bot's API base (interaction answers carry only the session)
_BASES: "weakref.WeakKeyDictionary[aiohttp.ClientSession, str]" = weakref.WeakKeyDictionary()


def moved(url: str, base: str | None) -> str:
    """`url` under discord.py's default API base, moved to `base` (unchanged without one or elsewhere)."""
    default = discord.http.Route.BASE
    return base + url[len(default):] if base and url.startswith(default) else url


class AccountHTTP(discord.http.HTTPClient):
    """discord.py's REST client for one bot: its requests go to `api_base`, its Gateway to `gateway`."""

    api_base: str | None = None
    gateway: yarl.URL | None = None

    async def request(self, route: discord.http.Route, **kwargs: Any) -> Any:
        route.url = moved(route.url, self.api_base)
        return await super().request(route, **kwargs)

    async def static_login(self, token: str) -> Any:
        user = await super().static_login(token)
        if self.api_base:
            _BASES[self._HTTPClient__session] = self.api_base  # type: ignore[attr-defined]
        return user

    async def ws_connect(self, url: str, *, compress: int = 0) -> aiohttp.ClientWebSocketResponse:
        """The first connection and a fresh one after an invalidated session use discord.py's default Gateway:
        this bot's own instead (a RESUME goes to the address Discord gave in READY, as it comes)."""
        asked, default = yarl.URL(url), discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY
        if self.gateway is not None and asked.with_query(None) == default:
            url = str(self.gateway.with_query(asked.query))
        return await super().ws_connect(url, compress=compress)


def use_account_http(client: discord.Client, api_base: str | None) -> AccountHTTP:
    """Make `client`'s HTTP client an AccountHTTP for `api_base` (right after the client is built, before
    it logs in: its connection state already holds this same object, so nothing else changes)."""
    http = client.http
    http.__class__ = AccountHTTP
    assert isinstance(http, AccountHTTP)
    http.api_base = api_base
    return http


def gateway_address(url: str) -> yarl.URL:
    """The Gateway address GET /gateway/bot gave, with the path discord.py expects."""
    gateway = yarl.URL(url)
    return gateway if gateway.path else gateway.with_path("/")


_original_webhook_request = webhook_async.AsyncWebhookAdapter.request


async def _webhook_request(self: webhook_async.AsyncWebhookAdapter, route: discord.http.Route,
                           session: aiohttp.ClientSession, **kwargs: Any) -> Any:
    route.url = moved(route.url, _BASES.get(session))
    return await _original_webhook_request(self, route, session, **kwargs)


def answer_interactions_at_own_base() -> None:
    """Interaction answers (defer, followups, edits of the original response) of a client with its own base go
    there; requests on any other session are untouched."""
    webhook_async.AsyncWebhookAdapter.request = _webhook_request  # type: ignore[method-assign]


__all__ = ["AccountHTTP", "answer_interactions_at_own_base", "gateway_address", "moved", "use_account_http"]
