"""The Bot Connector for replies: the Agents SDK's ConnectorClient, one per serviceUrl, with our token.

Only serviceUrls recorded from verified activities are ever called (ServiceUrls): a forged or hostile
activity cannot make the daemon send its access token elsewhere, because it never gets past the token
check, and the token's `serviceurl` claim must name the activity's serviceUrl. They are kept in the
kit's store per conversation, so a reply after a restart, or a cron result, finds its Connector.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
from microsoft_agents.hosting.core.connector.client import ConnectorClient

from clawgate.channels.kit import ChannelStore, DeliveryError, Unconfirmed
from clawgate.channels.teams.auth import NETWORK, ServiceError, TokenClient, TokenRefused


class ServiceUrls:
    """conversation -> the serviceUrl its verified activities came from (the kit's store)."""

    def __init__(self, store: ChannelStore) -> None:
        self._store = store

    def record(self, chat_id: str, service_url: str) -> None:
        url = service_url if service_url.endswith("/") else service_url + "/"
        if self._store.kv_get(f"service_url:{chat_id}") != url:
            self._store.kv_set(f"service_url:{chat_id}", url)

    def of(self, chat_id: str) -> str | None:
        return self._store.kv_get(f"service_url:{chat_id}")


class Connectors:
    """ConnectorClients by serviceUrl, made again when the token changes (the SDK fixes it per client)."""

    def __init__(self, tokens: TokenClient, timeout: float) -> None:
        self._tokens = tokens
        self._timeout = timeout
        self._clients: dict[str, tuple[str, ConnectorClient]] = {}
        self._lock = asyncio.Lock()

    async def client(self, service_url: str) -> ConnectorClient:
        token = await self._tokens.token()
        async with self._lock:
            held = self._clients.get(service_url)
            if held is not None and held[0] == token:
                return held[1]
            if held is not None:
                await held[1].close()
            session = aiohttp.ClientSession(base_url=service_url,
                                            timeout=aiohttp.ClientTimeout(total=self._timeout))
            client = ConnectorClient(service_url, token, session=session)
            self._clients[service_url] = (token, client)
            return client

    async def close(self) -> None:
        async with self._lock:
            clients, self._clients = self._clients, {}
        for _token, client in clients.values():
            await client.close()


def delivery_error(e: BaseException, what: str) -> Exception:
    """What the kit does with a failed call: DeliveryError (permanent / retry_after / too_large / channel
    down) or Unconfirmed (a timeout after the request went out: it may have arrived)."""
    if isinstance(e, TokenRefused):
        return DeliveryError(f"Teams: {e}: check [channels.teams] app_id and app_password", channel_down=True)
    if isinstance(e, aiohttp.ClientResponseError):
        status = e.status
        if status == 429:
            retry = (e.headers or {}).get("Retry-After") if e.headers else None
            try:
                wait = float(retry) if retry is not None else 1.0
            except ValueError:
                wait = 1.0
            return DeliveryError(f"Teams rate-limited {what}", retry_after=wait)
        if status == 401:
            return DeliveryError(f"the Bot Connector refused our token for {what} (HTTP 401)", channel_down=True)
        if status == 413:
            return DeliveryError(f"Teams refused {what} as too large", permanent=True, too_large=True)
        if 400 <= status < 500:
            return DeliveryError(f"Teams refused {what} (HTTP {status})", permanent=True)
        return DeliveryError(f"the Bot Connector answered HTTP {status} for {what}")
    if isinstance(e, ServiceError):
        return DeliveryError(f"Teams: {e}")
    if isinstance(e, asyncio.TimeoutError):
        return Unconfirmed(f"the Bot Connector did not answer {what} in time")
    if isinstance(e, NETWORK):
        return DeliveryError(f"the Bot Connector is unreachable for {what} ({e or type(e).__name__})")
    return DeliveryError(f"Teams: {what} failed ({type(e).__name__})")


def resource_id(response: Any) -> str:
    return str(getattr(response, "id", "") or "")
