"""The daemon process as a whole, in-process: a dead core loop must not leave a zombie daemon."""

from __future__ import annotations

import asyncio
import os

from clawgate.config.paths import Paths
from clawgate.config.schema import Settings
from clawgate.gateway.app import App
from tests.waiting import wait_until_async


async def test_a_dead_core_task_shuts_the_daemon_down_with_failure(tmp_path, caplog):
    settings = Settings.model_validate({"gateway": {"port": 0, "token": "t" * 24}})
    app = App(Paths(tmp_path), settings)

    async def broken() -> None:
        raise RuntimeError("intake broke")

    app.loop.run = broken  # type: ignore[method-assign]
    assert await asyncio.wait_for(app.run(), 15) is True
    assert "core task agent stopped unexpectedly" in caplog.text


async def test_shutdown_runs_in_reverse_and_releases_the_telegram_client(tmp_path):
    """Stop (no new input) comes before close (the HTTP client released), and close really happens."""
    from tests.fakes.telegram_api import FakeTelegram

    with FakeTelegram() as fake:
        settings = Settings.model_validate({
            "gateway": {"port": 0, "token": "t" * 24},
            "channels": {"telegram": {"token": fake.token, "base_url": fake.base_url, "poll_timeout_seconds": 1}},
        })
        app = App(Paths(tmp_path), settings)
        telegram = app.channels["telegram"]
        steps: list[str] = []
        for name in ("stop", "close"):
            original = getattr(telegram, name)

            async def record(original=original, name=name) -> None:
                steps.append(name)
                await original()

            setattr(telegram, name, record)
        running = asyncio.create_task(app.run())
        await wait_until_async(lambda: telegram.connected and any(name == "getUpdates" for name, _ in fake.calls),
                               "the Telegram channel to start polling")
        app._stopped.set()
        assert await asyncio.wait_for(running, 30) is False
    assert steps[0] == "stop" and "close" in steps  # input stopped first, the client released after
    assert telegram.adapter.bot._requests_initialized is False  # Bot.shutdown() ran: its HTTP clients are closed


def test_a_shutdown_during_the_warm_up_does_not_wait_for_it(tmp_path):
    """SIGTERM just after the ready line, while the model SDK is still importing (about a second, several on a
    busy machine): the daemon stops without waiting for the import. asyncio.Runner joins its default executor's
    threads when it closes, so the warm-up must not run there; here an import that ends only when released
    stands for it, released by a watchdog after 60 s (a daemon that waited for it stops only then)."""
    import threading

    from clawgate.gateway import runtime

    settings = Settings.model_validate({"gateway": {"port": 0, "token": "t" * 24}})
    app = App(Paths(tmp_path), settings)
    importing, release, late = threading.Event(), threading.Event(), threading.Event()

    def slow_import() -> None:
        importing.set()
        release.wait()

    app.provider.warm = slow_import  # type: ignore[attr-defined]

    async def serve_then_stop() -> bool:
        running = asyncio.create_task(app.run())
        await wait_until_async(importing.is_set, "the warm-up to start after the ready line")
        app._stopped.set()
        return await running

    watchdog = threading.Timer(60, lambda: (late.set(), release.set()))
    watchdog.start()
    try:
        assert runtime.run(serve_then_stop(), "asyncio") is False  # on the main thread: it sets signal handlers
        assert not late.is_set(), "the daemon stopped only once the warm-up had finished"
    finally:
        watchdog.cancel()
        release.set()



STOP_WITH_THE_WARM_UP_RUNNING = """
import atexit, sys, threading
from clawgate.gateway.cli import main
from clawgate.gateway.warm_up import WarmUp

atexit.register(lambda: print("exit handlers ran", flush=True))
building = threading.Event()
forever = threading.Event()

def build_clients() -> None:  # building the model client: here it never ends
    building.set()
    forever.wait()

if sys.argv[1] == "running":
    warm_up = WarmUp(build_clients)
    warm_up.start()
    building.wait()
    warm_up.stop()
sys.exit(main(["status"]))
"""


def test_a_daemon_stopped_while_its_warm_up_runs_ends_without_the_exit_handlers(tmp_path):
    """The warm-up thread builds the model client, which loads the CA certificates in OpenSSL without the GIL;
    OpenSSL's own cleanup among the process's exit handlers frees what that load uses, and a daemon stopped
    just then ended in SIGSEGV (one stop in a hundred right after the ready line, seen in the suite). With
    the thread still running, `main` ends the process with `os._exit` and the command's exit code, past the
    exit handlers; without such a thread, the process exits as any other."""
    import subprocess
    import sys

    env = {**os.environ, "CLAWGATE_HOME": str(tmp_path / "home")}

    def run(mode: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", STOP_WITH_THE_WARM_UP_RUNNING, mode], env=env,
                              capture_output=True, text=True, timeout=60)

    over, running = run("none"), run("running")
    assert over.returncode > 0 and "exit handlers ran" in over.stdout, over  # `status` without a daemon: its code
    assert running.returncode == over.returncode and "exit handlers ran" not in running.stdout, running
    assert "no gateway is running" in running.stderr  # what the command said was flushed before the end
