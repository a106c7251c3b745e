"""How each tool says a call cut by a crash is resolved, and the file tools' checks of their own
effect (driven directly; tests/e2e/test_tool_recovery_e2e.py does it through a real SIGKILL)."""

from __future__ import annotations

from pathlib import Path

import pytest

from clawgate.agent.core.events import EventHub
from clawgate.agent.tools import ToolContext, ToolRegistry
from clawgate.agent.triggers.cron_tool import CronTool
from clawgate.agent.jobs.spawn_tool import Spawn
from clawgate.agent.tasks.task_tool import TaskTool
from clawgate.agent.toolset import default_tools
from clawgate.config.schema import Settings
from clawgate.workspace.guard import WorkspaceGuard


@pytest.fixture
def tools(tmp_path: Path) -> tuple[ToolRegistry, ToolContext, Path]:
    ws = WorkspaceGuard(tmp_path / "ws")
    registry = ToolRegistry(default_tools(Settings()), events=EventHub())
    ctx = ToolContext(session_key="s", channel="gateway", chat_id="s", sender_id="u", run_id="r", workspace=ws)
    return registry, ctx, ws.root


def test_every_tool_declares_how_a_cut_call_is_resolved(tools):
    registry, _, _ = tools
    how = {name: registry.recovery(name) for name in registry.names}
    assert {how[n] for n in ("read_file", "list_dir", "memory_search", "memory_get", "load_skill")} == {"rerun"}
    assert how["write_file"] == how["edit_file"] == "check"
    assert {how[n] for n in ("exec", "message", "web_fetch", "memory_append", "memory_replace")} == {"unknown"}
    assert registry.recovery("no_such_tool") == "unknown"
    assert (Spawn.recovery, TaskTool.side_effects, CronTool.side_effects) == ("rerun", True, True)  # resumes; unknown


async def _check(registry: ToolRegistry, ctx: ToolContext, name: str, **args: str):
    tool = registry.get(name)
    assert tool is not None
    return await tool.check(tool.Arguments.model_validate(args), ctx)


async def test_write_file_is_done_only_with_exactly_the_intended_bytes(tools):
    registry, ctx, root = tools
    assert (await _check(registry, ctx, "write_file", path="a.txt", content="new")).done is False  # missing
    (root / "a.txt").write_text("old")
    assert (await _check(registry, ctx, "write_file", path="a.txt", content="new")).done is False  # not yet written
    (root / "a.txt").write_text("new")
    checked = await _check(registry, ctx, "write_file", path="a.txt", content="new")
    assert checked.done is True and "a.txt" in checked.note


@pytest.mark.parametrize(("before", "old", "new", "done"), [
    ("alpha beta", "beta", "gamma", False),            # the old text is there once: the edit can run
    ("alpha gamma", "beta", "gamma", True),            # replaced already
    ("alpha beta\nbeta more", "beta", "gamma", None),  # neither: someone else's change
    ("line\n", "line\n", "line\nnext\n", False),       # an append not yet made (old inside new)
    ("line\nnext\n", "line\n", "line\nnext\n", True),  # the append is there: never twice
    ("keep cut", " cut", "", False),                   # a removal not yet made
    ("keep", " cut", "", True),                        # removed already
])
async def test_edit_file_tells_done_from_missing_from_unknown(tools, before, old, new, done):
    registry, ctx, root = tools
    (root / "f.txt").write_text(before)
    assert (await _check(registry, ctx, "edit_file", path="f.txt", old_text=old, new_text=new)).done is done


async def test_edit_file_of_a_missing_file_cannot_be_told(tools):
    registry, ctx, _ = tools
    assert (await _check(registry, ctx, "edit_file", path="gone.txt", old_text="a", new_text="b")).done is None
