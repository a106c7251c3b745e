"""Who is who with Google: the app's service account (outbound) and the bearer token on each event (inbound).

Outbound: google-auth's service-account credentials with the `chat.bot` scope; the key's `token_uri`
is where the JWT-bearer grant goes (Google's, or a test's token endpoint).

Inbound: Chat sends `Authorization: Bearer <JWT>` with every event. With a project-number audience it is
a JWT issued by chat@system.gserviceaccount.com for that number, signed by the keys Google publishes
for that account; with an endpoint-URL audience, a Google OIDC ID token for the URL whose `email` is
chat@system.gserviceaccount.com. google-auth checks the signature, the times and the audience; the
certificates are fetched with aiohttp and kept until their Cache-Control max-age (fetched again at
most every REFETCH_SECONDS for a key id not among them, as when Google rotates).
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path
from typing import Any

import aiohttp

from clawgate.channels.googlechat.settings import CHAT_ISSUER, GoogleChatSettings

SCOPE = "https://www.googleapis.com/auth/chat.bot"
OIDC_ISSUERS = ("https://accounts.google.com", "accounts.google.com")
REFETCH_SECONDS = 30.0
DEFAULT_CERTS_AGE = 3600.0
KEY_FIX = ("the Chat app's service account key (Google Cloud console → IAM → Service accounts → Keys → Add key "
           "→ JSON) in [channels.googlechat] credentials_file")


class KeyProblem(ValueError):
    """The service account key is missing or not a key: one line naming the setting."""


def key_info(settings: GoogleChatSettings) -> dict[str, Any]:
    """The service account key's JSON, from credentials_json or credentials_file."""
    if settings.credentials_json is not None and settings.credentials_json.get_secret_value().strip():
        raw, where = settings.credentials_json.get_secret_value(), "credentials_json"
    elif settings.credentials_file.strip():
        path = Path(settings.credentials_file.strip()).expanduser()
        try:
            raw, where = path.read_text(encoding="utf-8"), f"credentials_file ({path})"
        except OSError as e:
            raise KeyProblem(f"cannot read [channels.googlechat] credentials_file {path}: {e.strerror}") from None
    else:
        raise KeyProblem(f"no service account key: put {KEY_FIX}")
    try:
        info = json.loads(raw)
    except ValueError:
        raise KeyProblem(f"[channels.googlechat] {where} is not JSON: put {KEY_FIX}") from None
    missing = [k for k in ("client_email", "private_key", "token_uri") if not isinstance(info, dict) or not info.get(k)]
    if missing or info.get("type") != "service_account":
        raise KeyProblem(f"[channels.googlechat] {where} is not a service account key (type service_account with "
                         f"{', '.join(missing) or 'client_email'}): put {KEY_FIX}")
    return info


def credentials(settings: GoogleChatSettings) -> Any:
    """google-auth's service account credentials for the Chat API as the app."""
    from google.oauth2 import service_account

    info = key_info(settings)
    try:
        return service_account.Credentials.from_service_account_info(info, scopes=[SCOPE])
    except ValueError as e:
        raise KeyProblem(f"[channels.googlechat] the service account key cannot be used ({str(e).split('.')[0]}): "
                         f"put {KEY_FIX}") from None


class Refused(Exception):
    """A bearer token that does not prove the request came from Google Chat for this app."""


def _max_age(cache_control: str) -> float:
    found = re.search(r"max-age=(\d+)", cache_control or "")
    return float(found.group(1)) if found else DEFAULT_CERTS_AGE


class BearerVerifier:
    """Checks the events' bearer tokens against the certificates at `certs_url`, for `audience`."""

    def __init__(self, settings: GoogleChatSettings, *, timeout: float) -> None:
        self.audience = settings.audience
        self.kind = settings.audience_kind()
        self.url = settings.certs()
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._certs: dict[str, str] = {}
        self._until = 0.0
        self._fetched = 0.0
        self._lock = asyncio.Lock()

    async def _fetch(self) -> None:
        async with aiohttp.ClientSession(timeout=self._timeout) as session:
            async with session.get(self.url) as response:
                if response.status != 200:
                    raise Refused(f"the certificates at {self.url} answered HTTP {response.status}")
                certs = await response.json(content_type=None)
                age = _max_age(response.headers.get("Cache-Control", ""))
        if not isinstance(certs, dict) or not all(isinstance(v, str) for v in certs.values()):
            raise Refused(f"{self.url} did not answer a map of key ids to certificates")
        self._certs, self._fetched, self._until = dict(certs), time.monotonic(), time.monotonic() + age

    async def _certificates(self, kid: str | None) -> dict[str, str]:
        async with self._lock:
            now = time.monotonic()
            stale = now >= self._until
            unknown = kid is not None and kid not in self._certs and now - self._fetched >= REFETCH_SECONDS
            if stale or unknown or not self._certs:
                try:
                    await self._fetch()
                except (aiohttp.ClientError, asyncio.TimeoutError, OSError, ValueError) as e:
                    if not self._certs:
                        raise Refused(f"the certificates at {self.url} could not be read ({e or type(e).__name__})"
                                      ) from None
            return self._certs

    async def verify(self, header: str | None) -> dict[str, Any]:
        """The token's claims, or Refused saying why (never the token itself)."""
        from google.auth import jwt

        if not header or not header.startswith("Bearer ") or not self.audience:
            raise Refused("no bearer token" if self.audience else "no audience configured")
        token = header.removeprefix("Bearer ").strip()
        try:
            kid = jwt.decode_header(token).get("kid")
        except (ValueError, TypeError):
            raise Refused("not a JWT") from None
        certs = await self._certificates(str(kid) if kid else None)
        try:
            claims = jwt.decode(token, certs=certs, audience=self.audience)
        except (ValueError, TypeError, KeyError) as e:  # google-auth's bad signature, expired, wrong audience
            raise Refused(str(e).split(":")[0][:120]) from None
        if self.kind == "project_number":
            if claims.get("iss") != CHAT_ISSUER:
                raise Refused("not issued by Google Chat")
        elif claims.get("iss") not in OIDC_ISSUERS or claims.get("email") != CHAT_ISSUER \
                or claims.get("email_verified") is not True:
            raise Refused("not an ID token of Google Chat's service account")
        return dict(claims)
