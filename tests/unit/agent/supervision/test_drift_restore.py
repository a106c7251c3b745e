"""Drift control's restore rung in the real agent loop with a real CheckpointService: the run ends
with a report, the session goes back to the last verified step after it, and a continuation
carries on from there (the fake Messages API scripts the model)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from clawgate.agent.supervision.drift_restore import DriftRestore
from clawgate.config.schema import Settings
from tests import checkpoint_rows as rows
from tests.drift_support import REFLECT, Rig, build, reflection
from tests.fakes.anthropic_api import FakeAnthropic, Reply, text, tool_use, tool_uses

MISSING = tool_use("read_file", {"path": "missing.txt"})


def settings(**drift: object) -> Settings:
    s = Settings()
    s.drift = s.drift.model_copy(update={"reflect_every": 0, "relevance_threshold": 0.0, **drift})
    s.reflection.enabled = False
    return s


def plan(goal: str, *steps: str) -> Reply:
    return tool_use("task", {"action": "plan", "goal": goal, "steps": list(steps)})


def step(i: int, name: str) -> Reply:
    return tool_uses(("write_file", {"path": name, "content": f"step {i}"}),
                     ("task", {"action": "complete", "step": i, "verification": f"read back {name}"}))


def finish(answer: str) -> list[Reply]:
    return [tool_use("task", {"action": "finish", "status": "completed", "result": "done"}), text(answer)]


def texts(body: dict[str, Any]) -> str:
    return json.dumps(body["messages"])


def tool_paths(body: dict[str, Any]) -> list[str]:
    return [b["input"]["path"] for m in body["messages"] if m["role"] == "assistant"
            for b in m["content"] if b.get("type") == "tool_use" and "path" in b["input"]]


def branch_events(rig: Rig, key: str = "s") -> list[dict[str, Any]]:
    return [e for e in rig.log_events("branch", key) if e.get("how") == "drift"]


def script_drift(fake: FakeAnthropic) -> None:
    """Plan three steps, do step 1 (verified), write a scratch file, then loop on a missing file."""
    fake.enqueue(plan("Write a.txt, b.txt and c.txt", "write a.txt", "write b.txt", "write c.txt"), step(1, "a.txt"),
                 tool_use("write_file", {"path": "scratch.txt", "content": "off track"}), *[MISSING] * 6)
    fake.enqueue_for(REFLECT, reflection(False, "missing.txt does not exist; re-reading it will not help",
                                         "write b.txt"))


async def test_a_loop_after_a_verified_step_goes_back_to_it_and_continues(tmp_path: Path, fake_model) -> None:
    rig = build(tmp_path, fake_model, settings(), checkpoints=True)
    script_drift(fake_model)
    fake_model.enqueue(step(2, "b.txt"), step(3, "c.txt"), *finish("All three files are written."))
    [report] = await rig.send("write the three files")

    assert report.text.startswith('I was going in circles (loop: read_file(path="missing.txt") 3x')
    assert "going back to the checkpoint after step 1/3" in report.text and "1 file(s)" in report.text
    ws = rig.workspace.root
    assert not (ws / "scratch.txt").exists()  # written after the checkpoint: gone
    assert [(ws / n).read_text() for n in ("a.txt", "b.txt", "c.txt")] == ["step 1", "step 2", "step 3"]
    # the continuation: the conversation as it was at the checkpoint, plus the note of what was undone and why
    continued = rig.main_calls()[9]  # 9 turns: plan, step 1, scratch, six reads
    assert tool_paths(continued) == ["a.txt"]  # neither scratch.txt nor the looping reads
    note = continued["messages"][-1]["content"][-1]["text"]
    assert note.startswith("[clawgate] Drift control took this work back to the checkpoint after step 1/3")
    assert "files removed: scratch.txt" in note and "missing.txt does not exist" in note
    assert "Continue the task from the step after step 1" in note
    [final] = [o for o in rig.replies() if o.in_reply_to and o.in_reply_to.startswith("drift:")]
    assert final.text == "All three files are written." and (final.channel, final.chat_id) == ("gateway", "s")
    user = [r for r in rig.session().records if r["kind"] == "user"][-1]
    assert user["channel"] == "drift" and user["owner"] is True and user["deliver"] == {"channel": "gateway", "chat_id": "s"}
    # exactly one restore; the later history is kept beside the log; the ladder's position survived the cut
    [branch] = branch_events(rig)
    assert branch["drift"]["checkpoint"] == branch["checkpoint"] and branch["tape"] is None
    assert "scratch.txt" in (tmp_path / "sessions" / branch["abandoned"]).read_text()
    steps = [(e["step"], e.get("restored")) for e in rig.log_events("drift_correction")]
    assert steps == [("reflect", None), ("restore", True)]
    assert rig.tasks.all()[0].status == "completed"
    assert [e["restored"] for e in rig.events if e["type"] == "drift" and e["action"] == "restore"] == [True]
    assert not list((tmp_path / "checkpoints/drift").glob("*.json"))  # nothing left pending


async def test_drift_after_the_restore_goes_on_to_a_reset_not_a_second_restore(tmp_path: Path, fake_model) -> None:
    rig = build(tmp_path, fake_model, settings(), checkpoints=True)
    script_drift(fake_model)
    fake_model.enqueue(*[MISSING] * 6)
    await rig.send("write the three files")
    steps = [e["step"] for e in rig.log_events("drift_correction")]
    assert steps == ["reflect", "restore", "reset"]
    assert len(branch_events(rig)) == 1
    [stopped] = [o for o in rig.replies() if o.in_reply_to and o.in_reply_to.startswith("drift:")]
    assert stopped.text.startswith("I stopped working on this because drift persisted")


async def test_without_a_verified_step_the_task_goes_back_to_before_the_drift(tmp_path: Path, fake_model) -> None:
    """No step verified yet: the point is the turn checkpoint before the first signal (the plan is kept)."""
    rig = build(tmp_path, fake_model, settings(), checkpoints=True)
    fake_model.enqueue(plan("Summarise missing.txt", "read missing.txt"), *[MISSING] * 12)
    fake_model.enqueue_for(REFLECT, reflection(False))
    [reply] = await rig.send("summarise missing.txt")
    assert reply.text.startswith("I was going in circles") and "the point in the task before the drift began" in reply.text
    [branch] = branch_events(rig)
    assert branch["drift"]["description"] == "after model turn 3"  # the loop's signal came with turn 4
    steps = [(e["step"], e.get("restored")) for e in rig.log_events("drift_correction")]
    assert steps == [("reflect", None), ("restore", True), ("reset", None)]  # one restore, then the next rung
    [stopped] = [o for o in rig.replies() if o.in_reply_to and o.in_reply_to.startswith("drift:")]
    assert stopped.text.startswith("I stopped working on this because drift persisted")
    assert "Continue the task from there" in texts(rig.main_calls()[7])
    assert rig.tasks.all()[0].goal == "Summarise missing.txt"


async def test_a_loop_without_a_task_goes_back_to_the_checkpoint_before_it_began(tmp_path: Path, fake_model) -> None:
    rig = build(tmp_path, fake_model, settings(), checkpoints=True)
    fake_model.enqueue(tool_use("write_file", {"path": "notes.txt", "content": "kept"}),
                       tool_use("write_file", {"path": "scratch.txt", "content": "off track"}),
                       *[MISSING] * 3, tool_use("write_file", {"path": "junk.txt", "content": "during the loop"}),
                       *[MISSING] * 3, tool_use("write_file", {"path": "summary.txt", "content": "summary"}),
                       text("Wrote summary.txt from notes.txt."))
    fake_model.enqueue_for(REFLECT, reflection(False, "missing.txt does not exist", "write the summary"))
    [report] = await rig.send("summarise my notes into summary.txt")
    assert report.text.startswith('I was going in circles (loop: read_file(path="missing.txt") 3x')
    assert "the point in this request before the drift began (after model turn 4)" in report.text
    ws = rig.workspace.root
    # the loop was first signalled at turn 5: back to the end of turn 4 (the last one without a signal), so
    # what turns 1 and 2 wrote stays; the continuation finished the request
    assert (ws / "notes.txt").read_text() == "kept" and (ws / "scratch.txt").exists()
    assert not (ws / "junk.txt").exists()  # written during the drift: removed
    assert (ws / "summary.txt").read_text() == "summary"
    continued = rig.main_calls()[9]  # turns 1-9 ran before the restore
    assert texts(continued).count("missing.txt") >= 1 and "scratch.txt" in texts(continued)
    assert "junk.txt" not in json.dumps(continued["messages"][:-1])  # the conversation went back too
    note = continued["messages"][-1]["content"][-1]["text"]
    assert note.startswith("[clawgate] Drift control took this work back to the point in this request before the drift")
    assert "files removed: junk.txt" in note
    assert "The request was: summarise my notes into summary.txt" in note
    [final] = [o for o in rig.replies() if o.in_reply_to and o.in_reply_to.startswith("drift:")]
    assert final.text == "Wrote summary.txt from notes.txt."
    steps = [(e["step"], e.get("restored")) for e in rig.log_events("drift_correction")]
    assert steps == [("reflect", None), ("restore", True)]


async def test_a_guest_run_is_continued_as_a_guest_and_leaves_other_sessions_files(tmp_path: Path, fake_model) -> None:
    rig = build(tmp_path, fake_model, settings(), checkpoints=True)
    fake_model.enqueue(plan("Write a.txt and b.txt", "write a.txt", "write b.txt"), step(1, "a.txt"), text("Step 1 done."))
    await rig.send("write the files", session="g", owner=False)
    fake_model.enqueue(tool_use("write_file", {"path": "owner.txt", "content": "mine"}), text("Saved."))
    await rig.send("save my note", session="o")
    fake_model.enqueue(tool_use("write_file", {"path": "scratch.txt", "content": "x"}), *[MISSING] * 6,
                       step(2, "b.txt"), *finish("Both written."))
    fake_model.enqueue_for(REFLECT, reflection(False))
    [report] = await rig.send("go on", session="g", owner=False)
    assert "going back to the checkpoint after step 1/2" in report.text
    ws = rig.workspace.root
    assert not (ws / "scratch.txt").exists() and (ws / "owner.txt").read_text() == "mine"
    user = [r for r in rig.session("g").records if r["kind"] == "user"][-1]
    assert user["channel"] == "drift" and user["owner"] is False  # no rights gained by being continued
    [final] = [o for o in rig.replies() if o.in_reply_to and o.in_reply_to.startswith("drift:")]
    assert final.text == "Both written." and final.chat_id == "g"


async def test_a_crash_between_the_decision_and_the_log_commit_restores_once(tmp_path: Path, fake_model) -> None:
    """The decision is recorded, the report went out, the files were already put back, then the process
    died: a restart finishes the restore once (no second abandoned branch) and queues the continuation."""
    rig = build(tmp_path, fake_model, settings(), checkpoints=True)
    assert rig.checkpoints is not None and rig.drift_restore is not None
    rig.loop.after_run.clear()  # the process "dies" before the after-run hook
    script_drift(fake_model)
    [report] = await rig.send("write the three files")
    assert "going back" in report.text and (rig.workspace.root / "scratch.txt").exists()
    decision = [r for r in rig.session().records if r.get("drift_restore")][-1]["drift_restore"]
    cp = rig.checkpoints.get(decision["checkpoint"])
    rig.checkpoints.workspace.restore(str(cp.snapshot["workspace"]), only=set(decision["paths"]))  # half done
    assert not (rig.workspace.root / "scratch.txt").exists()

    restarted = DriftRestore(rig.checkpoints, rig.loop.sessions, rig.bus, rig.loop.events,
                             tmp_path / "checkpoints/drift", fsync=False)
    assert restarted.recover() == ["s"]
    assert restarted.recover() == [] and restarted.settle("s") == "none"  # nothing left to do
    assert len(branch_events(rig)) == 1
    assert len(list((tmp_path / "sessions").glob("s.*.abandoned"))) == 1
    continuation = await rig.bus.next_inbound()
    assert continuation.id == decision["continuation"] and continuation.metadata["owner"] is True
    assert "files removed: scratch.txt" in continuation.text
    assert rig.bus.publish_inbound(continuation) is False  # its id is fixed: publishing again is a no-op


async def test_a_restore_that_cannot_be_done_says_so_and_the_work_goes_on(tmp_path: Path, fake_model) -> None:
    rig = build(tmp_path, fake_model, settings(), checkpoints=True)
    assert rig.checkpoints is not None and rig.drift_restore is not None
    hook = rig.loop.after_run.pop()
    script_drift(fake_model)
    await rig.send("write the three files")
    decision = [r for r in rig.session().records if r.get("drift_restore")][-1]["drift_restore"]
    rows.remove(tmp_path / "checkpoints", decision["checkpoint"])  # gone meanwhile
    rig.loop.after_run.append(hook)
    fake_model.enqueue(text("Trying another way."))
    assert rig.drift_restore.recover() == ["s"]
    [failed] = rig.log_events("drift_restore_failed")
    assert "no checkpoint" in failed["error"] and branch_events(rig) == []
    assert (rig.workspace.root / "scratch.txt").exists()  # nothing was undone
    await rig.send("anything new?")  # runs the queued continuation first, then this message
    told = [b for b in rig.main_calls() if "but the restore failed" in texts(b)]
    assert told and "Nothing was undone" in texts(told[0])
    assert [e["restored"] for e in rig.events if e["type"] == "drift" and e["action"] == "restore"] == [False]


async def test_a_restore_left_pending_is_finished_only_for_the_sessions_asked_and_read_again(tmp_path: Path,
                                                                                             fake_model) -> None:
    """A fleet's worker recovers the sessions of a partition it takes: markers another process wrote
    after this one started are read then, and markers of other sessions are left alone."""
    rig = build(tmp_path, fake_model, settings(), checkpoints=True)
    assert rig.checkpoints is not None and rig.drift_restore is not None
    other = DriftRestore(rig.checkpoints, rig.loop.sessions, rig.bus, rig.loop.events, tmp_path / "checkpoints/drift",
                         fsync=False)  # started before the decision was marked
    rig.loop.after_run.clear()  # the deciding process "dies" before the after-run hook
    script_drift(fake_model)
    [report] = await rig.send("write the three files")
    assert "going back" in report.text
    assert other.recover(lambda key: key != "s") == []  # not its sessions: the marker stays
    assert list((tmp_path / "checkpoints/drift").glob("*.json"))
    assert other.recover(lambda key: key == "s") == ["s"]  # read from disk, finished once
    assert other.recover(lambda key: key == "s") == [] and not list((tmp_path / "checkpoints/drift").glob("*.json"))
    assert len(branch_events(rig)) == 1
