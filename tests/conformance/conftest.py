"""The conformance suite's fixtures: one run per harness in tests/conformance/platforms/."""

from __future__ import annotations

import os
from typing import Any, Callable, Iterator

import pytest

from tests.conformance.harness import PlatformHarness, applies, harness_names, make_harness
from tests.harness import DaemonProcess

RETRY_BASE = 0.05  # the daemons' send backoff base here (channels.<name>.retry_base_seconds)
DELIVERY_RETRY = 0.2  # the dispatcher's first retry of an undelivered reply here (channels.delivery_retry_seconds)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Each case runs for every harness it applies to (a harness lists the ones that do not, with why)."""
    if "platform" in metafunc.fixturenames:
        names = [n for n in harness_names() if applies(n, metafunc.function.__name__)]
        metafunc.parametrize("platform", names, indirect=True)


@pytest.fixture
def platform(request: pytest.FixtureRequest) -> Iterator[PlatformHarness]:
    harness = make_harness(request.param)
    harness.start()
    try:
        yield harness
    finally:
        harness.close()


@pytest.fixture
def channel_daemon(platform: PlatformHarness, daemon_factory: Callable[..., DaemonProcess]) -> Callable[..., DaemonProcess]:
    """A daemon with the platform's channel: `owner` the owner, `friend` a guest in allow_from, pairing for
    the rest, groups read when the bot is mentioned. Keyword arguments override channel settings;
    `env` adds variables."""

    def make(env: dict[str, str] | None = None, **access: Any) -> DaemonProcess:
        settings: dict[str, Any] = {"owner": [platform.owner], "allow_from": [platform.friend], "dm_policy": "pairing",
                                    "group_policy": "mention", "retry_base_seconds": RETRY_BASE, **access}
        full = {**platform.env(**settings), "CLAWGATE_CHANNELS__DELIVERY_RETRY_SECONDS": str(DELIVERY_RETRY)}
        if platform.python_path():
            full["PYTHONPATH"] = os.pathsep.join(platform.python_path())
        daemon = daemon_factory({**full, **(env or {})})
        platform.attach(daemon)
        return daemon

    return make
