"""[channels.googlechat]: the kit's access keys plus the Chat app's own.

Who may write is named by Chat's user id: the digits of the user's resource name (`users/1234567890`, the
`user.name` of an event Google signed), written either way; never an email or display name: those are
shown to the model, never trusted.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, SecretStr, ValidationInfo, field_validator

from clawgate.channels.kit import AccessSettings

CHAT_API = "https://chat.googleapis.com"
CHAT_ISSUER = "chat@system.gserviceaccount.com"
# Where Google publishes the keys of the bearer tokens it sends (docs: "Verify requests from Google Chat"):
# the Chat service account's own certificates for a project-number audience, Google's OIDC certificates
# for an endpoint-URL audience.
CHAT_CERTS = "https://www.googleapis.com/service_accounts/v1/metadata/x509/chat@system.gserviceaccount.com"
OIDC_CERTS = "https://www.googleapis.com/oauth2/v1/certs"
USER = re.compile(r"(?:users/)?([0-9]{1,40})")


class GoogleChatSettings(AccessSettings):
    """Secrets are SecretStr: never printed by a log line or an error message."""

    credentials_file: str = Field("", description=(
        "the path of the Chat app's service account key (JSON, Google Cloud console → IAM → Service accounts "
        "→ Keys); its token_uri is where tokens are asked for"))
    credentials_json: SecretStr | None = Field(None, description=(
        "the same key's JSON itself, instead of a file (CLAWGATE_CHANNELS__GOOGLECHAT__CREDENTIALS_JSON)"))
    audience: str = Field("", description=(
        "the app's authentication audience, as set in the Chat API's configuration page: the Cloud project "
        "number (digits), or the HTTP endpoint URL"))
    certs_url: str = Field("", description=(
        "where the keys of Google's bearer tokens are read; empty: Google's own for the audience's kind"))
    listen_host: str = Field("127.0.0.1", description="the address the HTTP endpoint binds (behind a TLS proxy)")
    listen_port: int = Field(8790, ge=0, le=65535, description="its port (0: any free port)")
    path: str = Field("/googlechat/events", pattern=r"^/", description="the path of the app's HTTP endpoint URL")
    request_timeout_seconds: float = Field(30.0, gt=0, description="one call to the Chat API at most")
    check_seconds: float = Field(60.0, gt=0, description=(
        "how often the Chat API is asked whether it answers (an HTTP endpoint alone cannot tell it is down)"))
    rate_limit_retry_seconds: float = Field(10.0, gt=0, description=(
        "how long to wait after a 429 that names no Retry-After (the Chat API's quota errors rarely do)"))

    @field_validator("owner", "allow_from")
    @classmethod
    def _user_names_only(cls, values: list[str], info: ValidationInfo) -> list[str]:
        out = []
        for raw in values:
            value = str(raw).strip()
            found = USER.fullmatch(value)
            if value != "*" and found is None:
                raise ValueError(f"{raw!r} is not a Google Chat user: put the user's id (users/ and digits, the "
                                 f"user.name of an event, or the digits alone) in channels.googlechat."
                                 f"{info.field_name}; an email or a name is not proof of who writes")
            out.append(found.group(1) if found else value)
        return out

    @field_validator("audience")
    @classmethod
    def _audience(cls, value: str) -> str:
        value = value.strip()
        if value and not (value.isdigit() or value.startswith(("https://", "http://"))):
            raise ValueError(f"channels.googlechat.audience {value!r} is neither a project number (digits) nor the "
                             "endpoint URL (https://…): copy it from the Chat API's Configuration page")
        return value

    def audience_kind(self) -> Literal["project_number", "endpoint_url"]:
        return "project_number" if self.audience.isdigit() else "endpoint_url"

    def certs(self) -> str:
        return self.certs_url.strip() or (CHAT_CERTS if self.audience_kind() == "project_number" else OIDC_CERTS)

    def api_endpoint(self) -> str:
        return (self.base_url or CHAT_API).rstrip("/")
