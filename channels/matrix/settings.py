"""`[channels.matrix]`: the homeserver, the bot account and how it logs in, plus the kit's access keys."""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import Field, SecretStr, ValidationInfo, field_validator

from clawgate.channels.kit import AccessSettings

USER_ID = re.compile(r"^@[a-z0-9._=\-/+]+:[A-Za-z0-9.\-]+(:[0-9]{1,5})?$")


class MatrixSettings(AccessSettings):
    """Log in with a password (a device is created once and its id kept) or an existing access token."""

    homeserver: str | None = Field(None, validate_default=True, description=(
        "the client-server API base, e.g. https://matrix.example.org (base_url is accepted too)"))
    user_id: str | None = Field(None, validate_default=True, description="the bot's full user id, e.g. @clawgate:example.org")
    password: SecretStr | None = None
    access_token: SecretStr | None = Field(None, validate_default=True)
    device_name: str = Field("clawgate", min_length=1, max_length=100)
    encryption: bool = Field(True, description=(
        "read and answer end-to-end encrypted rooms (matrix-nio with vodozemac; keys kept in state/matrix-e2e); "
        "off: the bot says once in such a room that it cannot read it"))
    sync_timeout_seconds: float = Field(30.0, gt=0, le=300, description="how long one /sync waits for new events")
    timeline_limit: int = Field(50, ge=1, le=500, description=(
        "events per room per /sync; when more arrived meanwhile the rest is fetched page by page"))
    request_timeout_seconds: float = Field(30.0, gt=0)
    max_message_bytes: int = Field(24_000, ge=1_000, le=30_000, description=(
        "one message's text in UTF-8 bytes; longer answers are split (the HTML copy is sent too, and "
        "Synapse refuses events over 64 KiB)"))

    @field_validator("owner", "allow_from", mode="before")
    @classmethod
    def _json_list(cls, value: Any) -> Any:
        """A list from the environment (CLAWGATE_CHANNELS__MATRIX__OWNER='["@me:example.org"]') arrives as text."""
        if isinstance(value, str) and value.strip().startswith("["):
            try:
                return json.loads(value)
            except ValueError:
                raise ValueError('must be a JSON list, e.g. ["@you:example.org"]') from None
        return value

    @field_validator("homeserver")
    @classmethod
    def _homeserver(cls, value: str | None, info: ValidationInfo) -> str | None:
        value = value or info.data.get("base_url")
        if value is None:
            if info.data.get("enabled") is not False:
                raise ValueError("is required: the homeserver's URL, e.g. https://matrix.example.org")
            return None
        if not re.match(r"^https?://[^/\s]+", value):
            raise ValueError("must be the homeserver's URL, e.g. https://matrix.example.org")
        return value.rstrip("/")

    @field_validator("user_id")
    @classmethod
    def _user_id(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            if info.data.get("enabled") is not False:
                raise ValueError("is required: the bot's full user id, e.g. @clawgate:example.org")
            return None
        if not USER_ID.match(value):
            raise ValueError("must be a full Matrix user id, e.g. @clawgate:example.org")
        return value

    @field_validator("access_token")
    @classmethod
    def _login(cls, value: SecretStr | None, info: ValidationInfo) -> SecretStr | None:
        """Enabled means usable: one way to log in."""
        if value is None and info.data.get("password") is None and info.data.get("enabled") is not False:
            raise ValueError("or password is required: how the bot logs in")
        return value
