"""Identity restatement in the dynamic block: absent at turn 20, present from turn 21."""

from __future__ import annotations

from agent.restatement import Restatement
from agent.session import Session
from agent.tasks import Step, Task, TaskStore
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
    restate = Restatement("Claw", store.current, after_turns=20)
    session = Session("main", tmp_path / "main.jsonl", fsync=False)
    assert restate(session) is None
    task.turns = 21
    assert restate(session) == LINE
    task.steps[1].status = "done"
    task.steps[2].status = "done"
    assert restate(session).endswith("Step 3/3. Next: verify the result and report what was done and how it was checked.")


def test_runtime_block_and_follow_up_notes_carry_the_line_from_turn_21(tmp_path):
    store, task = _task(tmp_path, 20)
    ctx = builder(workspace(tmp_path))
    restate = Restatement("Claw", store.current, after_turns=20)
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


def test_without_a_task_the_session_goal_is_restated_after_21_model_turns(tmp_path):
    restate = Restatement("Claw", lambda key: None, after_turns=20)
    session = Session("main", tmp_path / "main.jsonl", fsync=False)
    user(session, "Plan my trip to Lisbon in May")
    for turn in range(20):
        tool_round(session, "web_fetch", {"url": f"https://example.com/{turn}"}, "page")
    assert restate(session) is None  # 20 model turns
    tool_round(session, "web_fetch", {"url": "https://example.com/x"}, "page")
    line = restate(session)
    assert line is not None and line.startswith("I am Claw. Current task: Plan my trip to Lisbon in May. Step 0/0.")


def test_subagent_requests_get_no_follow_up_notes(tmp_path):
    ctx = builder(workspace(tmp_path))
    ctx.followups.append(lambda session: "I am Claw. Current task: x. Step 1/1. Next: y.")
    session = Session("sub", tmp_path / "sub.jsonl", fsync=False)
    user(session, "find it", ctx)
    tool_round(session, "list_dir", {"path": "."}, "a")
    assert "I am Claw" not in str(ctx.build(session, "subagent").messages)
    assert "I am Claw" in str(ctx.build(session, "normal").messages)
