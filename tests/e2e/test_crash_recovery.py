"""Kill -9 at many points of a long task, restart, and check nothing is lost or repeated."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Callable

from tests.harness import ALLOW_PYTHON
from tests.scripted_job import ScriptedJob
from tests.waiting import wait_until, wait_until_async

STEPS = 12


def _log_lines(workspace: Path) -> list[str]:
    path = workspace / "log.txt"
    return path.read_text().splitlines() if path.exists() else []


def _db(home: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{home / 'state/clawgate.db'}?mode=ro", uri=True)


def _tasks(home: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((home / "state/tasks").glob("t_*.json"))]


def _session_text(home: Path) -> str:
    return "".join(p.read_text() for p in (home / "state/sessions").glob("*.jsonl"))


async def test_long_task_survives_sigkill_at_many_points(daemon_factory, fake_model):
    job = ScriptedJob(steps=STEPS, delay=0.03)
    fake_model.responder = job
    daemon = daemon_factory({"CLAWGATE_AGENT__STREAM": "false", **ALLOW_PYTHON})
    async with daemon.client() as client:
        ack = await client.request("chat.send", {"session": "job", "text": "run the job"})
    run_id = ack["runId"]
    ws = daemon.workspace

    kill_points: list[tuple[str, Callable[[], bool]]] = [
        ("during the 3rd model call", lambda: job.calls >= 3),
        ("right after step 3 ran", lambda: len(_log_lines(ws)) >= 3),
        ("during a model call after step 5", lambda: len(_log_lines(ws)) >= 5 and job.calls % 2 == 0),
        ("right after step 7 ran", lambda: len(_log_lines(ws)) >= 7),
        ("right after a task-state write", lambda: any(
            sum(s["status"] == "done" for s in t["steps"]) >= 9 for t in _tasks(daemon.home))),
        ("right after step 11 ran", lambda: len(_log_lines(ws)) >= 11),
        ("once the final answer is in the log", lambda: "steps are done and verified" in _session_text(daemon.home)),
    ]
    for what, predicate in kill_points:
        wait_until(predicate, what, interval=0.002)  # a short interval: kill close to the point
        daemon.kill()
        daemon.start()

    def answered() -> bool:
        with _db(daemon.home) as db:
            row = db.execute("SELECT status FROM inbox WHERE id=?", (run_id,)).fetchone()
            return row is not None and row[0] == "answered"

    wait_until(answered, "the message to be answered")
    with _db(daemon.home) as db:
        replies = db.execute("SELECT body, status FROM outbox").fetchall()
    finals = [json.loads(body) for body, _ in replies if json.loads(body)["in_reply_to"] == run_id]
    assert len(finals) == 1, finals
    assert finals[0]["kind"] == "reply" and "done and verified" in finals[0]["text"]

    # Every step's side effect happened exactly once, in order.
    assert _log_lines(ws) == [f"step {k}" for k in range(1, STEPS + 1)]
    [task] = _tasks(daemon.home)
    assert task["status"] == "completed"
    assert all(s["status"] == "done" and s["verification"] for s in task["steps"])
    # No state file is corrupt: every session line parses, nothing was moved aside.
    for path in (daemon.home / "state/sessions").glob("*.jsonl"):
        for line in path.read_text().splitlines():
            json.loads(line)
    assert not list((daemon.home / "state").rglob("*.corrupt*"))
    assert "Traceback" not in daemon.log_text()


async def test_unknown_outcome_is_verified_not_repeated(daemon_factory, fake_model):
    """Kill while a side-effecting call is running: it must be reported unknown, not re-run."""
    job = ScriptedJob(steps=3)
    fake_model.responder = job
    daemon = daemon_factory({"CLAWGATE_AGENT__STREAM": "false", **ALLOW_PYTHON})
    slow = ["python3", "-c", "import time; open('log.txt','a').write('step 2\\n'); time.sleep(3)"]
    original = job.decide

    def decide(messages):
        reply = original(messages)
        if reply.tool_calls and reply.tool_calls[0]["input"].get("argv") == ["python3", "-c", "open('log.txt','a').write('step 2\\n')"]:
            reply.tool_calls[0]["input"]["argv"] = slow
        return reply

    job.decide = decide
    async with daemon.client() as client:
        ack = await client.request("chat.send", {"session": "job", "text": "run the job"})
    wait_until(lambda: _log_lines(daemon.workspace) == ["step 1", "step 2"], "step 2 to start")
    daemon.kill()  # step 2's exec is mid-flight: intent journalled, no result
    daemon.start()
    async with daemon.client(subscribe=["job"]) as client:
        async def verified() -> bool:
            history = await client.request("chat.history", {"session": "job"})
            return any("done and verified" in m.get("text", "") for m in history["messages"])

        await wait_until_async(verified, "the job's final answer in the history")
    assert _log_lines(daemon.workspace) == ["step 1", "step 2", "step 3"]
    assert job.unknown_seen >= 1 and job.reads >= 1
    session_log = _session_text(daemon.home)
    assert "tool_outcome_unknown" in session_log
