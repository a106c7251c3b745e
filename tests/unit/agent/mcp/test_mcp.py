"""MCP tools in-process: names, the approval/guest/down gate, rendering, tool-list sync, config."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from mcp.types import EmbeddedResource, ImageContent, TextContent, TextResourceContents

from clawgate.agent.approvals import ApprovalBroker
from clawgate.agent.core.events import EventHub
from clawgate.agent.mcp import McpManager
from clawgate.agent.mcp.tool import McpTool, render_result, tool_name
from clawgate.agent.tools import ToolContext, ToolRegistry
from clawgate.config.loader import ConfigError, load
from clawgate.config.mcp import McpServerSettings, McpSettings
from clawgate.workspace.guard import WorkspaceGuard

API_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


class FakeConnection:
    """Stands in for McpConnection: a switchable down message, and a record of calls."""

    def __init__(self) -> None:
        self.down = ""
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.name = "srv"

    def down_message(self) -> str:
        return self.down

    async def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        self.calls.append((tool, arguments))
        return SimpleNamespace(content=[TextContent(type="text", text="done")], structured_content=None, is_error=False)


def ctx(tmp_path: Path, owner: bool = True) -> ToolContext:
    return ToolContext(session_key="s", channel="gateway", chat_id="s", sender_id="u", run_id="r",
                       workspace=WorkspaceGuard(tmp_path), owner=owner)


def make_tool(connection: FakeConnection, **settings: Any) -> McpTool:
    server = McpServerSettings(command="x", **settings)
    return McpTool(name="mcp_srv_do", server="srv", remote="do", description="Does it.",
                   schema={"type": "object", "properties": {"n": {"type": "integer"}}}, settings=server,
                   connection=connection)  # type: ignore[arg-type]


def registry(tool: McpTool, mode: str) -> ToolRegistry:
    events = EventHub()
    return ToolRegistry([tool], events=events, approvals=ApprovalBroker(events, mode=mode))  # type: ignore[arg-type]


def test_names_follow_the_messages_api_rules_and_stay_stable() -> None:
    assert tool_name("notes", "read_file", set()) == "mcp_notes_read_file"
    odd = tool_name("gh", "repos/list.all issues", set())
    assert odd == "mcp_gh_repos_list_all_issues" and API_NAME.match(odd)
    long = tool_name("server", "x" * 100, set())
    assert len(long) == 64 and API_NAME.match(long) and long == tool_name("server", "x" * 100, set())
    clash = tool_name("a", "b.c", {"mcp_a_b_c"})  # "b_c" would take the same name
    assert clash != "mcp_a_b_c" and API_NAME.match(clash)


async def test_a_side_effecting_call_needs_approval_and_a_read_only_one_does_not(tmp_path) -> None:
    conn = FakeConnection()
    outcome = await registry(make_tool(conn), "deny").execute({"id": "1", "name": "mcp_srv_do", "input": {"n": 1}},
                                                                ctx(tmp_path))
    assert outcome.status == "denied" and conn.calls == []
    outcome = await registry(make_tool(conn, read_only_tools=["do"]), "deny").execute(
        {"id": "2", "name": "mcp_srv_do", "input": {"n": 1}}, ctx(tmp_path))
    assert outcome.status == "ok" and conn.calls == [("do", {"n": 1})]
    assert outcome.content.startswith('<untrusted-data id="') and "\ndone\n" in outcome.content
    tool = make_tool(conn, approval="never")
    assert tool.side_effects and (await registry(tool, "deny").execute(
        {"id": "3", "name": "mcp_srv_do", "input": {}}, ctx(tmp_path))).status == "ok"
    assert not make_tool(conn, read_only_tools=["*"]).side_effects


async def test_guests_are_refused_without_asking_the_owner(tmp_path) -> None:
    conn = FakeConnection()
    asked: list[Any] = []
    reg = registry(make_tool(conn, read_only_tools=["*"]), "ask")
    reg.events.subscribe(asked.append)
    outcome = await reg.execute({"id": "1", "name": "mcp_srv_do", "input": {}}, ctx(tmp_path, owner=False))
    assert outcome.is_error and "for the owner only" in outcome.content and conn.calls == []
    assert not [e for e in asked if e["type"] == "approval_request"]
    outcome = await registry(make_tool(conn, read_only_tools=["*"], guests=True), "ask").execute(
        {"id": "2", "name": "mcp_srv_do", "input": {}}, ctx(tmp_path, owner=False))
    assert outcome.status == "ok"


async def test_a_call_that_skipped_approval_because_the_server_was_down_never_runs(tmp_path) -> None:
    """The server comes back between the gate and the run: the call still gets the down error."""
    conn = FakeConnection()
    conn.down = "MCP server srv is down, restarting (attempt 2); try again later"
    tool = make_tool(conn)
    args = tool.Arguments.model_validate({"n": 5})
    assert tool.needs_approval(args, ctx(tmp_path)) is None  # nothing to approve: it cannot run
    conn.down = ""
    with pytest.raises(Exception) as raised:
        await tool.run(args, ctx(tmp_path))
    assert "is down, restarting (attempt 2)" in str(raised.value) and conn.calls == []


def test_results_render_text_and_name_what_they_leave_out() -> None:
    result = SimpleNamespace(is_error=False, structured_content=None, content=[
        TextContent(type="text", text="hello"), ImageContent(type="image", data="AAAA", mime_type="image/png"),
        EmbeddedResource(type="resource", resource=TextResourceContents(uri="file:///a.txt", text="inside"))])
    assert render_result(result) == "hello\n[image omitted: image/png]\ninside"
    assert render_result(SimpleNamespace(content=[], structured_content={"a": 1})) == '{"a": 1}'
    assert render_result(SimpleNamespace(content=[], structured_content=None)) == "(no output)"


def test_the_tool_list_follows_the_server_within_the_allow_list(tmp_path) -> None:
    events = EventHub()
    reg = ToolRegistry([], events=events)
    settings = McpSettings(servers={"srv": McpServerSettings(command="x", tools=["keep", "later"])})
    manager = McpManager(settings, reg, workspace=tmp_path, logs=tmp_path / "logs")
    conn = manager.connections["srv"]

    def listed(*names: str, schema: dict[str, Any] | None = None) -> list[Any]:
        return [SimpleNamespace(name=n, description="d", input_schema=schema or {"type": "object"}) for n in names]

    manager._sync_tools(conn, listed("keep", "secret_admin"))
    assert reg.names == ["mcp_srv_keep"]  # not on the allow-list: never registered
    manager._sync_tools(conn, listed("later"))
    assert reg.names == ["mcp_srv_later"]  # gone from the server: gone from the registry
    manager._sync_tools(conn, listed("keep", schema={"type": "string"}))
    assert reg.names == []  # a schema the Messages API cannot take is skipped
    assert manager.status()["srv"]["tools"] == 0


@pytest.mark.parametrize("env, expected", [
    ({"CLAWGATE_MCP__SERVERS__A": '{"args": ["x"]}'}, "either command"),
    ({"CLAWGATE_MCP__SERVERS__A": '{"command": "x", "url": "http://127.0.0.1:1/mcp"}'}, "either command"),
    ({"CLAWGATE_MCP__SERVERS__A": '{"url": "http://127.0.0.1:1/mcp", "env": {"K": "v"}}'}, "not for a url"),
    ({"CLAWGATE_MCP__SERVERS__A": '{"command": "x", "headers": {"Authorization": "Bearer sekrit-123"}}'}, "headers are for a url"),
    ({"CLAWGATE_MCP__SERVERS__A": '{"command": "x", "approval": "sometimes"}'}, "mcp.servers.a.approval"),
    ({"CLAWGATE_MCP__SERVERS__A": '{"command": "x", "bogus": 1}'}, "unknown key 'mcp.servers.a.bogus'"),
])
def test_bad_server_configs_are_one_line_errors_without_secrets(tmp_path, env, expected) -> None:
    with pytest.raises(ConfigError) as raised:
        load(tmp_path, env)
    line = str(raised.value)
    assert expected in line and "\n" not in line and "sekrit" not in line


async def test_each_agents_call_goes_to_its_own_process_and_never_to_anothers(tmp_path) -> None:
    home, work = FakeConnection(), FakeConnection()
    server = McpServerSettings(command="x", read_only_tools=["*"])
    tool = McpTool(name="mcp_srv_do", server="srv", remote="do", description="Does it.", schema={"type": "object"},
                   settings=server, connection=home, by_agent={None: home, "work": work})  # type: ignore[dict-item]
    reg = registry(tool, "deny")

    def of(session: str) -> ToolContext:
        return ToolContext(session_key=session, channel="gateway", chat_id=session, sender_id="u", run_id="r",
                           workspace=WorkspaceGuard(tmp_path), owner=True)
    for session in ("main", "agent:work:main", "sub-1a2b@agent:work:main", "agent:ops:main"):
        await reg.execute({"id": "1", "name": "mcp_srv_do", "input": {"n": 1}}, of(session))
    assert len(home.calls) == 1 and len(work.calls) == 2  # a sub-agent's call goes to its parent's agent's
    refused = await reg.execute({"id": "2", "name": "mcp_srv_do", "input": {}}, of("agent:ops:main"))
    assert refused.is_error and "does not run for this agent" in refused.content
    assert len(home.calls) == 1 and len(work.calls) == 2


def test_a_server_runs_once_per_agent_that_uses_it_unless_it_is_shared(tmp_path) -> None:
    settings = McpSettings(servers={"own": McpServerSettings(command="x"),
                                    "fixed": McpServerSettings(command="x", cwd=str(tmp_path)),
                                    "unused": McpServerSettings(command="x")})
    users = {"own": [(None, tmp_path / "home"), ("work", tmp_path / "work")],
             "fixed": [(None, tmp_path / "home"), ("work", tmp_path / "work")], "unused": []}
    manager = McpManager(settings, ToolRegistry([], events=EventHub()), workspace=tmp_path / "home",
                         logs=tmp_path / "logs", users=users)
    own = manager.by_agent["own"]
    assert own[None].cwd == tmp_path / "home" and own["work"].cwd == tmp_path / "work" and own[None] is not own["work"]
    assert manager.by_agent["fixed"][None] is manager.by_agent["fixed"]["work"]  # its own cwd: one for all
    assert "unused" not in manager.connections and manager.status()["unused"]["state"].startswith("unused")
    assert manager.status()["own"]["agents"] == {"": "starting", "work": "starting"}
