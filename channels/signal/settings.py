"""[channels.signal]: the kit's access keys plus where signal-cli's daemon listens and which account."""

from __future__ import annotations

from pydantic import Field

from clawgate.channels.kit import AccessSettings

DEFAULT_URL = "http://127.0.0.1:8080"
START_HINT = "start it with `signal-cli daemon --http 127.0.0.1:8080` (docs/signal.md)"


class SignalSettings(AccessSettings):
    """`owner` / `allow_from` take a Signal UUID (ACI) or a phone number in international format
    (+4915…); never a profile name, which anyone can choose."""

    account: str = Field("", description=(
        "the bot's own Signal number as signal-cli knows it (+4915…), linked or registered there"))
    link_device_name: str = Field("clawgate", description="the name `clawgate channels login signal` links the device as")
    request_timeout_seconds: float = Field(30.0, gt=0, description="one JSON-RPC call to signal-cli at most")
    lost_after_seconds: float = Field(45.0, gt=0, description=(
        "the event stream is reconnected when silent this long (signal-cli sends a keep-alive every 15 s)"))

    def url(self) -> str:
        return (self.base_url or DEFAULT_URL).rstrip("/")
