"""The Web API side: clients, what Slack's errors mean for the kit, private file downloads.

Two clients on the same bot token: ``send`` has no retry handler of its own, so a 429 reaches
the kit's delivery as DeliveryError(retry_after=…) and a dropped connection is never retried
blindly (a chat.postMessage that may have gone out is Unconfirmed, not sent twice); ``lookup``
(auth.test, users.info, files.info: reads, safe to repeat) keeps slack_sdk's connection retry
and honours Retry-After by itself.
"""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient

from clawgate.channels.kit import DeliveryError, Unconfirmed

SLACK_API = "https://slack.com/api/"
# Errors that say the token itself is refused: fixing it needs a new token, not a retry.
AUTH_ERRORS = frozenset({"invalid_auth", "not_authed", "account_inactive", "token_revoked", "token_expired",
                         "not_allowed_token_type", "missing_scope", "team_access_not_granted"})
# Errors Slack documents as temporary; every other error is about the request and is not retried.
TRANSIENT_ERRORS = frozenset({"ratelimited", "internal_error", "fatal_error", "service_unavailable",
                              "request_timeout", "team_added_to_org"})


def api_url(base_url: str | None) -> str:
    """The Web API base slack_sdk wants: ends with a slash."""
    url = (base_url or SLACK_API).strip()
    return url if url.endswith("/") else url + "/"


def clients(token: str, base_url: str | None) -> tuple[AsyncWebClient, AsyncWebClient]:
    """(send, lookup) clients; see the module docstring for why two."""
    url = api_url(base_url)
    send = AsyncWebClient(token=token, base_url=url, timeout=30, retry_handlers=[])
    lookup = AsyncWebClient(token=token, base_url=url, timeout=30, retry_handlers=[
        AsyncConnectionErrorRetryHandler(), AsyncRateLimitErrorRetryHandler(max_retry_count=2)])
    return send, lookup


def slack_error(exc: SlackApiError) -> str:
    data = exc.response.data  # an answer that is not Slack's JSON (a wrong base_url) is text
    return str((data.get("error") if isinstance(data, dict) else None) or f"HTTP {exc.response.status_code}")


def _header(exc: SlackApiError, name: str) -> str | None:
    for key, value in (exc.response.headers or {}).items():
        if key.lower() == name.lower():
            return str(value[0] if isinstance(value, list) else value)
    return None


def delivery_error(exc: BaseException, what: str) -> Exception:
    """What a failed send means for the kit: retry (when), never retry, or maybe sent."""
    if isinstance(exc, SlackApiError):
        error = slack_error(exc)
        status = exc.response.status_code
        if status == 429 or error == "ratelimited":
            raw = _header(exc, "Retry-After")
            try:
                retry_after = max(float(raw), 0.0) if raw is not None else 1.0
            except ValueError:
                retry_after = 1.0
            return DeliveryError(f"Slack rate limit on {what}: retry after {retry_after:g} s", retry_after=retry_after)
        if status >= 500 or error in TRANSIENT_ERRORS:
            return DeliveryError(f"Slack {what} failed for now: {error}")
        return DeliveryError(f"Slack refused {what}: {error}", permanent=True)
    if isinstance(exc, aiohttp.ClientConnectorError):  # no connection: surely not sent
        return DeliveryError(f"Slack unreachable for {what}: {exc}")
    if isinstance(exc, (asyncio.TimeoutError, aiohttp.ClientError)):
        return Unconfirmed(f"Slack {what} may have gone out: {type(exc).__name__}")
    return DeliveryError(f"Slack {what} failed: {exc}")


def token_may_go_to(url: str, base_url: str | None) -> bool:
    """The bot token is sent only to Slack's own file hosts (or the configured API host)."""
    host = (urlsplit(url).hostname or "").lower()
    if base_url and host == (urlsplit(api_url(base_url)).hostname or "").lower():
        return True
    return urlsplit(url).scheme == "https" and (host == "slack.com" or host.endswith(".slack.com"))


async def download_private(file: dict[str, Any], *, token: str, base_url: str | None, lookup: AsyncWebClient,
                           limit: int) -> bytes:
    """A shared file's bytes from url_private, with the bot token, at most ``limit`` bytes.
    Files announced by id only are looked up with files.info first."""
    if not (file.get("url_private_download") or file.get("url_private")):
        file = (await lookup.files_info(file=file["id"]))["file"]
    url = str(file.get("url_private_download") or file.get("url_private") or "")
    if not url or not token_may_go_to(url, base_url):
        raise ValueError(f"Slack file {file.get('id')}: not on a Slack file host, not fetched")
    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        async with session.get(url, headers={"Authorization": f"Bearer {token}"}) as resp:
            if resp.status != 200:
                raise ValueError(f"Slack file {file.get('id')}: HTTP {resp.status}")
            if resp.content_type == "text/html" and file.get("mimetype") != "text/html":
                raise ValueError(f"Slack file {file.get('id')}: Slack answered with its sign-in page; "
                                 "give the app the files:read scope and reinstall it")
            data = bytearray()
            async for block in resp.content.iter_chunked(64 * 1024):
                data += block
                if len(data) > limit:
                    raise ValueError(f"Slack file {file.get('id')}: larger than {limit} bytes")
            return bytes(data)
