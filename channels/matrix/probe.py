"""`clawgate doctor`'s Matrix probe: log in with matrix-nio as the adapter does, then whoami.

Why its own module: the adapter is long already, and the probe shares nothing of its state. With a
password the probe logs in as a new device and logs that device out again at once, so the bot's own
device (and its encryption keys) is never touched.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
from nio import AsyncClient, AsyncClientConfig, LoginResponse, WhoamiResponse

from clawgate.channels.kit.probe import ProbeResult, http_status, logged_in, unreachable

from .settings import MatrixSettings

DEVICE_NAME = "clawgate doctor (logged out at once)"
_NETWORK = (aiohttp.ClientError, asyncio.TimeoutError, TimeoutError, OSError)


def _refusal(answer: Any, base: str, how: str) -> ProbeResult:
    """A nio error response as the setting to fix: 401/403 the credentials, 404 the homeserver URL."""
    transport = getattr(answer, "transport_response", None)
    status = getattr(transport, "status", None) or 0
    credential = f"channels.matrix.{how} (CLAWGATE_CHANNELS__MATRIX__{how.upper()})"
    fix = "create a new access token for the bot account" if how == "access_token" else "the bot account's password"
    if status == 0 and getattr(answer, "status_code", None) in ("M_UNKNOWN_TOKEN", "M_FORBIDDEN", "M_MISSING_TOKEN"):
        status = 401
    return http_status("Matrix", f"{base}/_matrix/client", status or 500, credential=credential,
                       base_setting="channels.matrix.homeserver", how=fix) or \
        ProbeResult("warn", f"the homeserver answered {getattr(answer, 'status_code', None) or answer}", "try again later")


async def probe(settings: MatrixSettings) -> ProbeResult:
    base = settings.homeserver or ""
    config = AsyncClientConfig(max_limit_exceeded=0, max_timeouts=0, encryption_enabled=False,
                               store_sync_tokens=False, request_timeout=settings.request_timeout_seconds)
    client = AsyncClient(base, settings.user_id or "", config=config)
    how = "access_token" if settings.access_token is not None else "password"
    logged_out_needed = False
    try:
        if settings.access_token is not None:
            client.access_token = settings.access_token.get_secret_value()
        else:
            assert settings.password is not None
            login = await client.login(settings.password.get_secret_value(), device_name=DEVICE_NAME)
            if not isinstance(login, LoginResponse):
                return _refusal(login, base, how)
            logged_out_needed = True
        who = await client.whoami()
        if not isinstance(who, WhoamiResponse):
            return _refusal(who, base, how)
        if who.user_id != settings.user_id:
            return ProbeResult("fail", f"the access token belongs to {who.user_id}, not {settings.user_id}",
                               "fix channels.matrix.user_id or the access token")
        return logged_in(f"logged in as {who.user_id} on {base}")
    except _NETWORK as exc:
        return unreachable("the homeserver", base, str(exc) or type(exc).__name__, "channels.matrix.homeserver")
    finally:
        if logged_out_needed:
            try:
                await client.logout()  # deletes the device this probe made
            except _NETWORK:
                pass  # the probe's device stays listed; harmless, and the answer above is still true
        await client.close()
