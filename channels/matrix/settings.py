"""`[channels.matrix]`: the homeserver, the bot account and how it logs in, plus the kit's access keys."""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import Field, SecretStr, field_validator, model_validator

from clawgate.channels.kit import AccessSettings

USER_ID = re.compile(r"^@[a-z0-9._=\-/+]+:[A-Za-z0-9.\-]+(:[0-9]{1,5})?$")


class MatrixSettings(AccessSettings):
    """Log in with a password (a device is created once and its id kept) or an existing access token."""

    homeserver: str | None = Field(None, description="the client-server API base, e.g. https://matrix.example.org")
    user_id: str | None = Field(None, description="the bot's full user id, e.g. @clawgate:example.org")
    password: SecretStr | None = None
    access_token: SecretStr | None = None
    device_name: str = Field("clawgate", min_length=1, max_length=100)
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
    def _homeserver(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not re.match(r"^https?://[^/\s]+", value):
            raise ValueError("must be the homeserver's URL, e.g. https://matrix.example.org")
        return value.rstrip("/")

    @field_validator("user_id")
    @classmethod
    def _user_id(cls, value: str | None) -> str | None:
        if value is not None and not USER_ID.match(value):
            raise ValueError("must be a full Matrix user id, e.g. @clawgate:example.org")
        return value

    @model_validator(mode="after")
    def _complete(self) -> "MatrixSettings":
        """Enabled means usable: a homeserver, a user id and one way to log in."""
        if self.enabled is False:
            return self
        if self.homeserver is None and self.base_url is not None:
            self.homeserver = self._homeserver(self.base_url)
        missing = [name for name in ("homeserver", "user_id") if getattr(self, name) is None]
        if missing:
            raise ValueError(f"channels.matrix is enabled but {' and '.join(missing)} is not set")
        if self.password is None and self.access_token is None:
            raise ValueError("channels.matrix needs password or access_token (CLAWGATE_CHANNELS__MATRIX__ACCESS_TOKEN)")
        return self
