"""DingTalk's HTTP side over aiohttp: the app's access token, a reply through a message's session webhook,
and the robot OpenAPI for what comes after the webhook expired (cron results, late approvals).

- `POST /v1.0/oauth2/accessToken` `{appKey, appSecret}` -> `{accessToken, expireIn}` (7,200 s), cached per
  client and renewed five minutes early, or at once when a send is refused with 401.
- A session webhook (`sessionWebhook` of a robot message, valid until `sessionWebhookExpiredTime`): POST
  `{"msgtype": "markdown", "markdown": {"title", "text"}}`, answered `{"errcode": 0, "errmsg": "ok"}`.
- `POST /v1.0/robot/oToMessages/batchSend` `{robotCode, userIds, msgKey, msgParam}` (1:1) and
  `POST /v1.0/robot/groupMessages/send` `{robotCode, openConversationId, msgKey, msgParam}` (groups), with
  `x-acs-dingtalk-access-token`; errors are `{"code", "message", "requestid"}` with an HTTP status.

The official SDK sends with blocking `requests` to a fixed host and swallows its errors, so sends are
here, where a refusal becomes the kit's DeliveryError.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import aiohttp

NETWORK = (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, OSError)
TOKEN_EARLY = 300  # seconds before its expiry a token is renewed (the SDK's own margin)
THROTTLED = {130101, 660026}  # a webhook's "send too fast" answers


class ApiError(Exception):
    """DingTalk refused a call: the HTTP status, its error code and message."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"HTTP {status} {code}: {message}".strip())
        self.status, self.code, self.message = status, code, message


class TokenRefused(ApiError):
    """The token endpoint refused the app's Client ID or Secret: nothing can be sent until they are fixed."""


class SentMaybe(Exception):
    """The request went out and no answer came back: it may have been delivered."""


class DingTalkApi:
    def __init__(self, api_base: str, client_id: str, client_secret: str, *, timeout: float) -> None:
        self.api_base = api_base.rstrip("/")
        self._client_id, self._client_secret = client_id, client_secret
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._session: aiohttp.ClientSession | None = None
        self._token: tuple[str, float] | None = None  # (token, monotonic time to renew it)
        self._token_lock = asyncio.Lock()

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=self._timeout)
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _post(self, url: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> Any:
        try:
            async with self._client().post(url, json=body, headers=headers) as response:
                raw = await response.read()
                try:
                    answer = json.loads(raw) if raw else {}
                except ValueError:
                    answer = {}
                if response.status >= 400:
                    answer = answer if isinstance(answer, dict) else {}
                    raise ApiError(response.status, str(answer.get("code") or answer.get("errcode") or ""),
                                   str(answer.get("message") or answer.get("errmsg") or raw[:200].decode("utf-8", "replace")))
                return answer
        except asyncio.TimeoutError:
            raise SentMaybe(f"no answer from {url.split('?')[0]}") from None

    async def access_token(self, *, fresh: bool = False) -> str:
        """The app's access token, cached until five minutes before it expires."""
        async with self._token_lock:
            if self._token is not None and not fresh and time.monotonic() < self._token[1]:
                return self._token[0]
            try:
                answer = await self._post(f"{self.api_base}/v1.0/oauth2/accessToken",
                                          {"appKey": self._client_id, "appSecret": self._client_secret})
            except SentMaybe:
                raise aiohttp.ServerTimeoutError("no answer to the access token request") from None
            except ApiError as e:
                if e.status in (400, 401, 403):
                    raise TokenRefused(e.status, e.code, e.message) from None
                raise
            token = str((answer or {}).get("accessToken") or "")
            if not token:
                raise ApiError(200, "noToken", "the token endpoint answered without accessToken")
            lifetime = float((answer or {}).get("expireIn") or 7200)
            self._token = (token, time.monotonic() + max(lifetime - TOKEN_EARLY, lifetime / 2))
            return token

    async def robot_send(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """One robot OpenAPI send; a 401 renews the token once and tries again (it expired early)."""
        url = f"{self.api_base}{path}"
        token = await self.access_token()
        try:
            return await self._post(url, body, {"x-acs-dingtalk-access-token": token}) or {}
        except ApiError as e:
            if e.status != 401:
                raise
        token = await self.access_token(fresh=True)
        return await self._post(url, body, {"x-acs-dingtalk-access-token": token}) or {}

    async def download(self, robot_code: str, download_code: str, limit: int) -> bytes:
        """A file a person sent the robot: `POST /v1.0/robot/messageFiles/download` names a short-lived URL,
        read up to `limit` bytes (the caller refuses what reaches it: never a whole oversized file)."""
        answer = await self.robot_send("/v1.0/robot/messageFiles/download",
                                       {"downloadCode": download_code, "robotCode": robot_code})
        url = str(answer.get("downloadUrl") or "")
        if not url.startswith(("https://", "http://")):
            raise ApiError(200, "noDownloadUrl", "the download answer named no URL")
        data = bytearray()
        async with self._client().get(url) as response:
            if response.status >= 400:
                raise ApiError(response.status, "download", f"the file's URL answered HTTP {response.status}")
            async for chunk in response.content.iter_chunked(64 * 1024):
                data += chunk
                if len(data) >= limit:
                    break
        return bytes(data[:limit])

    async def upload(self, media_base: str, name: str, data: bytes, mime: str) -> str:
        """A file for a robot's file message: `POST <media_base>/media/upload?access_token=` (the older API,
        which takes the same token) -> its media_id. Nothing shows until it is sent: safe to retry."""
        form = aiohttp.FormData()
        form.add_field("type", "file")
        form.add_field("media", data, filename=name, content_type=mime)
        token = await self.access_token()
        url = f"{media_base.rstrip('/')}/media/upload"
        try:
            async with self._client().post(url, params={"access_token": token}, data=form) as response:
                raw = await response.read()
        except asyncio.TimeoutError:
            raise aiohttp.ServerTimeoutError("no answer to the media upload") from None
        try:
            answer = json.loads(raw) if raw else {}
        except ValueError:
            answer = {}
        answer = answer if isinstance(answer, dict) else {}
        code = int(answer.get("errcode") or 0) if str(answer.get("errcode") or "0").lstrip("-").isdigit() else -1
        if response.status >= 400 or code or not answer.get("media_id"):
            raise ApiError(response.status if response.status >= 400 else 200, str(code or "noMediaId"),
                           str(answer.get("errmsg") or f"HTTP {response.status}"))
        return str(answer["media_id"])

    async def webhook_send(self, url: str, body: dict[str, Any]) -> None:
        """A reply through a session webhook; its `errcode` other than 0 is a refusal."""
        answer = await self._post(url, body)
        code = int((answer or {}).get("errcode") or 0) if isinstance(answer, dict) else 0
        if code:
            raise ApiError(200, str(code), str(answer.get("errmsg") or ""))
