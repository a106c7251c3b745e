"""[channels.mattermost]: the kit's access keys plus the server, the bot account's token and where the
listener for interactive message buttons takes presses."""

from __future__ import annotations

import re

from pydantic import Field, SecretStr, ValidationInfo, field_validator

from clawgate.channels.kit import AccessSettings
from clawgate.channels.mattermost.buttons import parse_listen


USER_ID = re.compile(r"[a-z0-9]{26}")


class MattermostSettings(AccessSettings):
    """`owner` / `allow_from` take Mattermost user ids (26 characters, System Console → Users), never a
    username: a username can be changed by its holder or an admin, a user id cannot."""

    token: SecretStr | None = Field(None, description=(
        "the bot account's access token (Integrations → Bot Accounts); a personal access token works too"))
    request_timeout_seconds: float = Field(30.0, gt=0, description="one REST call to the server at most")
    heartbeat_seconds: float = Field(30.0, gt=0, description=(
        "WebSocket ping interval; a connection silent past two of them is reconnected"))
    catch_up_hours: float = Field(24.0, ge=0, description=(
        "on (re)connect, posts made while the daemon was away are answered when younger than this; 0: none"))
    actions_listen: str = Field("", description=(
        "host:port where the daemon takes interactive button presses from the Mattermost server "
        "(127.0.0.1:8071); empty: approvals are answered with /approve ID"))
    actions_url: str = Field("", description=(
        "the address the Mattermost server posts button presses to, when it is not http://<actions_listen> "
        "(a reverse proxy); the server's AllowedUntrustedInternalConnections must admit it"))

    @field_validator("owner", "allow_from")
    @classmethod
    def _user_ids_only(cls, values: list[str], info: ValidationInfo) -> list[str]:
        for value in values:
            if value != "*" and not USER_ID.fullmatch(str(value).strip()):
                field = info.field_name
                raise ValueError(f"{value!r} is not a Mattermost user id: put the 26-character id (System Console → "
                                 f"Users, or GET /api/v4/users/username/NAME) in channels.mattermost.{field}; a "
                                 "username can be renamed and taken by someone else")
        return [str(v).strip() for v in values]

    @field_validator("actions_listen")
    @classmethod
    def _host_and_port(cls, value: str) -> str:
        if value.strip():
            parse_listen(value.strip())  # its ValueError names the setting and the form
        return value.strip()

    def url(self) -> str:
        return (self.base_url or "").rstrip("/")
