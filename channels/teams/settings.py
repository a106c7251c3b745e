"""[channels.teams]: the kit's access keys plus the Azure Bot's app registration and where activities arrive.

The endpoints (OpenID metadata, token service) default to Microsoft's own; a test or a sovereign cloud
points them elsewhere. `owner` / `allow_from` take the person's Microsoft Entra object id (a GUID: Teams
admin center → Users, or Entra ID → Users → Object ID), never a display name (docs/teams.md).
"""

from __future__ import annotations

import re

from pydantic import Field, SecretStr, ValidationInfo, field_validator

from clawgate.channels.kit import AccessSettings

OPENID_METADATA = "https://login.botframework.com/v1/.well-known/openidconfiguration"
BOT_FRAMEWORK_ISSUER = "https://api.botframework.com"
BOT_FRAMEWORK_SCOPE = "https://api.botframework.com/.default"
TOKEN_URL = "https://login.microsoftonline.com/{tenant}/oauth2/v2.0/token"
MULTI_TENANT = "botframework.com"  # the token authority of a multi-tenant bot
_GUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


class TeamsSettings(AccessSettings):
    """Secrets are SecretStr: never printed by a log line or an error message."""

    app_id: str = Field("", description="the Azure Bot's Microsoft App ID (a GUID): the audience of every activity")
    app_password: SecretStr | None = Field(None, description=(
        "a client secret of that app registration (Entra ID → App registrations → Certificates & secrets)"))
    tenant_id: str = Field("", description=(
        "single-tenant bots: the tenant's id (the token authority); empty: a multi-tenant bot (botframework.com)"))
    listen_host: str = Field("127.0.0.1", description="the address the activity listener binds (behind a TLS proxy)")
    listen_port: int = Field(3978, ge=0, le=65535, description="its port (0: any free port)")
    path: str = Field("/api/messages", pattern=r"^/", description="the messaging endpoint's path")
    openid_metadata_url: str = Field(OPENID_METADATA, description=(
        "the Bot Connector's OpenID metadata: names the signing keys (jwks_uri) activities are checked with"))
    issuer: str = Field(BOT_FRAMEWORK_ISSUER, description="the issuer every activity's token must carry")
    token_url: str = Field("", description=(
        "the OAuth token endpoint for the client-credentials grant; empty: Microsoft's for tenant_id"))
    token_scope: str = Field(BOT_FRAMEWORK_SCOPE, description="the scope asked for: the Bot Connector's")
    check_seconds: float = Field(60.0, gt=0, description=(
        "how often the OpenID metadata is fetched again (new signing keys; a listener hears nothing of an outage)"))
    request_timeout_seconds: float = Field(30.0, gt=0, description="one call to the Bot Connector at most")

    @field_validator("owner", "allow_from")
    @classmethod
    def _object_ids_only(cls, values: list[str], info: ValidationInfo) -> list[str]:
        for value in values:
            text = str(value).strip()
            if text != "*" and not (_GUID.fullmatch(text) or text.startswith(("29:", "8:"))):
                raise ValueError(f"{value!r} is not a Teams user id: put the person's Entra object id (a GUID: Entra "
                                 f"ID → Users → Object ID) in channels.teams.{info.field_name}; a name can be "
                                 "taken by anyone")
        return [str(v).strip().lower() if _GUID.fullmatch(str(v).strip()) else str(v).strip() for v in values]

    def token_endpoint(self) -> str:
        return self.token_url or TOKEN_URL.format(tenant=self.tenant_id or MULTI_TENANT)
