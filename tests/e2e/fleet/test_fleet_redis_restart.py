"""Redis restarted under load: the processes wait it out with backoff, reconnect, and nothing
accepted is lost or answered twice (the append-only file carries the streams across)."""

from __future__ import annotations

from pathlib import Path

import redis

from tests.fakes.telegram_api import FakeTelegram
from tests.fleet_support import Fleet, RedisServer, telegram_env
from tests.waiting import wait_until

CHATS = range(8000, 8040)


def test_redis_restart_under_load_loses_and_duplicates_nothing(
        tmp_path: Path, fleet_factory, telegram: FakeTelegram) -> None:
    server = RedisServer(tmp_path / "own-redis").start()
    try:
        fleet: Fleet = fleet_factory(telegram_env(telegram), redis_url=server.url)
        for _ in range(3):
            fleet.add()
        for round_ in range(2):
            for chat in CHATS:
                telegram.inject_message(chat, f"c{chat} r{round_}")
        wait_until(lambda: sum(len(telegram.messages_to(c)) for c in CHATS) >= 10, "the load under way",
                   describe=fleet.logs)
        try:  # a clean restart (SHUTDOWN writes the append-only file out), as a package upgrade does
            server.client().shutdown()
        except redis.ConnectionError:
            pass  # SHUTDOWN ends the connection instead of answering
        assert server.proc is not None
        server.proc.wait(30)
        for chat in CHATS:  # accepted by the fake while Redis is down; the poller publishes them once it is back
            telegram.inject_message(chat, f"c{chat} r2")
        server.start()
        wait_until(lambda: all(len(telegram.messages_to(c)) >= 3 for c in CHATS), "three answers in every chat",
                   timeout=180, describe=lambda: f"{sum(len(telegram.messages_to(c)) for c in CHATS)}\n{fleet.logs()}")
        for chat in CHATS:
            assert telegram.messages_to(chat) == [f"echo: c{chat} r{i}" for i in range(3)]
        assert all(p.alive() for p in fleet.procs)
        assert any("Redis unreachable" in p.log_text() or "failed (" in p.log_text() for p in fleet.procs)
    finally:
        server.kill()
