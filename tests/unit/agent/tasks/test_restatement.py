"""Identity restatement in the dynamic block: absent at turn 20, present from turn 21."""

from __future__ import annotations

from clawgate.agent.tasks.restatement import Restatement
from clawgate.agent.session import Session
from clawgate.agent.tasks.store import Step, Task, TaskStore
from tests.context_helpers import answer, builder, tool_round, user, workspace

LINE = "I am Claw. Current task: ship the parser. Step 2/3. Next: write the tests."


def _task(tmp_path, turns: int) -> tuple[TaskStore, Task]:
    store = TaskStore(tmp_path / "tasks", fsync=False)
    task = Task(goal="ship the parser.", session_key="main", status="in_progress", turns=turns,
                steps=[Step("write the parser", "done"), Step("write the tests", "in_progress"), Step("release")])
    store.save(task)
    return store, task


def _texts(message: dict) -> list[str]:
    return [b["text"] for b in message["content"] if b.get("type") == "text"]


def test_line_from_task_state_only_after_the_threshold(tmp_path):
    store, task = _task(tmp_path, 20)
    restate = Restatement("Claw", store.current_for, after_turns=20)
    session = Session("main", tmp_path / "main.jsonl", fsync=False)
    assert restate(session, "") is None
    task.turns = 21
    assert restate(session, "") == LINE
    task.steps[1].status = "done"
    task.steps[2].status = "done"
    assert restate(session, "").endswith("Step 3/3. Next: verify the result and report what was done and how it was checked.")


def test_runtime_block_and_follow_up_notes_carry_the_line_from_turn_21(tmp_path):
    store, task = _task(tmp_path, 20)
    ctx = builder(workspace(tmp_path))
    restate = Restatement("Claw", store.current_for, after_turns=20)
    ctx.contributors.append(restate)
    ctx.followups.append(restate)
    session = Session("main", tmp_path / "main.jsonl", fsync=False)

    user(session, "go on", ctx)
    at_20 = ctx.build(session)
    assert not any(LINE in t for t in _texts(at_20.messages[-1]))
    tool_round(session, "read_file", {"path": "a"}, "aaa")
    assert LINE not in str(ctx.build(session).messages)  # still turn 20: no note

    task.turns = 21  # the TaskTracker counts a model turn
    tool_round(session, "read_file", {"path": "b"}, "bbb")
    first = ctx.build(session)
    assert _texts(first.messages[-1]) == ["[runtime] " + LINE]  # after the tool results
    again = ctx.build(session)  # a retry of the same request: no second note
    assert again.messages == first.messages
    task.turns = 22
    tool_round(session, "read_file", {"path": "c"}, "ccc")
    later = ctx.build(session)
    assert later.messages[: len(first.messages)] == first.messages  # still a byte-identical extension
    assert _texts(later.messages[-1]) == ["[runtime] " + LINE]
    answer(session, "done with that")
    user(session, "next", ctx)
    head = ctx.build(session).messages[-1]["content"][0]["text"]
    assert head.startswith("[runtime] time: ") and LINE in head


def test_without_an_active_task_there_is_no_line(tmp_path):
    """A chat of one-line questions is no task, and a finished task is no plan still to make."""
    store, task = _task(tmp_path, 30)
    restate = Restatement("Claw", store.current_for, after_turns=20)
    session = Session("main", tmp_path / "main.jsonl", fsync=False)
    user(session, "What is the capital of Peru?")
    for turn in range(25):
        answer(session, f"answer {turn}")
        user(session, f"and question {turn}?")
    assert restate(session, "") is not None
    task.status = "completed"
    store.save(task)
    assert restate(session, "") is None
    assert Restatement("Claw", lambda session, person: None, after_turns=20)(session, "") is None


def test_the_line_follows_whatever_else_was_added_since_the_model_turn(tmp_path):
    """A drift note or a check's turn after the tool results: the request still carries the line, once."""
    store, task = _task(tmp_path, 25)
    ctx = builder(workspace(tmp_path))
    restate = Restatement("Claw", store.current_for, after_turns=20)
    ctx.followups.append(restate)
    session = Session("main", tmp_path / "main.jsonl", fsync=False)
    user(session, "go on", ctx)
    tool_round(session, "read_file", {"path": "a"}, "aaa")
    session.append("note", text="[drift] Reflection (turn 25, periodic): on track.")
    built = ctx.build(session)
    assert _texts(built.messages[-1])[-2:] == ["[drift] Reflection (turn 25, periodic): on track.", "[runtime] " + LINE]
    assert ctx.build(session).messages == built.messages  # a retry: no second note
    answer(session, "All done.")
    session.append("user", text="[clawgate check] Not done yet: 1 of 3 steps open.", reflection=True)
    checked = ctx.build(session)
    assert _texts(checked.messages[-1]) == ["[clawgate check] Not done yet: 1 of 3 steps open.", "[runtime] " + LINE]


def test_subagent_requests_get_no_follow_up_notes(tmp_path):
    ctx = builder(workspace(tmp_path))
    ctx.followups.append(lambda session, person: "I am Claw. Current task: x. Step 1/1. Next: y.")
    session = Session("sub", tmp_path / "sub.jsonl", fsync=False)
    user(session, "find it", ctx)
    tool_round(session, "list_dir", {"path": "."}, "a")
    assert "I am Claw" not in str(ctx.build(session, "subagent").messages)
    assert "I am Claw" in str(ctx.build(session, "normal").messages)
