"""Each agent's own tool policy, end to end through the real daemon: its exec allowlist and approval mode
decide its runs' exec calls (not the daemon's `[tools]`), and it is offered the tools of the MCP servers
its `mcp_servers` lists and no others; the completeness check of its runs uses its model."""

from __future__ import annotations

import json
from collections.abc import Callable

from tests.drift_support import CHECK, check, is_side
from tests.fakes.anthropic_api import FakeAnthropic, text, tool_use
from tests.fakes.anthropic.request_text import tool_results
from tests.harness import ROOT, DaemonProcess
from tests.mcp_support import mcp_status, stdio_server_env


async def test_an_agents_exec_allowlist_and_approval_mode_are_its_own(
        daemon_factory: Callable[..., DaemonProcess], fake_model: FakeAnthropic) -> None:
    agents = {"home": {"default": True},
              "work": {"tools": {"exec_allowlist": ["echo"], "approval_mode": "deny"}},
              "ops": {"tools": {"approval_mode": "allow"}}}
    daemon = daemon_factory({"CLAWGATE_AGENTS": json.dumps(agents)})
    async with daemon.client() as client:
        # work: `date` is on the daemon's allowlist but not on work's, and work denies what needs approval
        fake_model.enqueue(tool_use("exec", {"argv": ["date"]}), tool_use("exec", {"argv": ["echo", "from-work"]}),
                           text("work done"))
        assert (await client.chat("run things", session="main", agent="work"))["text"] == "work done"
        denied, echoed = tool_results(fake_model.requests[-1:])
        assert "not run" in denied and "denied by agents.work.tools.approval_mode" in denied, denied
        assert "not on the exec allowlist (agents.work.tools.exec_allowlist)" in denied, denied
        assert "from-work" in echoed and "not run" not in echoed, echoed
        # ops: a program off the allowlist runs without asking, in ops's workspace
        fake_model.enqueue(tool_use("exec", {"argv": ["touch", "ops-made.txt"]}), text("ops done"))
        assert (await client.chat("touch it", session="main", agent="ops"))["text"] == "ops done"
        [touched] = tool_results(fake_model.requests[-1:])
        assert "not run" not in touched, touched
        # home keeps the daemon's policy: `date` is on tools.exec.allowlist and runs without asking
        fake_model.enqueue(tool_use("exec", {"argv": ["date"]}), text("home done"))
        assert (await client.chat("what day", session="main"))["text"] == "home done"
        [dated] = tool_results(fake_model.requests[-1:])
        assert "not run" not in dated and "needed approval" not in dated, dated
    assert (daemon.home / "agents" / "ops" / "workspace" / "ops-made.txt").exists()
    assert not (daemon.workspace / "ops-made.txt").exists()


async def test_an_agent_is_offered_only_the_mcp_servers_it_lists(
        daemon_factory: Callable[..., DaemonProcess], fake_model: FakeAnthropic, tmp_path) -> None:
    agents = {"home": {"default": True, "tools": {"mcp_servers": ["fake"]}},
              "work": {"tools": {"mcp_servers": ["other"]}}}
    (tmp_path / "fake").mkdir()
    (tmp_path / "other").mkdir()
    daemon = daemon_factory({**stdio_server_env(tmp_path / "fake", read_only_tools=["add", "echo"]),
                             **stdio_server_env(tmp_path / "other", "other", read_only_tools=["add", "echo"]),
                             "CLAWGATE_AGENTS": json.dumps(agents)})
    assert (await mcp_status(daemon))["state"] == "up"
    assert (await mcp_status(daemon, "other"))["state"] == "up"
    fake_model.enqueue(tool_use("mcp_fake_add", {"a": 2, "b": 3}), text("work tried"))
    async with daemon.client() as client:
        assert (await client.chat("add", session="main", agent="work"))["text"] == "work tried"
        work_body = fake_model.requests[-1]
        fake_model.enqueue(tool_use("mcp_other_add", {"a": 2, "b": 3}), text("home tried"))
        assert (await client.chat("add", session="main"))["text"] == "home tried"
        home_body = fake_model.requests[-1]
    work_mcp = {t["name"] for t in work_body["tools"] if t["name"].startswith("mcp_")}
    home_mcp = {t["name"] for t in home_body["tools"] if t["name"].startswith("mcp_")}
    assert work_mcp and all(name.startswith("mcp_other_") for name in work_mcp), work_mcp
    assert home_mcp and all(name.startswith("mcp_fake_") for name in home_mcp), home_mcp
    assert "read_file" in {t["name"] for t in work_body["tools"]}  # the other tools are still offered
    assert "is not one of this agent's tools" in tool_results([work_body])[0]
    assert "is not one of this agent's tools" in tool_results([home_body])[0]


async def test_the_completeness_check_of_an_agents_run_uses_that_agents_model(
        daemon_factory: Callable[..., DaemonProcess], fake_model: FakeAnthropic) -> None:
    agents = {"home": {"default": True},
              "work": {"model": "claude-work-7", "completeness_model": "claude-check-9"},
              "ops": {"model": "claude-ops-3"}}
    daemon = daemon_factory({"CLAWGATE_AGENTS": json.dumps(agents), "CLAWGATE_REFLECTION__ENABLED": "true"})
    models: dict[str, str] = {}
    async with daemon.client() as client:
        for agent in ("work", "ops", None):
            fake_model.enqueue(tool_use("write_file", {"path": "done.txt", "content": "x"}),
                               tool_use("read_file", {"path": "done.txt"}), text("Wrote and read done.txt."))
            fake_model.enqueue_for(CHECK, check(True, verification="read_file shows it"))
            before = len(fake_model.requests)
            answer = await client.chat("write done.txt", session="main", **({"agent": agent} if agent else {}))
            assert answer["text"].startswith("Wrote and read done.txt."), answer
            [checked] = [body for body in fake_model.requests[before:] if is_side(body, CHECK)]
            models[agent or "home"] = checked["model"]
    assert models["work"] == "claude-check-9"  # its own completeness_model
    assert models["ops"] == "claude-ops-3"  # no completeness_model: its own model, not the daemon's
    assert models["home"] not in ("claude-check-9", "claude-ops-3", "claude-work-7")


async def test_each_agents_mcp_server_runs_in_that_agents_workspace(
        daemon_factory: Callable[..., DaemonProcess], fake_model: FakeAnthropic, tmp_path) -> None:
    agents = {"home": {"default": True}, "work": {"tools": {"mcp_servers": ["fake"]}}, "ops": {}}
    server = stdio_server_env(tmp_path, cwd=None, read_only_tools=["where"],
                              env={"PYTHONPATH": str(ROOT), "FAKE_MCP_WHERE": "1"})
    daemon = daemon_factory({**server, "CLAWGATE_AGENTS": json.dumps(agents)})
    entry = await mcp_status(daemon)
    assert entry["state"] == "up" and entry["agents"] == {"": "up", "work": "up"}, entry
    seen: dict[str, str] = {}
    bodies: dict[str, dict] = {}
    async with daemon.client() as client:
        for agent in ("work", "home", "ops"):
            fake_model.enqueue(tool_use("mcp_fake_where", {}), text(f"{agent} asked"))
            named = {} if agent == "home" else {"agent": agent}
            assert (await client.chat("where?", session="main", **named))["text"] == f"{agent} asked"
            bodies[agent] = fake_model.requests[-1]
            [seen[agent]] = tool_results([bodies[agent]])
    work_space = (daemon.home / "agents" / "work" / "workspace").resolve()
    assert f"cwd={work_space}\n" in seen["work"] + "\n", seen["work"]
    assert f"cwd={daemon.workspace.resolve()}\n" in seen["home"] + "\n", seen["home"]
    # ops lists no server: it is offered none, and a call anyway reaches no agent's server
    assert not [t["name"] for t in bodies["ops"]["tools"] if t["name"].startswith("mcp_")]
    assert "is not one of this agent's tools" in seen["ops"] and "cwd=" not in seen["ops"], seen["ops"]
    assert {t["name"] for t in bodies["work"]["tools"]} >= {"mcp_fake_where", "mcp_fake_add"}
