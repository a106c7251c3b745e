"""Shared fixtures and helpers of the Telegram end-to-end tests (FakeTelegram + the real daemon)."""

from __future__ import annotations

import json
from typing import Any, Callable, Iterator

import pytest

from clawgate.config.schema import TelegramSettings
from tests.fakes.telegram_api import FakeTelegram
from tests.harness import DaemonProcess
from tests.waiting import DEFAULT_TIMEOUT

CHAT = 4242
POLL_TIMEOUT = 1  # the daemons' long poll here, in seconds: an unblocked daemon polls again within it
RETRY_BASE = 0.05  # the daemons' send retry backoff base here (channels.telegram.retry_base_seconds)
DELIVERY_RETRY = 0.2  # the dispatcher's first retry of an undelivered reply here (channels.delivery_retry_seconds)


@pytest.fixture
def telegram() -> Iterator[FakeTelegram]:
    with FakeTelegram() as fake:
        yield fake


@pytest.fixture
def tg_daemon(telegram: FakeTelegram, daemon_factory: Callable[..., DaemonProcess]) -> Callable[..., DaemonProcess]:
    """Start a daemon wired to the fake; keyword arguments become channels.telegram settings."""

    def make(fake: FakeTelegram | None = None, env: dict[str, str] | None = None, **settings: Any) -> DaemonProcess:
        fake = fake or telegram
        values: dict[str, Any] = {"base_url": fake.base_url, "poll_timeout_seconds": POLL_TIMEOUT, "dm_policy": "open",
                                  "retry_base_seconds": RETRY_BASE, "pairing_check_seconds": 0.2, **settings}
        full = {"TELEGRAM_BOT_TOKEN": fake.token, "CLAWGATE_CHANNELS__DELIVERY_RETRY_SECONDS": str(DELIVERY_RETRY),
                **(env or {})}
        for key, value in values.items():
            full[f"CLAWGATE_CHANNELS__TELEGRAM__{key.upper()}"] = value if isinstance(value, str) else json.dumps(value)
        return daemon_factory(full)

    return make


def user_texts(body: dict[str, Any]) -> list[str]:
    """What the person typed in each user turn of a model request (the last text block; context blocks precede it)."""
    out = []
    for message in body["messages"]:
        if message["role"] == "user" and isinstance(message["content"], list):
            texts = [b["text"] for b in message["content"] if b.get("type") == "text"]
            out += texts[-1:]
    return out


def replies(fake: FakeTelegram, chat: int) -> list[str]:
    """Messages to `chat` minus the transient status messages (a step, a background job)."""
    return [m["plain_text"] for m in fake.sent if m["chat_id"] == chat and not m["text"].startswith(("⚙️", "⏳"))]


def wait_handled(fake: FakeTelegram, update_id: int, timeout: float = DEFAULT_TIMEOUT) -> None:
    """Until the daemon confirmed `update_id` (it polled again after handling it)."""
    fake.wait_for(lambda: fake.confirmed_offset > update_id, timeout)


def resend_window(retry_after: float = 0.0) -> float:
    """Seconds within which a reply that is going to be sent again would be: the dispatcher's first
    retry backoff (as tg_daemon configures it) or a flood wait Telegram asked for."""
    return max(DELIVERY_RETRY, retry_after)


def control_send_window() -> float:
    """Seconds within which a control message (a refusal, a pairing code) sent in the background has
    gone out, retries included: the sum of the send backoffs (base, 2 x base, …, one per retry)."""
    retries = TelegramSettings.model_fields["send_retries"].default
    return RETRY_BASE * (2 ** retries - 1)
