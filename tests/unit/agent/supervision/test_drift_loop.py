"""Drift control and the completeness check in the real agent loop, the fake Messages API scripting
the model (main turns in order; reflection and check calls routed by their prompts)."""

from __future__ import annotations

from pathlib import Path

from clawgate.config.schema import Settings
from clawgate.agent.supervision.drift_control import RestoreDecision
from tests.drift_support import CHECK, REFLECT, build, check, reflection
from tests.fakes.anthropic_api import text, tool_use

MISSING = tool_use("read_file", {"path": "missing.txt"})


def settings(**drift: object) -> Settings:
    s = Settings()
    s.drift = s.drift.model_copy(update={"reflect_every": 0, "relevance_threshold": 0.0, **drift})
    return s


def plan(goal: str, *steps: str):
    return tool_use("task", {"action": "plan", "goal": goal, "steps": list(steps)})


def last_user_text(body: dict) -> str:
    content = body["messages"][-1]["content"]
    return "".join(b.get("text", "") for b in content if b.get("type") == "text")


class FakeRestorer:
    """Rung (b) as drift control sees it: a decision (or none); tests/unit/agent/supervision/test_drift_restore.py has the real one."""

    def __init__(self, result: bool) -> None:
        self.result = result
        self.calls: list[str] = []

    def decide(self, session, msg, task, *, signal, turn, avoid) -> RestoreDecision | None:
        self.calls.append(session.key)
        return RestoreDecision("cp_1", f"going back ({signal.name})") if self.result else None


async def test_a_repeated_call_gets_a_reflection_then_a_reset_then_a_stop_with_a_report(tmp_path: Path, fake_model):
    rig = build(tmp_path, fake_model, settings())
    fake_model.enqueue(plan("Summarise missing.txt into summary.txt", "read missing.txt", "write summary.txt"),
                       *[MISSING] * 20)
    fake_model.enqueue_for(REFLECT, reflection(False, "the file does not exist; re-reading it will not help"))
    [reply] = await rig.send("summarise missing.txt")

    steps = [(e["turn"], e["step"]) for e in rig.log_events("drift_correction")]
    assert steps == [(4, "reflect"), (7, "reset")]  # turn 1 planned; 3 identical calls per rung
    assert [e["signal"] for e in rig.log_events("drift_correction")] == ["loop", "loop"]
    assert len(rig.main_calls()) == 10 and len(rig.side_calls(REFLECT)) == 1  # not 40 model calls
    assert rig.side_calls(REFLECT)[0]["messages"][0]["content"][0]["text"].count("missing.txt") >= 2
    # the reflection's answer is in front of the working model on the next turn
    assert "[drift] Reflection (turn 4" in last_user_text(rig.main_calls()[4])
    assert "OFF TRACK" in last_user_text(rig.main_calls()[4])
    # the reset: a clean view starting from the brief; the old turns are still in the log on disk
    after_reset = rig.main_calls()[7]["messages"]
    assert after_reset[0]["role"] == "user" and "Context reset" in after_reset[0]["content"][-1]["text"]
    assert len(after_reset) == 1  # only the brief: the failed attempts are out of the view
    assert "read_file" in Path(rig.session().path).read_text()
    task = rig.tasks.all()[0]
    assert "read_file" in task.context["failure_patterns"] and task.context["goal"].startswith("Summarise")
    # persisting after the last rung: the run stops and says why, what is done and what remains
    assert "I stopped working on this because drift persisted" in reply.text
    assert "Remaining: 1. read missing.txt; 2. write summary.txt" in reply.text
    assert task.status == "failed" and "drift" in task.result
    assert [e["status"] for e in rig.events if e["type"] == "task" and e.get("action") == "drift_stop"] == ["failed"]
    drift_events = [e for e in rig.events if e["type"] == "drift"]
    assert [e["action"] for e in drift_events if e["action"] != "signal"] == \
        ["correction", "reflection", "correction", "reset", "stop"]


async def test_a_run_past_its_hard_limit_stops_with_a_report(tmp_path: Path, fake_model):
    rig = build(tmp_path, fake_model, settings(max_tool_calls=4, scope_ratio=1.0))
    fake_model.enqueue(*[tool_use("list_dir", {"path": f"dir{i}"}) for i in range(10)], text("never reached"))
    [reply] = await rig.send("look around")
    assert len(rig.main_calls()) == 4
    assert reply.text.startswith("I stopped working on this because it reached a hard limit: tool_calls reached 4")
    assert "drift.max_tool_calls" in reply.text and "Spent: 4 tool calls in 4 turns" in reply.text
    [stop] = rig.log_events("drift_stop")
    assert stop["signal"] == "limit_tool_calls"


async def test_scope_creep_is_signalled_once_before_the_limit(tmp_path: Path, fake_model):
    rig = build(tmp_path, fake_model, settings(max_tool_calls=8, scope_ratio=0.5))
    fake_model.enqueue(*[tool_use("list_dir", {"path": f"dir{i}"}) for i in range(10)])
    fake_model.enqueue_for(REFLECT, reflection(True, "scope is growing", "stop listing and answer"))
    await rig.send("look around")
    scope = [e for e in rig.log_events("drift_signal") if e["signal"] == "scope_tool_calls"]
    assert [e["turn"] for e in scope] == [4]
    assert len(rig.main_calls()) == 8 and len(rig.side_calls(REFLECT)) == 1


async def test_reflection_every_n_turns_comes_at_those_turns(tmp_path: Path, fake_model):
    s = settings(reflect_every=3)
    s.reflection.enabled = False
    rig = build(tmp_path, fake_model, s)
    fake_model.enqueue(*[tool_use("read_file", {"path": f"part{i}.txt"}) for i in range(7)], text("read them all"))
    fake_model.enqueue_for(REFLECT, reflection(True, "steady", "read the next part"),
                           reflection(True, "steady", "read the last part"))
    [reply] = await rig.send("read the seven parts")
    reflections = rig.log_events("drift_reflection")
    assert [(r["turn"], r["periodic"], r["on_track"]) for r in reflections] == [(3, True, True), (6, True, True)]
    assert not rig.log_events("drift_correction")  # periodic checks are not rungs of the ladder
    mains = rig.main_calls()
    assert "[drift] Reflection (turn 3" in last_user_text(mains[3])
    assert "[drift] Reflection (turn 6" in last_user_text(mains[6])
    assert "[drift]" not in last_user_text(mains[2]) and "[drift]" not in last_user_text(mains[4])
    assert reply.text == "read them all"


async def test_restore_is_tried_between_reflection_and_reset_and_ends_the_run(tmp_path: Path, fake_model):
    restorer = FakeRestorer(True)
    rig = build(tmp_path, fake_model, settings(), restorer=restorer)
    fake_model.enqueue(*[MISSING] * 12)
    fake_model.enqueue_for(REFLECT, reflection(False))
    [reply] = await rig.send("read missing.txt", session="r")
    steps = [(e["step"], e.get("checkpoint")) for e in rig.log_events("drift_correction", "r")]
    assert steps == [("reflect", None), ("restore", "cp_1")]
    assert restorer.calls == ["r"] and reply.text == "going back (loop)" and len(rig.main_calls()) == 6


async def test_without_a_checkpoint_the_reset_follows_in_the_same_turn(tmp_path: Path, fake_model):
    rig = build(tmp_path, fake_model, settings(), restorer=FakeRestorer(False))
    fake_model.enqueue(*[MISSING] * 12)
    fake_model.enqueue_for(REFLECT, reflection(False))
    await rig.send("read missing.txt")
    steps = [(e["turn"], e["step"], e.get("restored")) for e in rig.log_events("drift_correction")]
    assert steps == [(3, "reflect", None), (6, "restore", False), (6, "reset", None)]


async def test_in_a_shared_conversation_the_restore_rung_is_passed_over(tmp_path: Path, fake_model):
    """A restore rewinds the log: where several people talk, that would cut the others' messages and answers
    (rewinding a shared conversation is the owner's /undo). The ladder goes on to the reset instead."""
    restorer = FakeRestorer(True)
    rig = build(tmp_path, fake_model, settings(), restorer=restorer)
    fake_model.enqueue(text("hello guest"))
    await rig.send("hi from a guest", session="r", owner=False)
    fake_model.enqueue(*[MISSING] * 12)
    fake_model.enqueue_for(REFLECT, reflection(False))
    await rig.send("read missing.txt", session="r")
    steps = [(e["step"], e.get("restored")) for e in rig.log_events("drift_correction", "r")]
    assert steps == [("reflect", None), ("restore", False), ("reset", None)]
    assert restorer.calls == []  # never asked for a checkpoint to go back to


async def test_a_task_finished_with_a_missing_step_gets_a_supplement_and_only_then_completes(tmp_path: Path, fake_model):
    rig = build(tmp_path, fake_model, settings())
    fake_model.enqueue(
        plan("Write report.txt with the total", "write report.txt"),
        tool_use("task", {"action": "start", "step": 1}),
        tool_use("write_file", {"path": "report.txt", "content": "total: 42\n"}),
        tool_use("task", {"action": "complete", "step": 1, "verification": "written"}),
        tool_use("task", {"action": "finish", "status": "completed", "result": "wrote report.txt"}),
        text("Done."),
        tool_use("read_file", {"path": "report.txt"}),
        tool_use("task", {"action": "complete", "step": 2, "verification": "read back: total: 42"}),
        tool_use("task", {"action": "finish", "status": "completed", "result": "wrote and read back report.txt"}),
        text("Done, and verified."),
    )
    fake_model.enqueue_for(CHECK, check(False, missing=["report.txt was never read back"], supplements=[
        {"action": "read report.txt back and confirm the total", "reason": "unverified", "tool": "read_file"}]),
        check(True, verification="read_file showed total: 42"))
    [reply] = await rig.send("write the report")

    names = [e["type"] for e in rig.events if e["type"].startswith("reflection")]
    assert names == ["reflection", "reflection_plan", "reflection_exec", "reflection"]
    first, plan_, exec_, second = [e for e in rig.events if e["type"].startswith("reflection")]
    assert first["is_complete"] is False and first["missing"] == ["report.txt was never read back"]
    assert plan_["supplements"][0]["tool"] == "read_file"
    assert exec_["attempted"] == 3 and exec_["succeeded"] == 3
    assert second["is_complete"] is True
    # the supplement became step 2 of the plan; the model was told so before its next turn
    told = last_user_text(rig.main_calls()[6])
    assert "Not done yet: report.txt was never read back" in told and "as steps 2-2" in told
    task = rig.tasks.all()[0]
    assert task.status == "completed" and [s.status for s in task.steps] == ["done", "done"]
    assert reply.text.startswith("Done, and verified.")
    assert "Completeness check: complete." in reply.text and "Verified: written; read back: total: 42" in reply.text
    assert "Remains: nothing" in reply.text
    assert len(rig.side_calls(CHECK)) == 2


async def test_a_complete_multi_step_request_passes_the_check_in_one_call(tmp_path: Path, fake_model):
    rig = build(tmp_path, fake_model, settings())
    fake_model.enqueue(tool_use("write_file", {"path": "a.txt", "content": "a"}),
                       tool_use("write_file", {"path": "b.txt", "content": "b"}),
                       tool_use("read_file", {"path": "a.txt"}), text("Wrote a.txt and b.txt."))
    fake_model.enqueue_for(CHECK, check(True, analysis="both files written", verification="a.txt read back"))
    [reply] = await rig.send("write a.txt and b.txt")
    assert len(rig.side_calls(CHECK)) == 1
    body = rig.side_calls(CHECK)[0]["messages"][0]["content"][0]["text"]
    assert "write a.txt and b.txt" in body and "write_file(" in body and "- read_file:" in body  # goal, steps, tools
    assert [e["type"] for e in rig.events if e["type"].startswith("reflection")] == ["reflection"]
    assert reply.text.startswith("Wrote a.txt and b.txt.\n\n---\nCompleteness check: complete.")
    assert "Verified: a.txt read back" in reply.text


async def test_malformed_check_output_is_retried_once_then_fails_safe(tmp_path: Path, fake_model):
    rig = build(tmp_path, fake_model, settings())
    fake_model.enqueue(
        plan("Create out.txt", "write out.txt"),
        tool_use("write_file", {"path": "out.txt", "content": "x"}),
        tool_use("task", {"action": "complete", "step": 1, "verification": "written"}),
        tool_use("task", {"action": "finish", "status": "completed", "result": "done"}),
        text("All done."),
    )
    fake_model.enqueue_for(CHECK, text("Looks complete to me!"), text('{"is_complete": "maybe"'))
    [reply] = await rig.send("create out.txt")
    checks = rig.side_calls(CHECK)
    assert len(checks) == 2
    assert "could not be used (no JSON object" in last_user_text(checks[1])  # the retry names the problem
    task = rig.tasks.all()[0]
    assert task.status == "in_progress" and "completeness check failed" in task.notes[-1]
    assert "NOT complete" in reply.text and "not confirmed done" in reply.text
    [event] = [e for e in rig.events if e["type"] == "reflection"]
    assert event["ok"] is False and event["calls"] == 2


async def test_with_reflection_disabled_no_check_call_is_made(tmp_path: Path, fake_model):
    s = settings()
    s.reflection.enabled = False
    rig = build(tmp_path, fake_model, s)
    fake_model.enqueue(*[tool_use("write_file", {"path": f"f{i}.txt", "content": "x"}) for i in range(4)], text("Wrote 4."))
    [reply] = await rig.send("write four files")
    assert reply.text == "Wrote 4."
    assert rig.side_calls(CHECK) == [] and len(fake_model.requests) == 5


async def test_a_short_request_is_not_checked(tmp_path: Path, fake_model):
    rig = build(tmp_path, fake_model, settings())
    fake_model.enqueue(tool_use("list_dir", {"path": "."}), text("Nothing here."))
    [reply] = await rig.send("what is there?")
    assert reply.text == "Nothing here." and rig.side_calls(CHECK) == []


async def test_a_complete_task_passes_the_check_in_one_call(tmp_path: Path, fake_model):
    rig = build(tmp_path, fake_model, settings())
    fake_model.enqueue(
        plan("Write notes.txt and check it", "write notes.txt"),
        tool_use("write_file", {"path": "notes.txt", "content": "n"}),
        tool_use("read_file", {"path": "notes.txt"}),
        tool_use("task", {"action": "complete", "step": 1, "verification": "read back: n"}),
        tool_use("task", {"action": "finish", "status": "completed", "result": "written and read back"}),
        text("Done: notes.txt written and read back."),
    )
    fake_model.enqueue_for(CHECK, check(True, verification="read_file returned n"))
    [reply] = await rig.send("write notes.txt")
    assert len(rig.side_calls(CHECK)) == 1
    body = rig.side_calls(CHECK)[0]["messages"][0]["content"][0]["text"]
    assert "Goal: Write notes.txt and check it" in body and "[done] write notes.txt (verified: read back: n)" in body
    task = rig.tasks.all()[0]
    assert task.status == "completed" and len(task.steps) == 1
    assert "Completeness check: complete." in reply.text and "Verified: read back: n" in reply.text
    assert [e["type"] for e in rig.events if e["type"].startswith("reflection")] == ["reflection"]


async def test_a_run_past_its_wall_time_stops_with_a_report(tmp_path: Path, fake_model):
    import time

    rig = build(tmp_path, fake_model, settings(max_wall_seconds=600))
    rig.loop.after_turn[0].clock = lambda: time.time() + 601  # the run began 10 minutes ago
    fake_model.enqueue(tool_use("list_dir", {"path": "."}), text("never reached"))
    [reply] = await rig.send("look around")
    assert len(fake_model.requests) == 1
    assert "hard limit: wall_seconds reached" in reply.text and "drift.max_wall_seconds" in reply.text


async def test_a_request_that_changed_something_is_checked_however_few_its_calls(tmp_path: Path, fake_model):
    """One write is a claim of work done (checked); one read is a lookup (not checked)."""
    rig = build(tmp_path, fake_model, settings())
    fake_model.enqueue(tool_use("write_file", {"path": "todo.txt", "content": "milk"}), text("Done."),
                       tool_use("read_file", {"path": "todo.txt"}), text("Done: todo.txt holds milk."))
    fake_model.enqueue_for(CHECK, check(False, missing=["todo.txt never read back"], supplements=[
        {"action": "read todo.txt back", "tool": "read_file"}]), check(True, verification="read back: milk"))
    [reply] = await rig.send("write milk into todo.txt")
    assert len(rig.side_calls(CHECK)) == 2
    assert reply.text.startswith("Done: todo.txt holds milk.") and "Completeness check: complete." in reply.text
    fake_model.enqueue(tool_use("read_file", {"path": "todo.txt"}), text("It says milk."))
    [lookup] = await rig.send("what is in todo.txt?")
    assert lookup.text == "It says milk." and len(rig.side_calls(CHECK)) == 2
