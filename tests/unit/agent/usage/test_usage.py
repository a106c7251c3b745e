"""Token usage: the ledger's running totals, batched saving, day rollover, loading after a restart,
and which session a model call counts for."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from clawgate.agent.providers.base import ModelRequest, ModelResponse
from clawgate.agent.core.statedb import open_state_db
from clawgate.agent.usage.ledger import MeteredProvider, UsageLedger
from clawgate.agent.usage.store import UsageStore
from tests.waiting import wait_until_async

ONE = {"input_tokens": 100, "output_tokens": 10, "cache_read_input_tokens": 50, "cache_creation_input_tokens": 5}


class Day:
    def __init__(self, value: str = "2026-11-23") -> None:
        self.value = value

    def __call__(self) -> str:
        return self.value


class CountingStore(UsageStore):
    def __init__(self, db: sqlite3.Connection) -> None:
        super().__init__(db)
        self.writes = 0
        self.broken = False

    def add(self, deltas) -> None:
        if self.broken:
            raise sqlite3.OperationalError("disk I/O error")
        self.writes += 1
        super().add(deltas)


def store(tmp_path: Path) -> CountingStore:
    return CountingStore(open_state_db(tmp_path / "state.db", fsync=False))


def test_totals_per_day_session_and_since_start_survive_a_new_ledger(tmp_path: Path):
    day = Day()
    ledger = UsageLedger(store(tmp_path), today=day)  # no event loop: every record is written at once
    ledger.record("main", ONE)
    ledger.record("main", {"input_tokens": 1, "output_tokens": 2, "junk": 9, "cache_read_input_tokens": -4})
    ledger.record("telegram:42", ONE)
    day.value = "2026-11-24"
    ledger.record("main", ONE)
    snap = ledger.snapshot()
    assert snap["day"] == "2026-11-24"
    assert snap["today"] == {"calls": 1, **ONE}
    assert snap["total"] == {"calls": 4, "input_tokens": 301, "output_tokens": 32, "cache_read_input_tokens": 150,
                             "cache_creation_input_tokens": 15}
    assert snap["sinceStart"] == snap["total"]
    assert [s["session"] for s in snap["topSessions"]] == ["main", "telegram:42"]
    assert snap["topSessions"][1]["today"]["calls"] == 0  # telegram:42 used nothing on the 24th

    again = UsageLedger(UsageStore(open_state_db(tmp_path / "state.db", fsync=False)), today=day)
    assert again.total() == snap["total"] and again.today() == snap["today"]
    assert again.since_start["calls"] == 0
    report = again.report(session="main", days=7)
    assert [d["day"] for d in report["days"]] == ["2026-11-24", "2026-11-23"]
    assert report["days"][1]["calls"] == 3
    assert report["session"]["total"]["calls"] == 3 and report["session"]["today"]["calls"] == 1
    assert again.report(session="nobody")["session"]["total"]["calls"] == 0


def test_today_reads_zero_after_midnight_before_any_call(tmp_path: Path):
    day = Day()
    ledger = UsageLedger(store(tmp_path), today=day)
    ledger.record("main", ONE)
    day.value = "2026-11-24"
    assert ledger.today()["calls"] == 0 and ledger.session_today("main")["calls"] == 0
    assert ledger.total()["calls"] == 1


async def test_calls_are_saved_in_one_batch_after_the_interval_not_per_call(tmp_path: Path):
    s = store(tmp_path)
    ledger = UsageLedger(s, flush_seconds=0.05)
    for _ in range(50):
        ledger.record("main", ONE)
    assert s.writes == 0  # nothing written on the model path
    await wait_until_async(lambda: s.writes, "the ledger to save")
    assert s.writes == 1
    row = s.db.execute("SELECT calls, input_tokens, cache_write FROM usage WHERE session='main'").fetchone()
    assert row == (50, 5000, 250)
    ledger.record("main", ONE)
    ledger.close()  # shutdown writes what is pending at once
    assert s.writes == 2 and s.db.execute("SELECT calls FROM usage").fetchone() == (51,)


def test_a_failed_save_keeps_the_counts_for_the_next_try(tmp_path: Path):
    s = store(tmp_path)
    ledger = UsageLedger(s)
    s.broken = True
    ledger.record("main", ONE)  # no loop: tried at once, failed, kept
    ledger.record("main", ONE)
    s.broken = False
    ledger.flush()
    assert s.db.execute("SELECT calls, input_tokens FROM usage").fetchone() == (2, 200)


class Answering:
    name = "fake"

    def __init__(self) -> None:
        self.calls = 0

    async def complete(self, request, on_text=None) -> ModelResponse:
        self.calls += 1
        return ModelResponse(content=[{"type": "text", "text": "ok"}], usage=dict(ONE))

    async def close(self) -> None:
        return None

    def warm(self) -> None:
        self.warmed = True


def request(session: str = "") -> ModelRequest:
    return ModelRequest(model="m", system=[], messages=[{"role": "user", "content": "hi"}], session_key=session)


async def test_session_less_calls_count_for_the_runs_session_in_the_same_task_only(tmp_path: Path):
    ledger = UsageLedger(None)
    metered = MeteredProvider(Answering(), ledger)
    assert metered.name == "fake"
    metered.warm()  # the wrapped provider's extras stay reachable

    async def run(session: str) -> None:
        await metered.complete(request(session))  # the turn
        await metered.complete(request())  # a check or summary around it: no session in the request

    await asyncio.gather(asyncio.create_task(run("a")), asyncio.create_task(run("b")))
    await asyncio.create_task(metered.complete(request()))  # outside any run
    assert ledger.by_session["a"]["calls"] == 2 and ledger.by_session["b"]["calls"] == 2
    assert ledger.by_session[""]["calls"] == 1
    assert ledger.since_start["calls"] == 5


def test_chat_status_shows_only_this_chats_tokens_and_paused_providers(tmp_path: Path):
    from clawgate.agent.commands import CommandRouter
    from clawgate.agent.health import Health

    class Sessions:
        def busy(self, key: str) -> bool:
            return False

        def queued(self, key: str) -> int:
            return 0

        def message_count(self, key: str) -> int:
            return 2

        def background_jobs(self, key: str) -> list:
            return []

    class Tasks:
        def list(self, session: str) -> list:
            return []

    ledger = UsageLedger(None)
    ledger.record("telegram:1", {"input_tokens": 1500, "output_tokens": 20})
    ledger.record("telegram:2", {"input_tokens": 999_999, "output_tokens": 7})
    status = Health()
    status.add("model", lambda: "claude-x")
    status.add("provider", lambda: "anthropic->openai")
    status.add("providers", lambda: [{"name": "anthropic", "state": "open", "retryAt": 1_800_000_000.0, "failures": 3},
                                     {"name": "openai", "state": "closed", "retryAt": None, "failures": 0}])
    router = CommandRouter(agent_name="Claw", sessions=Sessions(), tasks=Tasks(), status=status,  # type: ignore[arg-type]
                           usage=ledger)
    reply = router.handle("status", "telegram:1") or ""
    assert "Tokens in this chat: today 1,500 in / 20 out; in all 1,500 in / 20 out" in reply
    assert "999,999" not in reply and "telegram:2" not in reply  # another chat's figures stay private
    assert "Provider anthropic is paused after repeated failures; it is tried again at " in reply
    assert "openai" not in reply.split("\n", 1)[1]
