"""[channels.feishu]: the kit's access keys plus the custom app's credentials and which Open Platform
(Feishu in China, Lark elsewhere, or a URL)."""

from __future__ import annotations

import re

from pydantic import Field, SecretStr, ValidationInfo, field_validator

from clawgate.channels.kit import AccessSettings

DOMAINS = {"feishu": "https://open.feishu.cn", "lark": "https://open.larksuite.com"}
OPEN_ID = re.compile(r"ou_[0-9A-Za-z]{8,64}")


class FeishuSettings(AccessSettings):
    """`owner` / `allow_from` take open_ids (`ou_…`): the id Feishu gives a user within this app, set by
    the platform on every event from the sender's login; a display name can be copied, an open_id cannot."""

    app_id: str = Field("", description="the custom app's App ID (cli_…), Developer Console → Credentials")
    app_secret: SecretStr | None = Field(None, description="the custom app's App Secret")
    domain: str = Field("feishu", description=(
        '"feishu" (open.feishu.cn), "lark" (open.larksuite.com, the international brand) or an https URL'))
    reply_in_thread: bool = Field(False, description=(
        "answer group messages in a thread on the message (a topic) rather than in the chat"))
    request_timeout_seconds: float = Field(30.0, gt=0, description="one Open Platform API call at most")

    @field_validator("owner", "allow_from")
    @classmethod
    def _open_ids_only(cls, values: list[str], info: ValidationInfo) -> list[str]:
        for value in values:
            if value != "*" and not OPEN_ID.fullmatch(str(value).strip()):
                raise ValueError(f"{value!r} is not a Feishu open_id: put the user's open_id (ou_…, shown in the "
                                 f"pairing reply or the admin console) in channels.feishu.{info.field_name}; a name "
                                 "can be copied by anyone")
        return [str(v).strip() for v in values]

    @field_validator("domain")
    @classmethod
    def _known_domain(cls, value: str) -> str:
        value = value.strip().rstrip("/")
        if value.lower() in DOMAINS:
            return value.lower()
        if not re.fullmatch(r"https?://[^/\s?#@]+", value):
            raise ValueError(f"channels.feishu.domain {value!r} is neither \"feishu\", \"lark\" nor an origin "
                             "like https://open.feishu.cn")
        return value

    def url(self) -> str:
        """The Open Platform's origin, for the API client and the long connection alike."""
        return DOMAINS.get(self.domain, self.domain)
