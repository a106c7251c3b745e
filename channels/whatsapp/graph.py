"""The Graph API side of the Cloud API: one aiohttp session, and what Meta's errors mean for the kit.

Meta answers every failure as `{"error": {"code", "error_subcode", "message", ...}}`; the code says
what to do, not the HTTP status (a rate limit is a 400). Codes read here (Meta's "WhatsApp error
codes" page): 190 (token expired or invalid) and 0/10/200-299 (permissions) mean our credentials;
4, 80007, 130429, 131056 are rate limits (no retry time is given); 131047 is the 24-hour
customer-service window; 100 with subcode 33 is an object that does not exist (a wrong
phone_number_id); 131000, 1, 2, 131016 are Meta's own trouble, retried. Every other error is about the
request and is not retried. A send whose answer never came may have gone out: Unconfirmed.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from clawgate.channels.kit import DeliveryError, Unconfirmed

AUTH_CODES = frozenset({0, 10, 190, *range(200, 300)})
RATE_CODES = frozenset({4, 80007, 130429, 131056})
WINDOW_CODES = frozenset({131047})
TRANSIENT_CODES = frozenset({1, 2, 131000, 131016})
NETWORK = (aiohttp.ClientError, asyncio.TimeoutError, OSError)


@dataclass(frozen=True)
class GraphError(Exception):
    """A refusal from the Graph API, read from its error object."""

    status: int
    code: int
    subcode: int
    message: str
    retry_after: float | None = None

    def __str__(self) -> str:
        return f"({self.code}) {self.message}" + (f" [subcode {self.subcode}]" if self.subcode else "")

    @property
    def auth(self) -> bool:
        return self.code in AUTH_CODES or self.status == 401

    @property
    def no_such_object(self) -> bool:
        return self.code == 100 and self.subcode == 33


class Graph:
    """`POST/GET /{version}/...` with the bearer token; the token goes only to the Graph API's host
    and Meta's media hosts (or, in tests, the configured base URL's host)."""

    def __init__(self, *, token: str, base_url: str | None, version: str, phone_number_id: str,
                 timeout: float = 30) -> None:
        self.base = (base_url or "https://graph.facebook.com").rstrip("/")
        self.version, self.phone_number_id = version, phone_number_id
        self._token = token
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._session: aiohttp.ClientSession | None = None

    def url(self, *parts: str) -> str:
        return "/".join([self.base, self.version, *parts])

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._token}"}

    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=self._timeout)
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def call(self, method: str, *parts: str, json: dict[str, Any] | None = None,
                   data: aiohttp.FormData | None = None, params: dict[str, str] | None = None) -> dict[str, Any]:
        async with self.session().request(method, self.url(*parts), json=json, data=data, params=params,
                                          headers=self._headers()) as resp:
            try:
                body = await resp.json(content_type=None)
            except ValueError:
                body = None
            if resp.status >= 400 or not isinstance(body, dict) or "error" in body:
                raise _graph_error(resp, body)
            return body

    async def phone_number(self) -> dict[str, Any]:
        """The business number's display number and verified name: proves the token and the id together."""
        return await self.call("GET", self.phone_number_id,
                               params={"fields": "display_phone_number,verified_name"})

    async def send(self, payload: dict[str, Any]) -> str:
        """POST a message; its wamid."""
        body = await self.call("POST", self.phone_number_id, "messages",
                               json={"messaging_product": "whatsapp", "recipient_type": "individual", **payload})
        messages = body.get("messages") or [{}]
        return str(messages[0].get("id") or "")

    async def read_and_typing(self, message_id: str, typing: bool) -> None:
        payload: dict[str, Any] = {"messaging_product": "whatsapp", "status": "read", "message_id": message_id}
        if typing:
            payload["typing_indicator"] = {"type": "text"}
        await self.call("POST", self.phone_number_id, "messages", json=payload)

    async def upload(self, name: str, data: bytes, mime: str) -> str:
        form = aiohttp.FormData()
        form.add_field("messaging_product", "whatsapp")
        form.add_field("type", mime)
        form.add_field("file", data, filename=name, content_type=mime)
        body = await self.call("POST", self.phone_number_id, "media", data=form)
        return str(body.get("id") or "")

    def may_carry_token(self, url: str) -> bool:
        """Media URLs Meta hands out are on its own hosts; the token never goes anywhere else."""
        host = (urlsplit(url).hostname or "").lower()
        if host == (urlsplit(self.base).hostname or "").lower():
            return True
        meta = ("facebook.com", "fbsbx.com", "whatsapp.net", "fbcdn.net")
        return urlsplit(url).scheme == "https" and any(host == d or host.endswith("." + d) for d in meta)

    async def download(self, media_id: str, limit: int) -> bytes:
        """A media id -> its URL (GET /{media-id}) -> the bytes, with the token, at most `limit` bytes."""
        info = await self.call("GET", media_id)
        url = str(info.get("url") or "")
        size = info.get("file_size")
        if isinstance(size, int) and size > limit:
            raise ValueError(f"WhatsApp media {media_id}: {size} bytes, over the limit of {limit}")
        if not url or not self.may_carry_token(url):
            raise ValueError(f"WhatsApp media {media_id}: not on a Meta host, not fetched")
        async with self.session().get(url, headers=self._headers()) as resp:
            if resp.status != 200:
                raise ValueError(f"WhatsApp media {media_id}: HTTP {resp.status}")
            data = bytearray()
            async for block in resp.content.iter_chunked(64 * 1024):
                data += block
                if len(data) > limit:
                    raise ValueError(f"WhatsApp media {media_id}: larger than {limit} bytes")
            return bytes(data)


def _graph_error(resp: aiohttp.ClientResponse, body: Any) -> GraphError:
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return GraphError(resp.status, 0 if resp.status in (401, 403) else -1, 0, f"HTTP {resp.status}")
    raw = resp.headers.get("Retry-After")
    try:
        retry_after = max(float(raw), 0.0) if raw is not None else None
    except ValueError:
        retry_after = None
    code = error.get("code")
    subcode = error.get("error_subcode")
    return GraphError(resp.status, code if isinstance(code, int) else -1, subcode if isinstance(subcode, int) else 0,
                      str(error.get("message") or "")[:300], retry_after)


def delivery_error(exc: BaseException, what: str, *, rate_wait: float) -> Exception:
    """What a failed Graph call means for the kit's delivery: retry (when), never retry, or maybe sent."""
    if isinstance(exc, GraphError):
        if exc.auth:
            return DeliveryError(f"WhatsApp refused the access token on {what}: {exc}", permanent=True,
                                 channel_down=True)
        if exc.code in RATE_CODES or exc.status == 429:
            wait = exc.retry_after if exc.retry_after is not None else rate_wait
            return DeliveryError(f"WhatsApp rate limit on {what} {exc}: retry after {wait:g} s", retry_after=wait)
        if exc.code in WINDOW_CODES:
            return DeliveryError(f"WhatsApp refused {what}: outside the 24-hour customer-service window {exc}",
                                 permanent=True)
        if exc.status >= 500 or exc.code in TRANSIENT_CODES:
            return DeliveryError(f"WhatsApp {what} failed for now: {exc}")
        if exc.code == 100 and "at most" in exc.message.lower():  # "Param text['body'] must be at most 4096 ..."
            return DeliveryError(f"WhatsApp refused {what} as too long: {exc}", permanent=True, too_large=True)
        return DeliveryError(f"WhatsApp refused {what}: {exc}", permanent=True)
    if isinstance(exc, aiohttp.ClientConnectorError):  # no connection: surely not sent
        return DeliveryError(f"WhatsApp unreachable for {what}: {exc}")
    if isinstance(exc, (asyncio.TimeoutError, aiohttp.ClientError)):
        return Unconfirmed(f"WhatsApp {what} may have gone out: {type(exc).__name__}")
    return DeliveryError(f"WhatsApp {what} failed: {exc}")
