"""What a crash leaves behind is recovered once per fleet: by the worker that takes the session's
partition, not by every process that starts (docs/fleet.md "What happens when…").

The fleet of one process is SIGKILLed while a background job (or a background sub-agent) runs;
three processes then start on the same home and Redis. Exactly one of them reports the job (or
resumes the child), the user hears of it once, and nothing is run twice.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path
from typing import Any

import redis

from clawgate.agent.fleet.keys import partition_of
from clawgate.agent.session import session_file_name
from tests.background_support import Script, background_exec, events_named, job_gone, marker, session_records
from tests.e2e.test_subagents_e2e import APPEND, REPORT, Router, _lines, _requests_for
from tests.fakes.anthropic_api import FakeAnthropic, text, tool_use
from tests.fleet_support import PARTITIONS, Fleet
from tests.harness import ALLOW_PYTHON
from tests.waiting import wait_until

ENV = {"CLAWGATE_AGENT__STREAM": "false", **ALLOW_PYTHON}
INTERRUPTED_LOG = "were running when the daemon stopped"
RESUMED_LOG = "resuming 1 background sub-agent(s)"


def _requests_with(fake: FakeAnthropic, needle: str) -> list[dict[str, Any]]:
    return [body for body in list(fake.requests) if needle in json.dumps(body)]


def _start_build(proc: Any, fake_model: FakeAnthropic, after: str, session: str | None = None) -> None:
    """Ask `proc` for a background build (its process runs until the test touches `release`); the model
    answers the job's report with `after`. Returns once the job runs."""
    script = Script()
    script.on("start the build", background_exec(), text("Started it."))
    script.on("[clawgate] Background job bg-1", text(after))
    fake_model.responder = script

    async def ask() -> None:
        async with proc.client() as client:
            params = {} if session is None else {"session": session}
            assert (await client.chat("start the build", **params))["text"] == "Started it."

    asyncio.run(ask())
    wait_until(lambda: marker(proc.workspace) == ["ran"], "the job to start")


def _restart_as_three(fleet: Fleet) -> list[Any]:
    """SIGKILL the fleet (one process), then start three on the same home."""
    fleet.kill_all()
    return [fleet.add() for _ in range(3)]


def test_a_background_job_cut_by_a_crash_is_reported_once_across_the_fleet(fleet_factory,
                                                                            fake_model: FakeAnthropic) -> None:
    fleet: Fleet = fleet_factory(ENV)
    first = fleet.add()
    _start_build(first, fake_model, "The build was interrupted by a restart; I will check.")
    procs = _restart_as_three(fleet)  # the job's process outlives the daemon

    wait_until(lambda: any(r["kind"] == "assistant" and "interrupted by a restart" in json.dumps(r)
                           for r in session_records(first.home)), "the answer to the wake-up", describe=fleet.logs)
    wait_until(lambda: job_gone(first.workspace), "the leftover process to be killed")
    fleet.spread(3)
    # once: one end record, one wake-up, one model call about it, one answer, one process that did it
    [end] = events_named(first.home, "bg_job_end")
    assert end["status"] == "interrupted" and "still running after the restart and was stopped" in end["text"]
    wakes = [r for r in session_records(first.home) if r["kind"] == "user" and r.get("channel") == "background"]
    assert len(wakes) == 1, wakes
    assert len(_requests_with(fake_model, "was interrupted")) == 1
    answers = [r for r in session_records(first.home) if r["kind"] == "assistant"
               and "interrupted by a restart" in json.dumps(r)]
    assert len(answers) == 1
    assert len([p for p in procs if INTERRUPTED_LOG in p.log_text()]) == 1, fleet.logs()
    assert marker(first.workspace) == ["ran"], "never re-run"
    wait_until(lambda: not json.loads((first.home / "state/background.json").read_text())["jobs"],
               "the job's index entry dropped once its result reached the conversation")


def _child_log(home: Path, parent: str) -> list[dict[str, Any]]:
    parent_log = home / "state/sessions" / session_file_name(parent)
    child = next(json.loads(line)["child"] for line in parent_log.read_text().splitlines() if '"subagent_end"' in line)
    path = home / "state/sessions" / session_file_name(child)
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_a_background_sub_agent_cut_by_a_crash_is_resumed_once_across_the_fleet(fleet_factory,
                                                                                 fake_model: FakeAnthropic) -> None:
    fake_model.responder = Router({
        REPORT: [text("Your background append is done.")],
        "PARENT-FLEET": [tool_use("spawn", {"task": "CHILD-FLEET: append", "background": True}), text("started")],
        # the child's second model call is slow: the fleet is killed during it, after the append ran
        "CHILD-FLEET": [tool_use("exec", {"argv": APPEND}), text("lost", delay=30), text("Background append done.")],
    })
    fleet: Fleet = fleet_factory(ENV)
    first = fleet.add()

    async def spawn() -> None:
        async with first.client() as client:
            assert (await client.chat("PARENT-FLEET", session="fleet-bg"))["text"] == "started"

    asyncio.run(spawn())
    wait_until(lambda: len(_requests_for(fake_model, "CHILD-FLEET")) >= 2, "the child's second model call")
    assert len(list((first.home / "state/subagents").glob("*.json"))) == 1
    procs = _restart_as_three(fleet)

    parent = first.home / "state/sessions" / session_file_name("fleet-bg")
    wait_until(lambda: any(r["kind"] == "assistant" and "Your background append is done." in json.dumps(r)
                           for r in map(json.loads, parent.read_text().splitlines())),
               "the parent's answer to the resumed child's report", describe=fleet.logs)
    wait_until(lambda: not list((first.home / "state/subagents").glob("*.json")), "the child unlisted")
    fleet.spread(3)
    assert len([p for p in procs if RESUMED_LOG in p.log_text()]) == 1, fleet.logs()
    assert len(_requests_for(fake_model, "CHILD-FLEET")) == 3  # resumed once: one more model call
    assert len(_requests_for(fake_model, REPORT)) == 1  # reported once
    assert _lines(first.workspace / "log.txt") == ["child"]  # its tool call never re-run
    results = [r for r in _child_log(first.home, "fleet-bg") if r.get("name") == "subagent_result"]
    assert len(results) == 1 and results[0]["text"] == "Background append done."
    answers = [r for r in map(json.loads, parent.read_text().splitlines())
               if r["kind"] == "assistant" and "Your background append is done." in json.dumps(r)]
    assert len(answers) == 1


def _call(proc: Any, method: str, **params: Any) -> dict[str, Any]:
    async def call() -> dict[str, Any]:
        async with proc.client() as client:
            return await client.request(method, params)
    return asyncio.run(call())


def _runs(proc: Any, job_id: str) -> list[dict[str, Any]]:
    return list(_call(proc, "cron.runs", id=job_id)["runs"])


def _fired_a_later_job(proc: Any) -> None:
    """A one-shot due in a second has run on the fleet: it has been firing its jobs for a while."""
    job = _call(proc, "cron.add", message="a later one-shot", at="+1s")
    job_id = job.get("id") or job["job"]["id"]
    wait_until(lambda: [r["status"] for r in _runs(proc, job_id)] == ["ok"], "the one-shot's run")


def test_a_reboot_job_runs_once_per_start_of_the_fleet_not_per_process(fleet_factory,
                                                                         fake_model: FakeAnthropic) -> None:
    fleet: Fleet = fleet_factory()
    first = fleet.add()
    job = _call(first, "cron.add", message="say that you are up", cron="@reboot", name="boot")
    job_id = job.get("id") or job["job"]["id"]
    # processes joining, or one restarted cleanly, while the fleet runs: not a start of the fleet
    second = fleet.add()
    assert first.terminate() == 0
    first.start()
    _fired_a_later_job(second)
    assert _runs(first, job_id) == []
    # the whole fleet stopped cleanly, then started again: once, however many processes start
    assert first.terminate() == 0 and second.terminate() == 0
    first.start()
    second.start()
    third = fleet.add()
    wait_until(lambda: [r["status"] for r in _runs(third, job_id)] == ["ok"], "the @reboot run", describe=fleet.logs)
    _fired_a_later_job(third)
    assert [r["status"] for r in _runs(second, job_id)] == ["ok"]


def test_a_worker_joining_does_not_take_a_partition_whose_background_job_runs(fleet_factory,
                                                                             fake_model: FakeAnthropic) -> None:
    """Rebalancing hands idle partitions over first; the one whose job runs stays where the job runs,
    and the job's result reaches its chat once."""
    session = next(k for k in (f"build-{i}" for i in range(1000)) if partition_of(k, PARTITIONS) == PARTITIONS - 1)
    fleet: Fleet = fleet_factory(ENV)
    first = fleet.add()
    _start_build(first, fake_model, "Your build finished: BUILD-OK.", session)
    second = fleet.add()  # the highest partitions are the ones handed over first when all are idle
    r = redis.Redis.from_url(fleet.redis_url, decode_responses=True)
    wait_until(lambda: list(fleet.holders(r).values()).count(second.node) == PARTITIONS // 2,  # type: ignore[attr-defined]
               "the joining worker holding its half", describe=fleet.logs)
    assert fleet.holder(r, PARTITIONS - 1) == first.node  # type: ignore[attr-defined]
    assert events_named(first.home, "bg_job_end", session) == []  # still running, untouched
    (first.workspace / "release").touch()
    wait_until(lambda: any(r["kind"] == "assistant" and "BUILD-OK" in json.dumps(r)
                           for r in session_records(first.home, session)), "the answer to the job's result",
               describe=fleet.logs)
    [end] = events_named(first.home, "bg_job_end", session)
    assert end["status"] == "done" and "BUILD-OK" in end["text"]
    wakes = [r for r in session_records(first.home, session) if r["kind"] == "user" and r.get("channel") == "background"]
    assert len(wakes) == 1 and marker(first.workspace) == ["ran", "finished"]


def test_a_worker_stalled_past_its_lease_during_a_background_job_leaves_it_to_the_next_holder(
        fleet_factory, fake_model: FakeAnthropic) -> None:
    """The worker that takes the partition reports the job once (and stops its leftover process); the
    stalled one, woken, gives the job up without writing anything for it."""
    fleet: Fleet = fleet_factory(ENV)
    procs = [fleet.add() for _ in range(2)]
    fleet.spread(2)
    r = redis.Redis.from_url(fleet.redis_url, decode_responses=True)
    stalled = procs[0]
    session = next(k for k in (f"stall-{i}" for i in range(1000))
                   if fleet.holder(r, partition_of(k, PARTITIONS)) == stalled.node)  # type: ignore[attr-defined]
    _start_build(stalled, fake_model, "The build was cut off; I will check.", session)
    assert stalled.proc is not None
    os.kill(stalled.proc.pid, signal.SIGSTOP)
    try:
        wait_until(lambda: any(r["kind"] == "assistant" and "cut off" in json.dumps(r)
                               for r in session_records(stalled.home, session)),
                   "the other worker's answer to the interrupted job", describe=fleet.logs)
        wait_until(lambda: job_gone(stalled.workspace), "the leftover process stopped by the new holder")
    finally:
        os.kill(stalled.proc.pid, signal.SIGCONT)
    n = partition_of(session, PARTITIONS)
    wait_until(lambda: f"lost partition {n}" in stalled.log_text(), "the woken worker giving the partition up",
               describe=lambda: stalled.log_text()[-3000:])
    wait_until(lambda: not json.loads((stalled.home / "state/background.json").read_text())["jobs"],
               "the job's entry dropped once its result reached the conversation")
    [end] = events_named(stalled.home, "bg_job_end", session)
    assert end["status"] == "interrupted"
    wakes = [r for r in session_records(stalled.home, session) if r["kind"] == "user" and r.get("channel") == "background"]
    assert len(wakes) == 1
    assert len([r for r in session_records(stalled.home, session) if r["kind"] == "assistant"
                and "cut off" in json.dumps(r)]) == 1
    assert marker(stalled.workspace) == ["ran"]
    assert stalled.alive()


def test_a_worker_stalled_past_its_lease_during_a_background_sub_agent_stops_it_and_the_next_holder_resumes_it(
        fleet_factory, fake_model: FakeAnthropic) -> None:
    fake_model.responder = Router({
        REPORT: [text("Your background append is done.")],
        "PARENT-STALL": [tool_use("spawn", {"task": "CHILD-STALL: append", "background": True}), text("started")],
        # the child's second model call hangs on the worker that is then stopped past its lease
        "CHILD-STALL": [tool_use("exec", {"argv": APPEND}), text("lost", delay=60), text("Background append done.")],
    })
    fleet: Fleet = fleet_factory(ENV)
    procs = [fleet.add() for _ in range(2)]
    fleet.spread(2)
    r = redis.Redis.from_url(fleet.redis_url, decode_responses=True)
    stalled = procs[0]
    parent = next(k for k in (f"stall-child-{i}" for i in range(1000))
                  if fleet.holder(r, partition_of(k, PARTITIONS)) == stalled.node)  # type: ignore[attr-defined]

    async def spawn() -> None:
        async with stalled.client() as client:
            assert (await client.chat("PARENT-STALL", session=parent))["text"] == "started"

    asyncio.run(spawn())
    wait_until(lambda: len(_requests_for(fake_model, "CHILD-STALL")) >= 2, "the child's second model call")
    assert stalled.proc is not None
    os.kill(stalled.proc.pid, signal.SIGSTOP)
    log = stalled.home / "state/sessions" / session_file_name(parent)
    try:
        wait_until(lambda: any(r["kind"] == "assistant" and "Your background append is done." in json.dumps(r)
                               for r in map(json.loads, log.read_text().splitlines())),
                   "the parent's answer to the child resumed by the other worker", describe=fleet.logs)
    finally:
        os.kill(stalled.proc.pid, signal.SIGCONT)
    wait_until(lambda: "stopped background work of partition" in stalled.log_text(),
               "the woken worker stopping its copy of the child", describe=lambda: stalled.log_text()[-3000:])
    assert len(_requests_for(fake_model, "CHILD-STALL")) == 3  # resumed once, by the other worker
    assert len(_requests_for(fake_model, REPORT)) == 1
    assert _lines(stalled.workspace / "log.txt") == ["child"]
    results = [r for r in _child_log(stalled.home, parent) if r.get("name") == "subagent_result"]
    assert len(results) == 1 and results[0]["text"] == "Background append done."
    assert not list((stalled.home / "state/subagents").glob("*.json"))
