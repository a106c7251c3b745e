"""Both directions of the Bot Framework's authentication.

In: every activity carries `Authorization: Bearer <JWT>` signed by the Bot Connector. It counts only when
its RS256 signature verifies with a key from the JWKS the OpenID metadata names, its issuer is the Bot
Framework's, its audience is this bot's app id, it is within its lifetime (5 minutes of clock skew, as
Microsoft allows), and its `serviceurl` claim names the activity's own serviceUrl (so a token issued for
one Connector cannot carry an activity pointing replies elsewhere). PyJWT does the cryptography — the
same library the Agents SDK's JwtTokenValidator uses; that validator is not used because it derives its
key URL from the issuer (login.botframework.com, hardcoded) and checks neither issuer nor serviceurl.

Out: an OAuth client-credentials token for the Bot Connector, cached until shortly before it expires.
MSAL, the SDK's token provider, accepts only https authorities with Microsoft's instance discovery, so
the grant (one form POST, RFC 6749 §4.4) is made with aiohttp against `token_url`.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import aiohttp
import jwt

CLOCK_SKEW = 300  # seconds, the Bot Framework's documented tolerance
KEY_REFRESH_FLOOR = 30.0  # an unknown key id fetches the JWKS again at most this often
NETWORK = (aiohttp.ClientError, asyncio.TimeoutError, OSError)


class Refused(Exception):
    """An inbound token that does not count (why, without any of its content)."""


class TokenRefused(Exception):
    """The token service refused our app id or secret (a configuration fix, not an outage)."""


class ServiceError(Exception):
    """An endpoint answered with an unexpected status or body (`status` when it answered)."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


async def _get_json(session: aiohttp.ClientSession, url: str) -> dict[str, Any]:
    async with session.get(url) as resp:
        if resp.status != 200:
            raise ServiceError(f"{url} answered HTTP {resp.status}", resp.status)
        try:
            body = await resp.json(content_type=None)
        except ValueError:
            raise ServiceError(f"{url} answered something that is not JSON", resp.status) from None
    if not isinstance(body, dict):
        raise ServiceError(f"{url} answered something that is not a JSON object", 200)
    return body


class InboundAuth:
    """Checks the bearer token of an activity. Keys come from the OpenID metadata's jwks_uri."""

    def __init__(self, session: aiohttp.ClientSession, *, metadata_url: str, issuer: str, app_id: str) -> None:
        self._session = session
        self._metadata_url = metadata_url
        self._issuer = issuer
        self._app_id = app_id
        self._keys: dict[str, jwt.PyJWK] = {}
        self._endorsements: dict[str, frozenset[str]] = {}  # kid -> the channels the key may sign for
        self._fetched = 0.0
        self._lock = asyncio.Lock()

    async def refresh(self) -> int:
        """Fetch the metadata and its JWKS again; returns how many signing keys it holds."""
        async with self._lock:
            metadata = await _get_json(self._session, self._metadata_url)
            jwks_uri = metadata.get("jwks_uri")
            if not isinstance(jwks_uri, str) or not jwks_uri:
                raise ServiceError(f"{self._metadata_url} names no jwks_uri", 200)
            jwks = await _get_json(self._session, jwks_uri)
            keys: dict[str, jwt.PyJWK] = {}
            endorsements: dict[str, frozenset[str]] = {}
            for entry in jwks.get("keys") or []:
                if not isinstance(entry, dict) or entry.get("kty") != "RSA" or not entry.get("kid"):
                    continue
                try:
                    keys[str(entry["kid"])] = jwt.PyJWK(entry, algorithm="RS256")
                except jwt.PyJWTError:
                    continue
                if isinstance(entry.get("endorsements"), list):
                    endorsements[str(entry["kid"])] = frozenset(str(e) for e in entry["endorsements"])
            self._keys, self._endorsements, self._fetched = keys, endorsements, time.monotonic()
            return len(keys)

    async def _key(self, kid: str) -> jwt.PyJWK:
        key = self._keys.get(kid)
        if key is None and time.monotonic() - self._fetched > KEY_REFRESH_FLOOR:
            await self.refresh()  # keys roll over: an unknown id may be a new key
            key = self._keys.get(kid)
        if key is None:
            raise Refused("signed with a key the OpenID metadata does not name")
        return key

    async def verify(self, authorization: str | None, service_url: str, channel_id: str = "") -> dict[str, Any]:
        """The token's claims, or Refused. Never logs or returns anything of a token that did not verify.
        A key that lists endorsements signs only for those channels: the activity's channelId must be one."""
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Refused("no bearer token")
        try:
            header = jwt.get_unverified_header(token.strip())
        except jwt.PyJWTError:
            raise Refused("not a JWT") from None
        if header.get("alg") != "RS256" or not isinstance(header.get("kid"), str):
            raise Refused("not an RS256 token with a key id")
        key = await self._key(header["kid"])
        endorsed = self._endorsements.get(header["kid"])
        if endorsed is not None and channel_id not in endorsed:
            raise Refused("signed with a key not endorsed for the activity's channel")
        try:
            claims: dict[str, Any] = jwt.decode(
                token.strip(), key=key, algorithms=["RS256"], audience=self._app_id, issuer=self._issuer,
                leeway=CLOCK_SKEW, options={"require": ["exp", "iss", "aud"]})
        except jwt.ExpiredSignatureError:
            raise Refused("expired") from None
        except jwt.InvalidAudienceError:
            raise Refused("issued for another bot (audience)") from None
        except jwt.InvalidIssuerError:
            raise Refused("not issued by the Bot Framework (issuer)") from None
        except jwt.PyJWTError:
            raise Refused("signature or claims invalid") from None
        claimed = str(claims.get("serviceurl") or claims.get("serviceUrl") or "")
        if not claimed or claimed.rstrip("/") != service_url.rstrip("/"):
            raise Refused("its serviceurl claim does not name the activity's serviceUrl")
        return claims


@dataclass
class _Token:
    value: str
    expires: float  # monotonic


class TokenClient:
    """The Bot Connector's access token (client credentials), fetched once and reused until it nearly expires."""

    def __init__(self, session: aiohttp.ClientSession, *, url: str, app_id: str, secret: str, scope: str) -> None:
        self._session = session
        self._url = url
        self._form = {"grant_type": "client_credentials", "client_id": app_id, "client_secret": secret,
                      "scope": scope}
        self._token: _Token | None = None
        self._lock = asyncio.Lock()

    def forget(self) -> None:
        """The Connector refused the token: the next call fetches a new one."""
        self._token = None

    async def token(self) -> str:
        async with self._lock:
            if self._token is not None and time.monotonic() < self._token.expires:
                return self._token.value
            async with self._session.post(self._url, data=self._form) as resp:
                try:
                    body = await resp.json(content_type=None)
                except ValueError:
                    body = {}
                if resp.status in (400, 401, 403):
                    error = body.get("error") if isinstance(body, dict) else None
                    raise TokenRefused(f"the token service refused the app id or secret ({error or resp.status})")
                if resp.status != 200 or not isinstance(body, dict) or not body.get("access_token"):
                    raise ServiceError(f"the token service answered HTTP {resp.status}", resp.status)
            lifetime = float(body.get("expires_in") or 3600)
            self._token = _Token(str(body["access_token"]), time.monotonic() + max(lifetime - 300, lifetime / 2))
            return self._token.value
