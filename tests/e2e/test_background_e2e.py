"""Background exec end to end: the real daemon, the real gateway client, the fake Messages API.

A background job must leave its session free (a second message is answered while it runs), its
result must reach the session's next model call as new content after the call's own result, an
idle session must be woken with it, a crash must be reported as an interrupted job (never re-run),
and the caps must refuse clearly.
"""

from __future__ import annotations

import json
from typing import Any

from tests.background_support import (
    Script,
    background_exec,
    events_named,
    job_gone,
    last_message_text,
    marker,
    session_records,
)
from tests.fakes.anthropic_api import FakeAnthropic, text, tool_use, tool_uses
from tests.harness import ALLOW_PYTHON
from tests.waiting import wait_until, wait_until_async

ENV = {"CLAWGATE_AGENT__STREAM": "false", **ALLOW_PYTHON}


def _requests_with(fake: FakeAnthropic, needle: str) -> list[dict[str, Any]]:
    return [body for body in list(fake.requests) if needle in json.dumps(body)]


async def test_a_background_job_leaves_the_chat_free_and_its_result_reaches_the_next_model_call(
        daemon_factory, fake_model: FakeAnthropic) -> None:
    daemon = daemon_factory(ENV)
    ws = daemon.workspace
    script = Script()
    script.on("start the build", background_exec(), text("Started it."))
    script.on("are you there", text("Yes, still here."))

    def release_and_wait(body: dict[str, Any]):
        (ws / "release").write_text("go")  # the job may finish now; the model call waits until it did
        wait_until(lambda: events_named(daemon.home, "bg_job_end"), "the job to end")
        return tool_use("list_dir", {"path": "."})

    script.on("check on it", release_and_wait, text("All done."))
    script.on("anything else", text("Nothing else."))
    fake_model.responder = script

    async with daemon.client(subscribe=["main"]) as client:
        first = await client.chat("start the build")
        assert first["state"] == "final" and first["text"] == "Started it."
        [started] = _requests_with(fake_model, "started in the background as job bg-1")
        assert "Its result will be added to this conversation" in json.dumps(started)

        second = await client.chat("are you there?")
        assert second["text"] == "Yes, still here."
        # The job cannot have finished: it waits for `release`, which nobody wrote yet.
        assert not (ws / "release").exists() and "finished" not in marker(ws)
        await wait_until_async(lambda: marker(ws) == ["ran"], "the job to be running")
        status = await client.request("status")
        assert [job["id"] for job in status["backgroundJobs"]] == ["bg-1"]
        assert "python3" in status["backgroundJobs"][0]["summary"]

        third = await client.chat("check on it")
        assert third["text"] == "All done."
        # The result joined the request after list_dir's tool_result: new content, pairing intact.
        after_list = [b for b in _requests_with(fake_model, "check on it") if "BUILD-OK" in json.dumps(b)][0]
        last = after_list["messages"][-1]["content"]
        assert last[0]["type"] == "tool_result" and last[-1]["type"] == "text"
        note = last[-1]["text"]
        assert note.startswith("[runtime] Background job bg-1") and "exit code 0" in note and "BUILD-OK" in note
        assert "untrusted-data" in note  # program output is marked as data

        fourth = await client.chat("anything else?")
        assert fourth["text"] == "Nothing else."
    assert marker(ws) == ["ran", "finished"]
    # Told once, in the run that was going on: no wake-up turn afterwards, and the last request
    # carries the result exactly once.
    assert not [r for r in session_records(daemon.home) if r["kind"] == "user" and r.get("channel") == "background"]
    assert json.dumps(fake_model.requests[-1]).count("BUILD-OK") == 1
    [end] = events_named(daemon.home, "bg_job_end")
    assert end["status"] == "done" and end["exit"] == 0


async def test_an_idle_session_is_woken_with_the_result(daemon_factory, fake_model: FakeAnthropic) -> None:
    daemon = daemon_factory(ENV)
    script = Script()
    script.on("start the build", background_exec(), text("Started it."))
    script.on("[clawgate] Background job bg-1", text("Your build finished: BUILD-OK."))
    fake_model.responder = script

    async with daemon.client(subscribe=["main"]) as client:
        first = await client.chat("start the build")
        assert first["text"] == "Started it."
        (daemon.workspace / "release").write_text("go")
        woken, ends = None, []
        async for frame in client.events():
            payload = frame["payload"]
            if frame["event"] == "bg_job_end":
                ends.append(payload)
            if frame["event"] == "chat" and payload.get("state") == "final" and str(payload.get("runId")).startswith("bg:"):
                woken = payload
                break
    assert woken is not None and woken["text"] == "Your build finished: BUILD-OK."
    [end] = ends  # gateway clients see the job end: which, where, what, how it exited, how long
    assert end["job"] == "bg-1" and end["session"] == "main" and end["status"] == "done" and end["exit"] == 0
    assert "python3" in end["summary"] and end["duration_ms"] >= 0
    [wake_request] = _requests_with(fake_model, "[clawgate] Background job bg-1")
    assert "BUILD-OK" in last_message_text(wake_request)
    [wake] = [r for r in session_records(daemon.home) if r["kind"] == "user" and r.get("channel") == "background"]
    assert wake["owner"] is True  # acts for whoever started the job (the gateway token holder)


async def start_build(daemon_factory, fake_model: FakeAnthropic, *, report: str):
    """A daemon whose model starts the background build, then answers its report with `report`;
    returns once the job's program is running."""
    daemon = daemon_factory(ENV)
    script = Script()
    script.on("start the build", background_exec(), text("Started it."))
    script.on("[clawgate] Background job bg-1", text(report))
    fake_model.responder = script
    async with daemon.client() as client:
        assert (await client.chat("start the build"))["text"] == "Started it."
    wait_until(lambda: marker(daemon.workspace) == ["ran"], "the job to start")
    return daemon


async def test_a_job_killed_with_the_daemon_is_reported_interrupted_and_not_rerun(daemon_factory,
                                                                                   fake_model: FakeAnthropic) -> None:
    daemon = await start_build(daemon_factory, fake_model,
                               report="The build was interrupted by a restart; I will check.")
    daemon.kill()  # SIGKILL: nothing is cleaned up; the job's process outlives the daemon
    daemon.start()
    wait_until(lambda: _requests_with(fake_model, "was interrupted"), "the session to be told")
    [told] = _requests_with(fake_model, "was interrupted")
    note = last_message_text(told)
    assert "Background job bg-1" in note and "outcome is unknown" in note and "NOT re-run" in note
    assert "still running after the restart and was stopped" in note  # the leftover process was killed
    wait_until(lambda: any(r["kind"] == "assistant" and "interrupted by a restart" in json.dumps(r)
                          for r in session_records(daemon.home)), "the answer to the wake-up")
    wait_until(lambda: job_gone(daemon.workspace), "the leftover process to be killed")
    async with daemon.client() as client:
        status = await client.request("status")
    assert status["backgroundJobs"] == []
    assert marker(daemon.workspace) == ["ran"], "the command ran once, and its leftover process was stopped"
    [end] = events_named(daemon.home, "bg_job_end")
    assert end["status"] == "interrupted"
    assert not json.loads((daemon.home / "state/background.json").read_text())["jobs"]


async def test_caps_refuse_with_a_clear_error(daemon_factory, fake_model: FakeAnthropic) -> None:
    daemon = daemon_factory({**ENV, "CLAWGATE_BACKGROUND__MAX_PER_SESSION": "1", "CLAWGATE_BACKGROUND__MAX_JOBS": "2"})
    script = Script()
    script.on("two builds", tool_uses(("exec", background_exec().tool_calls[0]["input"]),
                                      ("exec", background_exec().tool_calls[0]["input"])), text("Tried."))
    script.on("one more", background_exec(), text("Tried again."))
    script.on("and another", background_exec(), text("Third."))
    fake_model.responder = script
    async with daemon.client() as client:
        assert (await client.chat("two builds", session="a"))["text"] == "Tried."
        results = [b["content"] for b in fake_model.requests[-1]["messages"][-1]["content"] if b["type"] == "tool_result"]
        assert "started in the background as job" in results[0]
        assert results[1].startswith("error: not started: this chat already runs 1 background jobs")
        assert "background.max_per_session" in results[1] and "fix:" in results[1]
        assert (await client.chat("one more", session="b"))["text"] == "Tried again."
        assert (await client.chat("and another", session="c"))["text"] == "Third."
        refused = fake_model.requests[-1]["messages"][-1]["content"][0]["content"]
        assert "2 background jobs are running, the limit of background.max_jobs" in refused
        status = await client.request("status")
        assert sorted(job["session"] for job in status["backgroundJobs"]) == ["a", "b"]
        # /stop cancels a session's background jobs (gateway chat.stop is the same control)
        stopped = await client.request("chat.stop", {"session": "a"})
        assert stopped["backgroundCancelled"] == ["bg-1"]
        await wait_until_async(lambda: len(events_named(daemon.home, "bg_job_end", "a")) == 1, "the cancellation record")
        status = await client.request("status")
        assert [job["session"] for job in status["backgroundJobs"]] == ["b"]
    (daemon.workspace / "release").write_text("go")
    wait_until(lambda: events_named(daemon.home, "bg_job_end", "b"), "b's job to end")
    [cancelled] = events_named(daemon.home, "bg_job_end", "a")
    assert cancelled["status"] == "cancelled" and "cancelled by /stop" in cancelled["text"]
    assert marker(daemon.workspace).count("finished") == 1  # only b's job finished; a's process was killed


async def test_a_slow_foreground_call_moves_to_the_background_by_itself(daemon_factory, fake_model: FakeAnthropic) -> None:
    daemon = daemon_factory({**ENV, "CLAWGATE_TOOLS__EXEC__BACKGROUND_AFTER_SECONDS": "0.5"})
    script = Script()
    foreground = background_exec().tool_calls[0]["input"]
    foreground.pop("background")
    script.on("run the tests", tool_use("exec", foreground), text("They are running."))
    script.on("are you there", text("Yes."))
    fake_model.responder = script
    async with daemon.client() as client:
        assert (await client.chat("run the tests"))["text"] == "They are running."
        [moved] = _requests_with(fake_model, "so it moved to the background as job bg-1")
        assert "still running after 0.5s" in json.dumps(moved)
        assert (await client.chat("are you there?"))["text"] == "Yes."  # the lane is free
        assert "finished" not in marker(daemon.workspace)
        (daemon.workspace / "release").write_text("go")
        await wait_until_async(lambda: any(r["kind"] == "note" and "BUILD-OK" in r["text"]
                                   for r in session_records(daemon.home)), "the result in the conversation")


async def test_a_clean_shutdown_kills_the_job_and_the_next_start_reports_it(daemon_factory,
                                                                          fake_model: FakeAnthropic) -> None:
    daemon = await start_build(daemon_factory, fake_model, report="It was interrupted by the shutdown.")
    assert daemon.terminate() == 0
    [end] = events_named(daemon.home, "bg_job_end")
    assert end["status"] == "interrupted" and "was stopped" in end["text"]
    daemon.start()
    wait_until(lambda: _requests_with(fake_model, "It was interrupted by the shutdown") or any(
        r["kind"] == "assistant" and "interrupted by the shutdown" in json.dumps(r) for r in session_records(daemon.home)),
        "the wake-up after the restart")
    [told] = _requests_with(fake_model, "[clawgate] Background job bg-1")
    assert "NOT re-run" in last_message_text(told)
    assert job_gone(daemon.workspace), "the job's process was killed at shutdown"
    assert "Traceback" not in daemon.log_text()
    assert marker(daemon.workspace) == ["ran"]  # never re-run
