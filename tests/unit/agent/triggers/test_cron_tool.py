"""The agent's `cron` tool: the same validation as the CLI, replies back to the asking chat,
and approval before a job may write to some other chat."""

from __future__ import annotations

from pathlib import Path

import pytest

from clawgate.agent.core.events import EventHub
from clawgate.agent.tools.base import ToolContext, ToolError
from clawgate.agent.triggers.cron_tool import CronTool
from clawgate.agent.triggers import CronService, CronStore
from clawgate.config.schema import CronSettings
from clawgate.agent.bus import SqliteBus
from clawgate.agent.core.statedb import open_state_db
from clawgate.workspace.guard import WorkspaceGuard


@pytest.fixture
def tool(tmp_path: Path):
    db = open_state_db(tmp_path / "db", fsync=False)
    service = CronService(CronStore(db), SqliteBus(db), EventHub(), CronSettings())
    yield CronTool(service), service
    db.close()


def ctx(tmp_path: Path, channel: str = "telegram", chat_id: str = "4242") -> ToolContext:
    (tmp_path / "ws").mkdir(exist_ok=True)
    return ToolContext(session_key="main", channel=channel, chat_id=chat_id, sender_id="u", run_id="r1",
                       workspace=WorkspaceGuard(tmp_path / "ws"))


async def test_add_list_remove(tool, tmp_path: Path) -> None:
    cron, service = tool
    here = ctx(tmp_path)
    args = CronTool.Arguments(action="add", message="Remind the user to call Anna", at="09:00", tz="Europe/Berlin")
    assert cron.needs_approval(args, here) is None
    out = await cron.run(args, here)
    (job,) = service.jobs()
    assert f"scheduled job {job.id}" in out and "delivers to telegram:4242" in out
    assert job.deliver == "telegram:4242" and job.plan.tz == "Europe/Berlin"
    listing = await cron.run(CronTool.Arguments(action="list"), here)
    assert job.id in listing and "Remind the user" in listing
    removed = await cron.run(CronTool.Arguments(action="remove", id=job.id), here)
    assert removed.startswith(f"removed job {job.id}") and service.jobs() == []


async def test_gateway_chats_get_their_own_session_as_target(tool, tmp_path: Path) -> None:
    cron, service = tool
    await cron.run(CronTool.Arguments(action="add", message="x", every="1h"), ctx(tmp_path, "gateway", "desk"))
    assert service.jobs()[0].deliver == "gateway:desk"


async def test_bad_input_is_a_tool_error_naming_the_fix(tool, tmp_path: Path) -> None:
    cron, _ = tool
    for args, words in ((CronTool.Arguments(action="add", message="x", cron="0 9 * * funday"), "day-of-week"),
                        (CronTool.Arguments(action="add", message="x", at="yesterday-ish"), "ISO-8601"),
                        (CronTool.Arguments(action="add", message="x"), "exactly one schedule"),
                        (CronTool.Arguments(action="add", at="+5m"), "needs a 'message'"),
                        (CronTool.Arguments(action="remove", id="nope"), "no cron job 'nope'")):
        with pytest.raises(ToolError) as info:
            await cron.run(args, ctx(tmp_path))
        assert words in info.value.render() and "fix:" in info.value.render()


def test_delivering_elsewhere_needs_approval(tool, tmp_path: Path) -> None:
    cron, _ = tool
    here = ctx(tmp_path)
    elsewhere = CronTool.Arguments(action="add", message="x", every="1h", deliver="telegram:999")
    assert "telegram:999" in (cron.needs_approval(elsewhere, here) or "")
    for deliver in ("telegram:4242", "none"):
        assert cron.needs_approval(CronTool.Arguments(action="add", message="x", every="1h", deliver=deliver), here) is None
