"""The `[channels.discord]` section: the bot token, the API base, and the kit's access keys.

Kept apart from adapter.py so config checks (`clawgate doctor`, the loader) can validate the
section without importing discord.py.
"""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from clawgate.channels.kit import AccessSettings

API_VERSION = 10
_API_PATH = re.compile(r"/api/v\d+$")


def api_base(value: str | None) -> str | None:
    """`https://host` or `https://host/api/v10` -> the REST base discord.py's routes hang off."""
    if value is None or not value.strip():
        return None
    url = value.strip().rstrip("/")
    if not re.match(r"^https?://[^/\s]+", url):
        raise ValueError(f"base_url {value!r} is not an http(s) URL; give the Discord API's address, "
                         "e.g. http://127.0.0.1:8090 (a proxy), or leave it out for discord.com")
    return url if _API_PATH.search(url) else f"{url}/api/v{API_VERSION}"


class DiscordSettings(AccessSettings):
    enabled: bool | None = None  # None: on when a token is present
    token: str | None = Field(None, description="the bot token (Developer Portal > Bot > Reset Token)")
    base_url: str | None = Field(None, description=(
        "the REST API base for a proxy or a test server, e.g. http://127.0.0.1:8090 (/api/v10 is added); "
        "the Gateway address is then asked from its GET /gateway/bot"))
    register_commands: bool = Field(True, description="register /new /stop /status /tasks ... as application commands")
    connect_timeout_seconds: float = Field(60.0, gt=0, description="how long the first Gateway READY may take")
    guild_ready_timeout_seconds: float = Field(2.0, ge=0, le=60, description=(
        "after the Gateway's READY, how long to wait for one more server's data before the bot counts as "
        "ready (discord.py's guild_ready_timeout: a bot in many servers receives them one by one)"))
    offline_grace_seconds: float = Field(10.0, gt=0, le=600, description=(
        "how long discord.py may take to RESUME a dropped Gateway connection before the outage is reported "
        "(the channel shows as retrying and is reconnected from scratch)"))

    _base_url = field_validator("base_url")(api_base)
