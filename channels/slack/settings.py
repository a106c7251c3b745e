"""[channels.slack]: the kit's access keys plus Slack's tokens and how events arrive."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr

from clawgate.channels.kit import AccessSettings

SLASH_COMMAND = "/clawgate"


class SlackSettings(AccessSettings):
    """Tokens are SecretStr: never printed by a log line or an error message."""

    bot_token: SecretStr | None = Field(None, description="the app's Bot User OAuth Token (xoxb-…)")
    app_token: SecretStr | None = Field(None, description="an app-level token with connections:write (xapp-…), for Socket Mode")
    signing_secret: SecretStr | None = Field(None, description="the app's Signing Secret, for mode = \"http\"")
    mode: Literal["socket", "http"] = Field("socket", description=(
        "socket: Socket Mode, no public URL needed; http: Slack POSTs events to http_path"))
    http_host: str = Field("127.0.0.1", description="mode = http: the address the events server listens on")
    http_port: int = Field(3000, ge=0, le=65535, description="mode = http: its port (0: any free port)")
    http_path: str = Field("/slack/events", pattern=r"^/", description=(
        "mode = http: the path of the Request URL (events, interactivity and the slash command)"))
    slash_command: str = Field(SLASH_COMMAND, pattern=r"^/[a-z0-9_-]+$", description=(
        "the slash command created in the app (e.g. /clawgate new|stop|status|tasks)"))
    lost_after_seconds: float = Field(60.0, gt=0, description=(
        "Socket Mode: a connection down this long is reported and the channel restarted"))
