"""Tasks in a conversation several people share belong to the person who planned them: a guest's run is
never reminded of the owner's plan, and a restart resumes the owner's task as the owner's run even when a
guest spoke last (agent/recovery/restart.py)."""

from __future__ import annotations

from pathlib import Path

from clawgate.agent.bus import SqliteBus
from clawgate.agent.recovery.restart import TaskTracker, resume_tasks
from clawgate.agent.session import SessionManager
from clawgate.agent.tasks.store import Step, Task, TaskStore
from clawgate.agent.tools import ToolContext, ToolOutcome
from clawgate.workspace.guard import WorkspaceGuard
from clawgate.workspace.users import OWNER

GOAL = "rotate the owner's private keys 0c4d"


def _store(tmp_path: Path) -> tuple[TaskStore, Task]:
    store = TaskStore(tmp_path / "tasks", fsync=False)
    task = Task(goal=GOAL, session_key="slack:C1", status="in_progress", user=OWNER,
                steps=[Step(text="list the keys", status="in_progress")])
    store.save(task)
    return store, task


def test_a_guest_s_tool_result_never_carries_the_owner_s_plan_reminder(tmp_path: Path) -> None:
    store, _ = _store(tmp_path)
    tracker = TaskTracker(store, remind_after=0)
    for user, owner in (("slack:U2", False), (OWNER, True)):
        ctx = ToolContext(session_key="slack:C1", channel="slack", chat_id="C1", sender_id="U", run_id="r",
                          workspace=WorkspaceGuard(tmp_path / "ws"), owner=owner, user=user)
        outcome = ToolOutcome(content="file listing")
        tracker.remind({"name": "list_dir", "input": {}}, outcome, ctx)
        assert ("0c4d" in outcome.content) is owner  # the owner is reminded of their own plan; the guest never


async def test_a_restart_resumes_the_owner_s_task_as_the_owner_s_run(tmp_path: Path) -> None:
    store, task = _store(tmp_path)
    sessions = SessionManager(tmp_path / "sessions", fsync=False)
    session = sessions.get("slack:C1")
    session.append("user", text="rotate my keys", inbound_id="r1", channel="slack", chat_id="C1", owner=True, user=OWNER)
    session.append("user", text="hi", inbound_id="r2", channel="slack", chat_id="C1", owner=False, user="slack:U2")
    bus = SqliteBus.open(tmp_path / "bus.sqlite", fsync=False)
    assert resume_tasks(store, sessions, bus, max_resumes=3) == [task.id]
    resumed = await bus.next_inbound()
    assert resumed.metadata["owner"] is True and "user" not in resumed.metadata  # the owner's, not the guest's
    guest_task = Task(goal="a guest's picnic", session_key="slack:C2", status="in_progress", user="slack:U2",
                      steps=[Step(text="buy bread", status="in_progress")])
    store.save(guest_task)
    sessions.get("slack:C2").append("user", text="plan it", inbound_id="g1", channel="slack", chat_id="C2",
                                    owner=True, user=OWNER)  # the owner spoke last there
    bus.settle(resumed.id)
    assert guest_task.id in resume_tasks(store, sessions, bus, max_resumes=3)
    msgs = [await bus.next_inbound() for _ in range(2)]
    mine = next(m for m in msgs if m.session_key == "slack:C2")
    assert mine.metadata["owner"] is False and mine.metadata["user"] == "slack:U2"


def test_a_guest_s_turns_do_not_count_against_the_owner_s_task(tmp_path: Path) -> None:
    """The restatement starts after the task's own turns: another person's chatting must not bring it on."""
    store, task = _store(tmp_path)
    sessions = SessionManager(tmp_path / "sessions", fsync=False)
    session = sessions.get("slack:C1")
    tracker = TaskTracker(store, remind_after=5, sessions=sessions)
    session.append("user", text="rotate", inbound_id="r1", channel="slack", chat_id="C1", owner=True, user=OWNER)
    tracker.on_event({"type": "turn_end", "session": "slack:C1", "run_id": "r1"})
    session.append("user", text="hi", inbound_id="r2", channel="slack", chat_id="C1", owner=False, user="slack:U2")
    for _ in range(3):
        tracker.on_event({"type": "turn_end", "session": "slack:C1", "run_id": "r2"})
    assert (store.get(task.id) or task).turns == 1
