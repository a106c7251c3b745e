"""Shared fixtures and helpers of the Slack end-to-end tests (FakeSlack + the real daemon)."""

from __future__ import annotations

import json
from typing import Any, Callable, Iterator

import pytest

from tests.fakes.slack_api import APP_TOKEN, BOT_TOKEN, SIGNING_SECRET, FakeSlack
from tests.fakes.slack_api import workspace as W
from tests.harness import DaemonProcess
from tests.waiting import DEFAULT_TIMEOUT

GUEST = "U0GUEST001"
STATUS_PREFIXES = ("⚙️", "⏳")  # the kit's transient status lines (a step, a background job)
NO_PROXY = {name: "" for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy")}


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with FakeSlack(ack_timeout=3.0) as fake:
        fake.workspace.add_user(GUEST, "guest", real_name="Guest Person")
        fake.workspace.add_channel("D0GUEST001", is_im=True, user=GUEST)
        yield fake


@pytest.fixture
def slack_daemon(slack: FakeSlack, daemon_factory: Callable[..., DaemonProcess]) -> Callable[..., DaemonProcess]:
    """Start a daemon wired to the fake; keyword arguments become [channels.slack] settings. In
    Socket Mode it returns once the daemon's Slack connection is open."""

    def make(env: dict[str, str] | None = None, **settings: Any) -> DaemonProcess:
        values: dict[str, Any] = {"enabled": True, "bot_token": BOT_TOKEN, "app_token": APP_TOKEN,
                                  "base_url": slack.api_url, "owner": [W.OWNER_ID], "retry_base_seconds": 0.05,
                                  **settings}
        full = {**NO_PROXY, **(env or {})}
        for key, value in values.items():
            full[f"CLAWGATE_CHANNELS__SLACK__{key.upper()}"] = value if isinstance(value, str) else json.dumps(value)
        daemon = daemon_factory(full)
        if values.get("mode", "socket") == "socket":
            slack.wait_for(lambda f: f.socket.open_connections(), timeout=DEFAULT_TIMEOUT)
        return daemon

    return make


def replies(fake: FakeSlack, channel: str) -> list[str]:
    """What the bot posted to `channel` (current text), minus the transient status messages."""
    return [m["text"] for m in fake.posted(channel) if not m["text"].startswith(STATUS_PREFIXES)]


def signing_secret() -> str:
    return SIGNING_SECRET
