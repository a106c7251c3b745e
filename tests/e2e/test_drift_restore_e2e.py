"""Drift control's restore rung in the real daemon: a looping task goes back to its last verified
step and continues from there; a SIGKILL right after the decision still restores exactly once."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.jsonl import complete_records
from tests.drift_support import REFLECT, reflection
from tests.fakes.anthropic_api import FakeAnthropic, Reply, text, tool_use, tool_uses
from tests.waiting import wait_until

ON = {"CLAWGATE_DRIFT__ENABLED": "true", "CLAWGATE_DRIFT__RELEVANCE_THRESHOLD": "0",
      "CLAWGATE_DRIFT__REFLECT_EVERY": "0"}
MISSING = tool_use("read_file", {"path": "missing.txt"})


def _step(i: int, name: str) -> Reply:
    return tool_uses(("write_file", {"path": name, "content": f"step {i}"}),
                     ("task", {"action": "complete", "step": i, "verification": f"read back {name}"}))


def _drift_script(fake: FakeAnthropic, reads: int = 6) -> None:
    fake.enqueue(tool_use("task", {"action": "plan", "goal": "Write a.txt, b.txt and c.txt",
                                   "steps": ["write a.txt", "write b.txt", "write c.txt"]}),
                 _step(1, "a.txt"), tool_use("write_file", {"path": "scratch.txt", "content": "off track"}),
                 *[MISSING] * reads)
    fake.enqueue_for(REFLECT, reflection(False, "missing.txt does not exist", "write b.txt"))


def _continue_script(fake: FakeAnthropic) -> None:
    fake.enqueue(_step(2, "b.txt"), _step(3, "c.txt"),
                 tool_use("task", {"action": "finish", "status": "completed", "result": "three files"}),
                 text("All three files are written."))


def _records(home: Path, session: str) -> list[dict[str, Any]]:
    path = home / "state/sessions" / f"{session}.jsonl"
    return complete_records(path)


def _outbox(home: Path) -> list[dict[str, Any]]:
    with sqlite3.connect(f"file:{home / 'state/clawgate.db'}?mode=ro", uri=True) as db:
        return [json.loads(body) for (body,) in db.execute("SELECT body FROM outbox ORDER BY rowid")]


def _check_restored_once(home: Path, workspace: Path, session: str) -> None:
    assert not (workspace / "scratch.txt").exists()
    assert [(workspace / n).read_text() for n in ("a.txt", "b.txt", "c.txt")] == ["step 1", "step 2", "step 3"]
    records = _records(home, session)
    assert len([r for r in records if r.get("name") == "branch" and r.get("how") == "drift"]) == 1
    assert len(list((home / "state/sessions").glob(f"{session}.*.abandoned"))) == 1
    assert [r["step"] for r in records if r.get("name") == "drift_correction"] == ["reflect", "restore"]
    assert not list((home / "state/checkpoints/drift").glob("*.json"))


async def test_a_looping_task_goes_back_to_its_last_verified_step_and_completes(daemon_factory, fake_model) -> None:
    daemon = daemon_factory(ON)
    _drift_script(fake_model)
    _continue_script(fake_model)
    async with daemon.client(subscribe=["job"]) as client:
        ack = await client.request("chat.send", {"session": "job", "text": "write the three files"})
        finals: dict[str, str] = {}
        drift: list[dict[str, Any]] = []
        async for frame in client.events():
            payload = frame["payload"]
            if frame["event"] == "drift" and payload["action"] == "restore":
                drift.append(payload)
            if frame["event"] == "chat" and payload["state"] in ("final", "error"):
                finals[payload["runId"]] = payload["text"]
                if any(k.startswith("drift:") for k in finals):
                    break
    assert finals[ack["runId"]].startswith('I was going in circles (loop: read_file(path="missing.txt")')
    [(continuation, answer)] = [(k, v) for k, v in finals.items() if k.startswith("drift:")]
    assert answer == "All three files are written."
    assert [d["restored"] for d in drift] == [True]
    _check_restored_once(daemon.home, daemon.workspace, "job")
    # the model continued from the checkpoint, told what was undone and why
    first = next(b for b in fake_model.requests if "Drift control took this work back" in json.dumps(b["messages"]))
    assert "scratch.txt" not in json.dumps(first["messages"][:-1])
    assert "files removed: scratch.txt" in first["messages"][-1]["content"][-1]["text"]


@pytest.mark.parametrize("report_sent", [False, True], ids=["killed-before-the-report", "killed-after-the-report"])
async def test_sigkill_right_after_the_decision_restores_exactly_once(daemon_factory, fake_model, report_sent) -> None:
    """The state DB is held locked from the model answer that triggers the rung, so the daemon blocks
    on its next database write — the report's — right after writing the decision; it is killed there.
    `killed-after-the-report` then marks the message answered, as if the report had gone out first."""
    daemon = daemon_factory({**ON, "CLAWGATE_AGENT__STREAM": "false"})
    _drift_script(fake_model, reads=5)
    held: list[sqlite3.Connection] = []
    locked = threading.Event()

    def lock_then_loop(body: dict) -> Reply:
        if not locked.is_set():
            db = sqlite3.connect(str(daemon.home / "state/clawgate.db"), timeout=30, check_same_thread=False)
            db.isolation_level = None
            db.execute("BEGIN IMMEDIATE")  # no other writer until released
            held.append(db)
            locked.set()
        return MISSING

    fake_model.responder = lock_then_loop
    async with daemon.client() as client:
        ack = await client.request("chat.send", {"session": "job", "text": "write the three files"})
    run_id = ack["runId"]
    log = daemon.home / "state/sessions/job.jsonl"
    wait_until(lambda: locked.is_set() and '"drift_restore"' in log.read_text(), "the restore decision")
    daemon.kill()
    held[0].rollback()
    if report_sent:
        held[0].execute("UPDATE inbox SET status='answered', answered_at=? WHERE id=?", (time.time(), run_id))
    held[0].close()
    assert (daemon.workspace / "scratch.txt").exists()  # decided, not yet restored
    assert list((daemon.home / "state/checkpoints/drift").glob("*.json"))

    _continue_script(fake_model)
    await asyncio.to_thread(daemon.start)
    done = lambda: any(o["in_reply_to"].startswith("drift:") for o in _outbox(daemon.home) if o.get("in_reply_to"))  # noqa: E731
    wait_until(done, "the continuation's answer")
    outbox = _outbox(daemon.home)
    reports = [o for o in outbox if o.get("in_reply_to") == run_id]
    assert len(reports) == (0 if report_sent else 1)  # the recorded report, never a second one
    assert all(r["text"].startswith("I was going in circles") for r in reports)
    [final] = [o for o in outbox if (o.get("in_reply_to") or "").startswith("drift:")]
    assert final["text"] == "All three files are written." and final["chat_id"] == "job"
    _check_restored_once(daemon.home, daemon.workspace, "job")
    # answered: restored on start, before any message ran; unanswered: by the replayed run, after its report
    assert ("finished 1 drift restore(s) interrupted by the restart" in daemon.log_text()) is report_sent
    assert "Traceback" not in daemon.log_text()
