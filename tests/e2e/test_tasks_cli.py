"""`clawgate tasks` and the tasks.* methods, with and without a running daemon."""

from __future__ import annotations

import asyncio
import json

import pytest

from clawgate.agent.tasks.store import Step, Task, TaskStore
from clawgate.gateway.client import GatewayError


def _seed(home) -> Task:
    store = TaskStore(home / "state/tasks")
    task = Task(goal="tidy the notes", session_key="main", status="in_progress",
                steps=[Step("list", "done", "listed 3 files"), Step("merge", "in_progress")])
    store.save(task)
    return task


async def test_tasks_methods_and_cli_with_daemon(daemon_factory, tmp_path):
    home = tmp_path / "h"
    from tests.harness import DaemonProcess

    probe = DaemonProcess(home, anthropic_url=None)
    probe.init()
    task = _seed(home)
    daemon = daemon_factory(home=home, init=False)
    async with daemon.client() as client:
        listed = await client.request("tasks.list")
        assert [t["id"] for t in listed["tasks"]] == [task.id]
        assert listed["tasks"][0]["line"].endswith("step 2/2: merge")
        got = await client.request("tasks.get", {"id": task.id})
        assert got["task"]["steps"][0]["verification"] == "listed 3 files"
        with pytest.raises(GatewayError) as info:
            await client.request("tasks.get", {"id": "t_nope"})
        assert info.value.code == "not_found"
    out = await asyncio.to_thread(daemon.cli, "tasks", "list", "--json")
    assert json.loads(out.stdout)[0]["id"] == task.id
    out = await asyncio.to_thread(daemon.cli, "tasks", "cancel", task.id)
    assert out.returncode == 0 and f"cancelled {task.id}" in out.stdout
    again = await asyncio.to_thread(daemon.cli, "tasks", "cancel", task.id)
    assert again.returncode == 1 and "already cancelled" in again.stderr
    async with daemon.client() as client:
        assert (await client.request("tasks.list"))["tasks"] == []
        assert (await client.request("tasks.list", {"all": True}))["tasks"][0]["status"] == "cancelled"


async def test_tasks_cli_without_daemon(daemon_factory, tmp_path):
    daemon = daemon_factory()
    daemon.kill()
    task = _seed(daemon.home)
    out = await asyncio.to_thread(daemon.cli, "tasks", "list")
    assert task.id in out.stdout and "step 2/2" in out.stdout
    out = await asyncio.to_thread(daemon.cli, "tasks", "show", task.id)
    assert json.loads(out.stdout)["goal"] == "tidy the notes"
    out = await asyncio.to_thread(daemon.cli, "tasks", "cancel", task.id)
    assert out.returncode == 0
    assert TaskStore(daemon.home / "state/tasks").get(task.id).status == "cancelled"
    out = await asyncio.to_thread(daemon.cli, "tasks", "show", "t_missing")
    assert out.returncode == 1 and out.stderr.count("\n") == 1 and "no task" in out.stderr


async def test_task_tool_refuses_unverified_done(tmp_path):
    from clawgate.agent.tools import ToolContext
    from clawgate.agent.tasks.task_tool import TaskTool
    from clawgate.agent.tools.base import ToolError
    from clawgate.workspace.guard import WorkspaceGuard

    tool = TaskTool(TaskStore(tmp_path / "tasks"))
    ctx = ToolContext(session_key="s", channel="c", chat_id="c", sender_id="u", run_id="r", workspace=WorkspaceGuard(tmp_path / "w"))
    run = lambda **a: tool.run(tool.Arguments(**a), ctx)
    await run(action="plan", goal="g", steps=["a", "b"])
    assert "already planned" in await run(action="plan", goal="g", steps=["a", "b"])
    with pytest.raises(ToolError, match="already has an active task"):
        await run(action="plan", goal="other", steps=["x"])
    with pytest.raises(ToolError, match="verification"):
        await run(action="complete", step=1)
    await run(action="complete", step=1, verification="checked a")
    with pytest.raises(ToolError, match=r"steps \[2\] are not done"):
        await run(action="finish", status="completed", result="done")
    out = await run(action="finish", status="failed", result="b could not be done: no access")
    assert "[failed]" in out


async def test_plan_changes_are_announced_as_task_events(daemon, fake_model):
    from tests.fakes.anthropic_api import text, tool_use

    fake_model.enqueue(tool_use("task", {"action": "plan", "goal": "g", "steps": ["a", "b"]}),
                       tool_use("task", {"action": "complete", "step": 1, "verification": "saw a"}),
                       text("planned and did a"))
    events = []
    async with daemon.client(subscribe=["t"]) as client:
        await client.request("chat.send", {"session": "t", "text": "plan it"})
        async for frame in client.events():
            if frame["event"] == "task":
                events.append(frame["payload"])
            if frame["event"] == "chat" and frame["payload"]["state"] == "final":
                break
    assert [(e["action"], e["status"]) for e in events] == [("plan", "in_progress"), ("complete", "in_progress")]
    assert events[-1]["line"].endswith("step 2/2: b")
