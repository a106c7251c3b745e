"""The daemon process as a whole, in-process: a dead core loop must not leave a zombie daemon."""

from __future__ import annotations

import asyncio

from config.paths import Paths
from config.schema import Settings
from gateway.daemon import Daemon


async def test_a_dead_core_task_shuts_the_daemon_down_with_failure(tmp_path, caplog):
    settings = Settings.model_validate({"gateway": {"port": 0, "token": "t" * 24}})
    daemon = Daemon(Paths(tmp_path), settings)

    async def broken() -> None:
        raise RuntimeError("intake broke")

    daemon.agent.run = broken  # type: ignore[method-assign]
    await asyncio.wait_for(daemon.serve_forever(), 15)
    assert daemon.failed
    assert "core task agent stopped unexpectedly" in caplog.text
