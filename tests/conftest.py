from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Iterator

import pytest

from tests.fakes.anthropic_api import FakeAnthropic
from tests import zygote
from tests.harness import DaemonProcess
from tests.servers.synapse import synapse  # noqa: F401  (session fixture: a real Synapse)

E2E = Path(__file__).resolve().parent / "e2e"

# The suite starts the daemon and the command line as new Python processes many hundreds of times. Where
# PYTHONDONTWRITEBYTECODE is set (some shells and CI images set it), each of them compiled every module it
# imports again: about 0.3 s of CPU of a daemon's 1.3 s start. Compiled files go to __pycache__ (ignored by
# git), as Python does by default; the daemons, the command line and these workers all read them.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False
# The daemons and command lines the harness starts are forked from a zygote per worker (tests/zygote.py).
zygote.enabled = True


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every case under tests/e2e/ starts the real daemon (and often a real server): marked `e2e`, so
    `make test-fast` (-m "not e2e and not slow") leaves it to `make test` and CI.

    Cases marked `waits` go first: each sits out a fixed period on little CPU, and one started last kept
    the whole run waiting for it (the parallel workers take the queue in order, so the first cases
    start at once and the rest fill the time around them)."""
    for item in items:
        if E2E in item.path.resolve().parents:
            item.add_marker(pytest.mark.e2e)
    items.sort(key=lambda item: item.get_closest_marker("waits") is None)  # stable: otherwise in order


@pytest.fixture
def fake_model() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as fake:
        yield fake


@pytest.fixture
def daemon_factory(tmp_path: Path, fake_model: FakeAnthropic) -> Iterator:
    """Start real daemons on temp homes; every one is killed at the end of the test."""
    started: list[DaemonProcess] = []

    def make(env: dict[str, str] | None = None, *, home: Path | None = None, init: bool = True,
             model: bool = True) -> DaemonProcess:
        proc = DaemonProcess(home or tmp_path / f"home{len(started)}", anthropic_url=fake_model.base_url if model else None, env=env)
        if init:
            proc.init()
        started.append(proc)
        return proc.start()

    yield make
    for proc in started:
        proc.kill()


@pytest.fixture
def daemon(daemon_factory) -> DaemonProcess:
    return daemon_factory()
