"""[channels.whatsapp]: the kit's access keys plus WhatsApp's own.

`mode = "cloud"`: Meta's WhatsApp Business Platform (Cloud API): Meta POSTs signed webhooks to a
listener here and replies go out through the Graph API. `mode = "linked"`: clawgate is a linked device
of a WhatsApp account (as WhatsApp Web links), through neonize (the `whatsapp-linked` extra); its
session is kept under state/whatsapp/<account>/ (docs/whatsapp.md).
"""

from __future__ import annotations

from typing import Literal

import re

from pydantic import Field, SecretStr, field_validator

from clawgate.channels.kit import AccessSettings

GRAPH_API = "https://graph.facebook.com"


class WhatsAppSettings(AccessSettings):
    """Secrets are SecretStr: never printed by a log line or an error message."""

    mode: Literal["cloud", "linked"] = Field("cloud", description=(
        "cloud: the WhatsApp Business Platform's Cloud API; linked: a linked device of a WhatsApp account"))
    access_token: SecretStr | None = Field(None, description=(
        "cloud: a System User access token with whatsapp_business_messaging (EAA…)"))
    phone_number_id: str = Field("", pattern=r"^[0-9]*$", description=(
        "cloud: the business phone number's id (WhatsApp Manager → API Setup), not the number itself"))
    app_secret: SecretStr | None = Field(None, description=(
        "cloud: the Meta app's App Secret: every webhook's X-Hub-Signature-256 is checked with it"))
    verify_token: SecretStr | None = Field(None, description=(
        "cloud: the Verify token typed into the app's webhook settings, answered at subscription"))
    api_version: str = Field("v21.0", pattern=r"^v[0-9]+\.[0-9]+$", description="the Graph API version")
    webhook_host: str = Field("127.0.0.1", description="the address the webhook listener binds (behind a TLS proxy)")
    webhook_port: int = Field(8788, ge=0, le=65535, description="its port (0: any free port)")
    webhook_path: str = Field("/whatsapp/webhook", pattern=r"^/", description="the path of the Callback URL")
    rate_limit_retry_seconds: float = Field(60.0, gt=0, description=(
        "how long to wait after a rate-limit error (cloud: Meta's 130429, 131056, 80007; linked: rate-overlimit), "
        "which carries no retry time"))
    read_receipts: bool | None = Field(None, description=(
        "mark a person's message read (blue ticks) while the agent works; default: on in cloud mode, off linked"))
    check_seconds: float = Field(60.0, gt=0, description=(
        "how often the Graph API is asked whether it answers (webhooks alone cannot tell Meta is unreachable)"))
    link_wait_seconds: float = Field(180.0, gt=0, le=600, description=(
        "linked: how long a pairing (QR codes, or a phone-number pairing code) waits for the phone before "
        "its code is given up as expired (WhatsApp offers codes for about two minutes)"))

    @field_validator("owner", "allow_from", mode="after")
    @classmethod
    def _numbers_as_whatsapp_writes_them(cls, entries: list[str]) -> list[str]:
        """A wa_id is digits with the country code: "+1 555-123 4567" is written 15551234567, so an owner
        typed the way people write numbers still matches the sender's id."""
        return [re.sub(r"[\s\-().]", "", e).removeprefix("+") if _PHONE.fullmatch(e.strip()) else e for e in entries]


_PHONE = re.compile(r"\+?[0-9][0-9\s\-().]{5,}")
