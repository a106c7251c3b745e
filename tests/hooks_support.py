"""Daemons with `[hooks.<name>]` tables in their config.toml, and calls to their webhook listener."""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path
from typing import Any, Callable

import httpx
import pytest

from tests.harness import DaemonProcess, free_port

TOKEN = "hook-bearer-token-0123456789"
SECRET = "hook-signing-secret-42"
TIMEOUT = 60.0  # a loaded 2-core machine: the daemon may take its time to answer


def github_signature(body: bytes, secret: str = SECRET) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def stripe_signature(body: bytes, stamp: int, secret: str = SECRET) -> str:
    return f"t={stamp},v1=" + hmac.new(secret.encode(), f"{stamp}.".encode() + body, hashlib.sha256).hexdigest()


def hook_url(daemon: DaemonProcess, name: str) -> str:
    return f"http://127.0.0.1:{daemon.env['CLAWGATE_GATEWAY__HOOKS_PORT']}/hooks/{name}"


async def call(daemon: DaemonProcess, name: str, body: dict[str, Any] | bytes, headers: dict[str, str] | None = None,
               *, method: str = "POST", query: dict[str, str] | None = None) -> httpx.Response:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    async with httpx.AsyncClient(timeout=TIMEOUT) as client:
        return await client.request(method, hook_url(daemon, name), content=data, params=query,
                                    headers={"Content-Type": "application/json", **(headers or {})})


async def call_bearer(daemon: DaemonProcess, name: str, body: dict[str, Any], token: str = TOKEN,
                      headers: dict[str, str] | None = None) -> httpx.Response:
    return await call(daemon, name, body, {"Authorization": f"Bearer {token}", **(headers or {})})


@pytest.fixture
def hooks_daemon(daemon_factory: Callable[..., DaemonProcess], tmp_path: Path) -> Callable[..., DaemonProcess]:
    """Start a daemon whose config.toml ends with `tables` (TOML text), its listener on a free loopback port."""
    made = [0]

    def make(tables: str, env: dict[str, str] | None = None) -> DaemonProcess:
        home = tmp_path / f"hooks-home{made[0]}"
        made[0] += 1
        DaemonProcess(home, anthropic_url=None).init()
        config = home / "config.toml"
        config.write_text(config.read_text() + "\n" + tables)
        return daemon_factory({"CLAWGATE_GATEWAY__HOOKS_PORT": str(free_port()), **(env or {})}, home=home, init=False)

    return make
