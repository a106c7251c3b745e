"""The daemon process as a whole, in-process: a dead core loop must not leave a zombie daemon."""

from __future__ import annotations

import asyncio

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
