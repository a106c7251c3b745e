"""The CronService's rules, driven with an injected clock and a paused scheduler (no waiting):
misfires after downtime, stable run ids, overlap, backoff and disabling, bounded history."""

from __future__ import annotations

from datetime import timezone
from pathlib import Path
from typing import Any, Iterator

import pytest
from apscheduler.schedulers.asyncio import AsyncIOScheduler

from clawgate.agent.core.events import EventHub
from clawgate.agent.triggers.cron import CronService
from clawgate.agent.triggers.cron_store import CronStore
from clawgate.agent.triggers.jobs import CronError
from clawgate.agent.triggers.schedule import iso_utc
from clawgate.config.schema import CronSettings
from clawgate.agent.bus import SqliteBus
from clawgate.agent.core.statedb import open_state_db

T0 = 1_900_000_000.0  # a fixed "now" (2030-03-17T17:46:40Z)


class Clock:
    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Rig:
    """A CronService over a real SQLite store and bus; `restart()` builds a fresh one on the same file."""

    def __init__(self, path: Path, **settings: Any) -> None:
        self.path = path
        self.clock = Clock()
        self.settings = CronSettings(**{"backoff_seconds": 30, "max_failures": 3, **settings})
        self.events: list[dict[str, Any]] = []
        self.results: dict[str, str] = {}
        self.busy: set[str] = set()
        self._build()

    def _build(self) -> None:
        self.db = open_state_db(self.path, fsync=False)
        self.bus = SqliteBus(self.db)
        hub = EventHub()
        hub.subscribe(self.events.append)
        self.service = CronService(CronStore(self.db, history=self.settings.history), self.bus, hub,
                                   self.settings, clock=self.clock, busy=lambda s: s in self.busy,
                                   result_of=lambda session, run_id: self.results.get(run_id, ""))
        self.scheduler = AsyncIOScheduler(timezone=timezone.utc)
        self.scheduler.start(paused=True)  # armed jobs are visible but never fire by themselves
        self.service.start(self.scheduler)

    def restart(self) -> None:
        self.service.stop()
        self.scheduler.shutdown(wait=False)
        self.db.close()
        self._build()

    def inbound(self) -> list[str]:
        return [row[0] for row in self.db.execute("SELECT id FROM inbox ORDER BY rowid")]

    def outbound(self) -> list[dict[str, Any]]:
        import json

        return [json.loads(b) for (b,) in self.db.execute("SELECT body FROM outbox ORDER BY rowid")]

    def end(self, run_id: str, kind: str = "reply", result: str = "done") -> None:
        """What the loop does when a run finishes: answer the inbox row, emit run_end."""
        self.results[run_id] = result
        self.bus.settle(run_id)
        job_session = self.service.store.get(run_id.split(":")[1]).session
        self.service.on_event({"type": "run_end", "session": job_session, "run_id": run_id, "kind": kind})

    def armed_at(self, job_id: str) -> float | None:
        job = self.scheduler.get_job(f"cron:{job_id}")
        return job.trigger.run_date.timestamp() if job else None


@pytest.fixture
async def rig(tmp_path: Path) -> Iterator[Rig]:
    r = Rig(tmp_path / "clawgate.db")
    yield r
    r.scheduler.shutdown(wait=False)
    r.db.close()


async def test_a_due_job_publishes_one_run_with_a_stable_id_and_rearms(rig: Rig) -> None:
    job = rig.service.add(message="water the plants", every="10m", deliver="telegram:42")
    assert job.next_run_at == T0 + 600 and rig.armed_at(job.id) == T0 + 600
    rig.clock.now = T0 + 600.2
    run_id = rig.service.fire(job.id)
    assert run_id == f"cron:{job.id}:{iso_utc(T0 + 600)}"
    assert rig.inbound() == [run_id]
    msg = next(iter(rig.bus.unanswered()))
    assert (msg.channel, msg.sender_id, msg.session_key) == ("cron", "cron", f"cron:{job.id}")
    assert msg.metadata["deliver"] == {"channel": "telegram", "chat_id": "42"} and msg.metadata["mode"] == "normal"
    assert msg.text.endswith("water the plants")
    assert rig.service.get(job.id).next_run_at == T0 + 1200 and rig.armed_at(job.id) == T0 + 1200
    assert [r.status for r in rig.service.runs(job.id)] == ["running"]
    # a crash after publishing but before the job row was saved: the same due time fires again
    stored = rig.service.get(job.id)
    stored.next_run_at, stored.last_run_id = T0 + 600, None
    rig.service.store.save(stored)
    rig.restart()
    assert rig.service.fire(job.id) == run_id
    assert rig.inbound() == [run_id]  # deduplicated by the inbox: the run is not published twice


async def test_at_job_due_during_downtime_runs_once_within_grace(rig: Rig) -> None:
    job = rig.service.add(message="call Anna", at="+10m", deliver="gateway:main")
    rig.restart()  # "the daemon was down" from here …
    rig.clock.now = T0 + 600 + 1800  # … until 30 min after the job was due (grace: 1 h)
    run_id = rig.service.fire(job.id)
    assert run_id == f"cron:{job.id}:{iso_utc(T0 + 600)}"  # named after the due time, not now
    after = rig.service.get(job.id)
    assert after.state == "done" and after.next_run_at is None and rig.armed_at(job.id) is None
    assert rig.service.fire(job.id) is None and len(rig.inbound()) == 1


async def test_at_job_missed_outside_grace_is_recorded_and_reported(rig: Rig) -> None:
    job = rig.service.add(message="call Anna", at="+10m", deliver="gateway:main", grace="15m")
    rig.clock.now = T0 + 600 + 3600
    assert rig.service.fire(job.id) is None
    assert rig.inbound() == []  # no model run
    (run,) = rig.service.runs(job.id)
    assert run.status == "missed" and "15m grace window" in run.result
    (notice,) = rig.outbound()
    assert notice["chat_id"] == "main" and "missed" in notice["text"] and notice["kind"] == "notice"
    after = rig.service.get(job.id)
    assert after.state == "done" and after.note == "missed its only run" and after.last_status == "missed"


async def test_long_outage_runs_the_latest_and_counts_the_rest_as_missed(rig: Rig) -> None:
    job = rig.service.add(message="hourly report", cron="0 * * * *", tz="UTC")
    first = rig.service.get(job.id).next_run_at
    rig.clock.now = first + 4 * 3600 + 120  # five fire times passed; the latest is 2 min old
    run_id = rig.service.fire(job.id)
    assert run_id is not None and len(rig.inbound()) == 1
    statuses = {r.status: r for r in rig.service.runs(job.id)}
    assert set(statuses) == {"running", "missed"} and "4 runs" in statuses["missed"].result
    assert rig.service.get(job.id).next_run_at == first + 5 * 3600


async def test_a_short_stall_folds_due_times_into_one_run_without_a_notice(rig: Rig) -> None:
    """The timer woke 3 s late for an every-1s job (a busy machine): one run, nothing "missed"."""
    job = rig.service.add(message="tick", every="1s", deliver="gateway:ops")
    first = rig.service.get(job.id).next_run_at
    rig.clock.now = first + 3.2
    run_id = rig.service.fire(job.id)
    assert run_id is not None and rig.inbound() == [run_id]
    runs = rig.service.runs(job.id)
    assert sorted(r.status for r in runs) == ["running", "skipped"]
    folded = next(r for r in runs if r.status == "skipped")
    assert "folded into the run" in folded.result and "and 2 more" in folded.result  # +0, +1, +2 into +3
    assert rig.outbound() == []  # no "missed" notice for times that were not missed


async def test_a_run_still_going_is_not_started_again(rig: Rig) -> None:
    job = rig.service.add(message="slow report", every="1m")
    rig.clock.now = T0 + 60
    first = rig.service.fire(job.id)
    rig.busy.add(job.session)
    rig.clock.now = T0 + 120
    assert rig.service.fire(job.id) is None
    assert rig.inbound() == [first]
    assert [r.status for r in rig.service.runs(job.id)] == ["skipped", "running"]
    with pytest.raises(CronError) as info:
        rig.service.run_now(job.id)
    assert info.value.code == "conflict" and "still running" in info.value.message
    rig.end(first)
    rig.busy.clear()
    rig.clock.now = T0 + 180
    assert rig.service.fire(job.id) is not None and len(rig.inbound()) == 2


async def test_a_lost_run_does_not_block_the_job_forever(rig: Rig) -> None:
    job = rig.service.add(message="x", every="1m")
    rig.clock.now = T0 + 60
    lost = rig.service.fire(job.id)  # accepted, but its session lane is idle and it never ends
    rig.clock.now = T0 + 180
    assert rig.service.fire(job.id) is not None
    assert rig.service.store.run(lost).status == "error"


async def test_failures_back_off_then_disable_the_job_with_a_message(rig: Rig) -> None:
    job = rig.service.add(message="flaky", every="10s", deliver="gateway:ops")
    now = T0 + 10
    for attempt in (1, 2):
        rig.clock.now = now
        run_id = rig.service.fire(job.id)
        rig.end(run_id, kind="error", result="HTTP 500 from the model API")
        after = rig.service.get(job.id)
        backoff = 30 * 2 ** (attempt - 1)
        assert after.failures == attempt and after.enabled
        # pushed past the backoff, still on the job's 10 s grid
        assert after.next_run_at >= now + backoff and (after.next_run_at - T0) % 10 == pytest.approx(0)
        assert rig.armed_at(job.id) == after.next_run_at
        now = after.next_run_at
    rig.clock.now = now
    rig.end(rig.service.fire(job.id), kind="error", result="HTTP 500 from the model API")
    after = rig.service.get(job.id)
    assert not after.enabled and after.state == "disabled" and "3 failed runs in a row" in after.note
    assert rig.armed_at(job.id) is None
    (notice,) = rig.outbound()
    assert notice["chat_id"] == "ops" and "disabled" in notice["text"] and f"cron enable {job.id}" in notice["text"]
    assert any(e["type"] == "cron" and e["action"] == "disabled" for e in rig.events)
    again = rig.service.set_enabled(job.id, True)
    assert again.enabled and again.failures == 0 and rig.armed_at(job.id) == again.next_run_at


async def test_success_resets_the_failure_count(rig: Rig) -> None:
    job = rig.service.add(message="x", every="10s")
    rig.clock.now = T0 + 10
    rig.end(rig.service.fire(job.id), kind="error", result="boom")
    rig.clock.now = rig.service.get(job.id).next_run_at
    rig.end(rig.service.fire(job.id), result="fine")
    after = rig.service.get(job.id)
    assert after.failures == 0 and after.last_status == "ok"
    assert rig.service.runs(job.id)[0].result == "fine"


async def test_a_failed_one_shot_is_retried_not_lost(rig: Rig) -> None:
    job = rig.service.add(message="remind", at="+1m")
    rig.clock.now = T0 + 60
    rig.end(rig.service.fire(job.id), kind="error", result="overloaded")
    after = rig.service.get(job.id)
    assert after.state == "scheduled" and after.next_run_at == T0 + 60 + 30
    rig.clock.now = T0 + 90
    assert rig.service.fire(job.id) is not None and len(rig.inbound()) == 2


async def test_history_is_bounded(tmp_path: Path) -> None:
    rig = Rig(tmp_path / "db", history=3)
    job = rig.service.add(message="x", every="10s")
    for i in range(1, 6):
        rig.clock.now = T0 + 10 * i
        rig.end(rig.service.fire(job.id), result=f"run {i}")
    assert [r.result for r in rig.service.runs(job.id)] == ["run 5", "run 4", "run 3"]
    rig.scheduler.shutdown(wait=False)


async def test_management_errors(rig: Rig) -> None:
    with pytest.raises(CronError) as info:
        rig.service.remove("nope")
    assert info.value.code == "not_found" and "cron list" in info.value.message
    with pytest.raises(CronError, match="needs a message"):
        rig.service.add(message="  ", every="5m")
    with pytest.raises(CronError, match="invalid grace window"):
        rig.service.add(message="x", every="5m", grace="soon")
    job = rig.service.add(message="once", at="+1m")
    rig.clock.now = T0 + 60
    rig.service.fire(job.id)
    with pytest.raises(CronError, match="already run"):
        rig.service.set_enabled(job.id, True)
    removed = rig.service.remove(job.id)
    assert removed.id == job.id and rig.service.jobs() == [] and rig.service.store.runs(job.id) == []


async def test_offline_run_waits_in_the_inbox(tmp_path: Path) -> None:
    db = open_state_db(tmp_path / "db", fsync=False)
    bus = SqliteBus(db)
    service = CronService(CronStore(db), bus, EventHub(), CronSettings())
    job = service.add(message="x", every="1h")
    run_id = service.run_now(job.id)
    assert bus.is_unanswered(run_id) and ":manual:" in run_id
    assert service.runs(job.id)[0].status == "queued"
    db.close()
