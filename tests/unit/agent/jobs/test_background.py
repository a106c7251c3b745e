"""BackgroundJobs without a daemon: where a result may join the conversation, wake-ups, the index."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from clawgate.agent.jobs.background import CHANNEL, BackgroundJobs
from clawgate.agent.bus import InboundMessage
from clawgate.agent.core.events import EventHub
from clawgate.agent.session import SessionManager
from clawgate.config.schema import BackgroundSettings
from tests.fakes.anthropic.validation import _validate
from tests.waiting import wait_until_async


class Intake:
    def __init__(self) -> None:
        self.published: list[InboundMessage] = []

    def publish_inbound(self, msg: InboundMessage) -> bool:
        self.published.append(msg)
        return True


def _jobs(tmp_path: Path, busy: set[str] | None = None, **caps: int) -> tuple[BackgroundJobs, SessionManager, Intake, list]:
    sessions, events, intake, seen = SessionManager(tmp_path / "sessions", fsync=False), EventHub(), Intake(), []
    events.subscribe(seen.append)
    jobs = BackgroundJobs(BackgroundSettings(**caps), index_path=tmp_path / "background.json", sessions=sessions,
                          events=events, busy=lambda key: key in (busy or set()), fsync=False)
    jobs.intake = intake
    return jobs, sessions, intake, seen


async def _finished(result: str) -> str:
    return result


async def _forever() -> str:
    await asyncio.sleep(3600)
    return ""


def _adopt(jobs: BackgroundJobs, work: Any, key: str = "main") -> str:
    task = asyncio.ensure_future(work)
    return jobs.adopt(task, session_key=key, kind="exec", summary="make test", sender_id="42", owner=False,
                      deliver={"channel": "telegram", "chat_id": "42"}).id


async def test_a_result_never_lands_between_a_tool_use_and_its_result(tmp_path: Path) -> None:
    jobs, sessions, intake, _ = _jobs(tmp_path, busy={"main"})
    session = sessions.get("main")
    session.append("user", text="go", inbound_id="in_1")
    session.append("assistant", content=[{"type": "tool_use", "id": "t1", "name": "exec", "input": {}}], run_id="in_1")
    _adopt(jobs, _finished("exit code 0\nall green"))
    await wait_until_async(lambda: any(r.get("name") == "bg_job_end" for r in session.records), "the job's end record")
    assert not intake.published  # busy: the running turn will carry it
    jobs.inject(session)  # a tool call is open: nothing may come between it and its result
    assert not [r for r in session.records if r["kind"] == "note"]
    session.append("tool_results", results=[{"tool_use_id": "t1", "content": "ok"}], run_id="in_1")
    jobs.inject(session)
    last = session.llm_messages()[-1]["content"]
    assert last[0]["type"] == "tool_result" and "all green" in last[-1]["text"]
    request = {"model": "m", "max_tokens": 10, "messages": session.llm_messages()}
    assert _validate(request) is None
    jobs.inject(session)  # once only
    assert sum(1 for r in session.records if r["kind"] == "note") == 1
    assert json.loads((tmp_path / "background.json").read_text())["jobs"] == {}


async def test_an_idle_session_is_woken_once_and_a_stale_wake_is_skipped(tmp_path: Path) -> None:
    jobs, sessions, intake, seen = _jobs(tmp_path)
    session = sessions.get("main")
    session.append("user", text="go", inbound_id="in_1")
    job = _adopt(jobs, _finished("exit code 1\nfailed"))
    await wait_until_async(lambda: intake.published, "the result to be published")
    [wake] = intake.published
    tainted = wake.metadata.pop("tainted")
    assert tainted.startswith(f"background job {job} result")  # the wake-up reads a program's output: tainted
    assert wake.channel == CHANNEL and wake.metadata == {"deliver": {"channel": "telegram", "chat_id": "42"},
                                                         "owner": False, "bg_job": job}
    assert [e["type"] for e in seen] == ["bg_job_start", "bg_job_end"] and seen[1]["status"] == "done"
    assert not jobs.skip_wake(session, wake)  # not yet told: the wake-up runs
    jobs.inject(session)  # told by another run first …
    assert jobs.skip_wake(session, wake)  # … so the wake-up needs no model call
    await jobs.after_run(session, wake)
    assert len(intake.published) == 1


async def test_caps_and_cancel(tmp_path: Path) -> None:
    jobs, sessions, intake, seen = _jobs(tmp_path, max_per_session=1, max_jobs=2)
    sessions.get("a").append("user", text="go", inbound_id="in_1")
    _adopt(jobs, _forever(), "a")
    assert "background.max_per_session" in (jobs.refusal("a") or "")
    _adopt(jobs, _forever(), "b")
    assert "background.max_jobs" in (jobs.refusal("c") or "")
    assert jobs.cancel_session("a", "by /stop") == ["bg-1"]
    assert jobs.refusal("c") is None
    assert [j["id"] for j in jobs.running()] == ["bg-2"]
    [end] = [r for r in sessions.get("a").records if r.get("name") == "bg_job_end"]
    assert end["status"] == "cancelled" and "cancelled by /stop" in end["text"]
    await jobs.after_run(sessions.get("a"), InboundMessage("x", "a", "42", "a", "hi"))
    assert not intake.published, "a job the person cancelled wakes nobody"
    jobs.inject(sessions.get("a"))
    assert "cancelled by /stop" in sessions.get("a").llm_messages()[-1]["content"][-1]["text"]  # but the model is told
    _adopt(jobs, _forever(), "a")
    assert jobs.cancel_session("a", "because the conversation was reset", forget=True) == ["bg-3"]
    assert all(e.session != "a" for e in jobs.index.jobs.values())  # nothing left to tell a fresh conversation
    await jobs.close()
    [end_b] = [r for r in sessions.get("b").records if r.get("name") == "bg_job_end"]
    assert end_b["status"] == "interrupted"


async def test_a_restart_reports_running_jobs_and_numbers_on(tmp_path: Path) -> None:
    jobs, sessions, _, _ = _jobs(tmp_path)
    sessions.get("main").append("user", text="go", inbound_id="in_1")
    _adopt(jobs, _forever())
    # a crash: the process is gone without close(); a new daemon reads the index
    again, sessions2, intake, _ = _jobs(tmp_path)
    assert again.recover() == ["bg-1"]
    [wake] = intake.published
    assert wake.metadata["bg_job"] == "bg-1"
    [end] = [r for r in sessions2.get("main").records if r.get("name") == "bg_job_end"]
    assert end["status"] == "interrupted" and "NOT re-run" in end["text"]
    assert again.index.new_id() == "bg-2"
    await jobs.close()  # the first "daemon"'s task, left running above


def test_a_start_with_nothing_to_recover_writes_no_index(tmp_path: Path) -> None:
    """Every daemon start recovers: with no job in the index there is nothing to write (and no fsync)."""
    jobs, _, _, _ = _jobs(tmp_path)
    assert jobs.recover() == []
    assert not (tmp_path / "background.json").exists()
    (tmp_path / "background.json").write_text(json.dumps({"version": 1, "next": 7, "jobs": {}}))
    before = (tmp_path / "background.json").stat().st_mtime_ns
    again, _, _, _ = _jobs(tmp_path)
    assert again.recover() == []
    assert (tmp_path / "background.json").stat().st_mtime_ns == before
    assert again.index.new_id() == "bg-7"  # the numbering still comes from the file


def test_a_corrupt_index_is_moved_aside(tmp_path: Path) -> None:
    (tmp_path / "background.json").write_text("{not json")
    jobs, _, _, _ = _jobs(tmp_path)
    assert jobs.index.jobs == {} and list(tmp_path.glob("background.json.corrupt-*"))


async def test_a_job_s_result_joins_only_a_run_of_the_person_who_started_it(tmp_path: Path) -> None:
    """A shared conversation: the owner's job ends while a guest's run is going on. Its output must not enter
    the guest's request; it waits for a run of the owner's (the wake-up names the owner's workspace)."""
    jobs, sessions, intake, _ = _jobs(tmp_path, busy={"grp"})
    session = sessions.get("grp")
    session.append("user", text="build it", inbound_id="in_owner", channel="slack", chat_id="C1", user="", owner=True)
    job = _adopt(jobs, _finished("exit code 0\nowner-secret-build-output"), key="grp")
    session.append("user", text="hi", inbound_id="in_guest", channel="slack", chat_id="C1", user="slack:U2", owner=False)
    await wait_until_async(lambda: any(r.get("name") == "bg_job_end" for r in session.records), "the job's end record")
    jobs.inject(session)
    assert not [r for r in session.records if r["kind"] == "note"]
    assert "owner-secret-build-output" not in json.dumps(session.llm_messages())
    await jobs.after_run(session, InboundMessage(channel="slack", chat_id="C1", sender_id="U2", session_key="grp",
                                                 text="hi", id="in_guest"))
    [wake] = intake.published
    assert wake.metadata["bg_job"] == job and wake.metadata["user"] == ""  # the starter's workspace, not the last speaker's
    session.append("user", text=wake.text, inbound_id=wake.id, channel=CHANNEL, chat_id="grp", user="", owner=True)
    jobs.inject(session)  # the owner's run: now it joins
    assert "owner-secret-build-output" in json.dumps(session.llm_messages())


async def test_a_persons_stop_cancels_only_the_jobs_their_runs_started(tmp_path: Path) -> None:
    """A shared conversation: the guest's /stop reaches the guest's job, never the owner's; the owner's all."""
    jobs, sessions, _, _ = _jobs(tmp_path, max_per_session=3)
    sessions.get("g").append("user", text="go", inbound_id="in_1")
    owners = jobs.adopt(asyncio.ensure_future(_forever()), session_key="g", kind="exec", summary="owner's build",
                        sender_id="1", owner=True, deliver={"channel": "slack", "chat_id": "C1"}, user="").id
    guests = jobs.adopt(asyncio.ensure_future(_forever()), session_key="g", kind="exec", summary="guest's build",
                        sender_id="2", owner=False, deliver={"channel": "slack", "chat_id": "C1"}, user="slack:2").id
    assert jobs.cancel_session("g", "by /stop", user="slack:3") == []  # a third person has nothing here
    assert jobs.cancel_session("g", "by /stop", user="slack:2") == [guests]
    assert [j["id"] for j in jobs.running("g")] == [owners]
    assert jobs.index.jobs[owners].person() == ""  # the owner's: OWNER
    assert jobs.cancel_session("g", "by /stop") == [owners]


async def test_a_guests_job_wakes_the_conversation_as_the_guest(tmp_path: Path) -> None:
    """Someone else may have spoken last in a shared conversation: the wake-up names the job's person, so its
    run works (and is stopped) as theirs."""
    jobs, sessions, intake, _ = _jobs(tmp_path)
    sessions.get("g").append("user", text="go", inbound_id="in_1")
    jobs.adopt(asyncio.ensure_future(_finished("built")), session_key="g", kind="exec", summary="guest's build",
               sender_id="2", owner=False, deliver={"channel": "slack", "chat_id": "C1"}, user="slack:2")
    await wait_until_async(lambda: intake.published, "the wake-up")
    assert intake.published[0].metadata["user"] == "slack:2" and intake.published[0].metadata["owner"] is False
