"""The open-steps rule on its own (pure functions over a task and a run): when it holds an answer back,
when it only reports, and what the report says. The daemon-level behaviour is in test_done_verified_e2e.py."""

from __future__ import annotations

from clawgate.agent.supervision import open_steps
from clawgate.agent.supervision.drift import Action
from clawgate.agent.supervision.run_view import Span
from clawgate.agent.tasks.store import Step, Task


def _task() -> Task:
    return Task(goal="Write a.txt and b.txt", session_key="s", status="in_progress",
                steps=[Step("write a.txt", "done", "read back a.txt"), Step("write b.txt"), Step("tidy up", "skipped")])


def _run(*names: str) -> Span:
    return Span(actions=[Action(turn=i, name=n, key=f"{n}()") for i, n in enumerate(names, 1)])


def test_open_steps_hold_an_answer_only_after_tool_calls_and_never_a_heartbeat_ok() -> None:
    task = _task()
    assert [i for i, _ in open_steps.gated(task, _run("write_file"), "All done!", "normal")] == [2]
    assert open_steps.gated(task, _run(), "All done!", "normal") == []  # a plain reply while a task is open
    assert open_steps.gated(None, _run("write_file"), "All done!", "normal") == []
    assert open_steps.gated(task, _run("task"), " HEARTBEAT_OK ", "heartbeat") == []
    assert open_steps.gated(task, _run("task"), "Did step 2.", "heartbeat") != []
    task.steps[1].status = "done"
    assert open_steps.gated(task, _run("task"), "All done!", "normal") == []


def test_the_model_is_sent_back_only_when_it_worked_on_the_plan_and_rounds_are_left() -> None:
    assert open_steps.may_continue(_run("task", "write_file"), "normal", 1, 2)
    assert not open_steps.may_continue(_run("task"), "normal", 2, 2)  # the last round: report instead
    assert not open_steps.may_continue(_run("write_file"), "normal", 1, 2)  # the plan was not touched
    assert not open_steps.may_continue(_run("task"), "heartbeat", 1, 2)  # one step per heartbeat


def test_the_report_leads_with_what_is_done_and_what_remains() -> None:
    task = _task()
    report = open_steps.progress_report(task, open_steps.open_steps(task), "All done!")
    assert report.splitlines()[:3] == [
        'Progress report — not done yet: 2 of 3 steps of the task "Write a.txt and b.txt" are done (1 of them skipped).',
        "Done and verified: 1. write a.txt (verified: read back a.txt)",
        "Remains: 2. write b.txt"]
    assert report.endswith("the plan above is what is verified:\nAll done!")
    note = open_steps.continue_note(task, open_steps.open_steps(task))
    assert "has 1 of 3 steps open, so your answer was not sent" in note and note.endswith("Open steps:\n2. write b.txt")
