"""The Open Platform's message API through lark-oapi's client, one per account.

The SDK's calls are synchronous (requests; the tenant_access_token is fetched and cached by the SDK's
TokenManager on the first call), so each runs in a worker thread, off the daemon's loop. Feishu answers
errors as `{"code": …, "msg": …}`: 99991663/99991668 a refused token, 99991400 a rate limit (HTTP 429
with `x-ogw-ratelimit-reset`, seconds), 230025/230001-like codes a refused message.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable

TOKEN_REFUSED = frozenset({99991663, 99991668, 99991661, 99991664, 99991665, 10003, 10014})
RATE_LIMITED = frozenset({99991400, 230020})
TOO_LONG = frozenset({230025, 230001})  # the content is too long / invalid (over 150 KB; a card over 30 KB)
NETWORK = (OSError,)  # requests' errors are OSErrors: requests comes with the extra, imported only when used


class ApiError(Exception):
    """A refused call: Feishu's code and message, the HTTP status, and how long to wait when rate-limited."""

    def __init__(self, code: int, msg: str, status: int = 0, retry_after: float | None = None) -> None:
        super().__init__(f"code {code}: {msg}" + (f" (HTTP {status})" if status else ""))
        self.code, self.msg, self.status, self.retry_after = code, msg, status, retry_after


class SentMaybe(Exception):
    """The request went out and no answer came back: Feishu may have applied it."""


def _retry_after(headers: dict[str, str] | None) -> float | None:
    for name in ("x-ogw-ratelimit-reset", "Retry-After"):
        value = (headers or {}).get(name) or (headers or {}).get(name.lower())
        try:
            return max(float(value), 0.0) if value is not None else None
        except ValueError:
            continue
    return None


class FeishuApi:
    def __init__(self, app_id: str, app_secret: str, domain: str, timeout: float) -> None:
        import lark_oapi as lark

        self.client = (lark.Client.builder().app_id(app_id).app_secret(app_secret).domain(domain)
                       .timeout(timeout).log_level(lark.LogLevel.WARNING).build())

    async def call(self, method: Callable[[Any], Any], request: Any, *, whole: bool = False) -> Any:
        """One SDK call (`client.im.v1.message.create` and the like) in a thread; its `data` (`whole`: the
        response itself, for a download), or ApiError."""
        import requests
        from lark_oapi.core.exception import ObtainAccessTokenException

        try:
            response = await asyncio.to_thread(method, request)
        except ObtainAccessTokenException as e:
            raise ApiError(int(getattr(e, "code", 0) or 0), str(getattr(e, "msg", "") or e)) from None
        except requests.ReadTimeout as e:
            raise SentMaybe(str(e) or "no answer") from None
        if not response.success():
            raw = getattr(response, "raw", None)
            raise ApiError(int(response.code or 0), str(response.msg or ""), int(getattr(raw, "status_code", 0) or 0),
                           _retry_after(getattr(raw, "headers", None)))
        return response if whole else response.data

    async def request(self, method: str, uri: str) -> dict[str, Any]:
        """A call the SDK has no typed request for (`GET /open-apis/bot/v3/info`), with the tenant token."""
        import json

        import lark_oapi as lark

        request = (lark.BaseRequest.builder().http_method(lark.HttpMethod[method]).uri(uri)
                   .token_types({lark.AccessTokenType.TENANT}).build())
        from lark_oapi.core.exception import ObtainAccessTokenException

        try:
            response = await asyncio.to_thread(self.client.request, request)
        except ObtainAccessTokenException as e:
            raise ApiError(int(getattr(e, "code", 0) or 0), str(getattr(e, "msg", "") or e)) from None
        raw = response.raw
        try:
            body = json.loads(raw.content or b"{}")
        except ValueError:
            raise ApiError(-1, f"not JSON (HTTP {raw.status_code})", raw.status_code) from None
        if not isinstance(body, dict) or body.get("code") != 0:
            body = body if isinstance(body, dict) else {}
            raise ApiError(int(body.get("code") or -1), str(body.get("msg") or ""), raw.status_code)
        return body
