"""[channels.dingtalk]: the kit's access keys plus the app's credentials (Client ID / Client Secret,
formerly AppKey / AppSecret), the robot code and the API base."""

from __future__ import annotations

from pydantic import Field, SecretStr

from clawgate.channels.kit import AccessSettings

API_BASE = "https://api.dingtalk.com"
MEDIA_BASE = "https://oapi.dingtalk.com"  # the older API host, where files are uploaded


class DingTalkSettings(AccessSettings):
    """`owner` / `allow_from` take DingTalk user ids (the organisation's `userId`, a.k.a. staff id, shown in
    the admin console's contacts), never a nickname: anyone can set their nickname to anything."""

    client_id: str = Field("", description="the app's Client ID (AppKey), DingTalk developer console → Credentials")
    client_secret: SecretStr | None = Field(None, description="the app's Client Secret (AppSecret)")
    robot_code: str = Field("", description=(
        "the robot's code for sends through the OpenAPI; empty: the Client ID (an app robot's code is its AppKey)"))
    media_base: str = Field("", description=(
        "the API host files are uploaded to (media/upload); empty: base_url when that is set, else "
        "https://oapi.dingtalk.com"))
    request_timeout_seconds: float = Field(30.0, gt=0, description="one HTTP call to DingTalk at most")
    approval_cards: bool = Field(True, description=(
        "approvals as an interactive card with Approve / Deny buttons (the app needs the card permission "
        "Card.Instance.Write); false: /approve ID only"))
    webhook_margin_seconds: float = Field(60.0, ge=0, description=(
        "a session webhook this close to its expiry is not used: the reply goes through the OpenAPI"))

    def api_base(self) -> str:
        return (self.base_url or API_BASE).rstrip("/")

    def media(self) -> str:
        return (self.media_base or self.base_url or MEDIA_BASE).rstrip("/")

    def robot(self) -> str:
        return self.robot_code or self.client_id
