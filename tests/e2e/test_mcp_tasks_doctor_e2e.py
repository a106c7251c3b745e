"""MCP tools that run only as tasks are never offered to the model, and `clawgate doctor` names what an
HTTP server answered and where: the real daemon and CLI, the real `mcp` client, tests/fakes/mcp_server.py."""

from __future__ import annotations

import json
from pathlib import Path

from tests.fakes.anthropic_api import FakeAnthropic, text
from tests.harness import DaemonProcess
from tests.mcp_support import http_server, mcp_status, stdio_server_env


def task_server_env(tmp: Path) -> dict[str, str]:
    env = stdio_server_env(tmp)
    server = json.loads(env["CLAWGATE_MCP__SERVERS__FAKE"])
    server["env"]["FAKE_MCP_TASKS"] = "1"
    return {**env, "CLAWGATE_MCP__SERVERS__FAKE": json.dumps(server)}


def doctor_lines(home: DaemonProcess, *args: str) -> dict[str, str]:
    result = home.cli("doctor", *args, timeout=120)
    assert "Traceback" not in result.stdout + result.stderr
    return {line.split()[2]: line for line in result.stdout.splitlines() if line[5:].startswith("mcp ")}


async def test_a_tool_that_runs_only_as_a_task_is_not_offered_to_the_model(daemon_factory, fake_model: FakeAnthropic,
                                                                          tmp_path: Path) -> None:
    daemon = daemon_factory(task_server_env(tmp_path))
    entry = await mcp_status(daemon)
    assert entry["state"] == "up" and entry["tools"] == 7, entry  # the 6 usual ones and quick_report
    fake_model.enqueue(text("ok"))
    async with daemon.client() as client:
        assert (await client.chat("hello"))["text"] == "ok"
    offered = {t["name"] for t in fake_model.requests[0]["tools"]}
    assert "mcp_fake_quick_report" in offered  # task support optional: a direct call works
    assert "mcp_fake_long_report" not in offered  # task support required: a direct call would fail
    assert "'long_report' skipped: it can only be called as an MCP task" in daemon.log_text()


def test_doctor_counts_what_the_model_gets_and_names_the_task_only_tools(tmp_path: Path) -> None:
    home = DaemonProcess(tmp_path / "home", anthropic_url=None, env=task_server_env(tmp_path))
    home.init()
    line = doctor_lines(home, "--offline")["fake"]
    assert line.startswith("ok") and "listed 7 tool(s)" in line
    assert "1 more not offered to the model, they run only as MCP tasks: long_report" in line


def test_doctor_names_the_http_status_and_the_url_of_a_refusing_server(tmp_path: Path) -> None:
    token = "mcp-doctor-secret-0123456789"
    with http_server(tmp_path, token) as url:
        env = {"CLAWGATE_MCP__SERVERS__WRONG": json.dumps(
                   {"url": url + "?key=query-secret-99", "headers": {"Authorization": "Bearer wrong-token-42"}}),
               "CLAWGATE_MCP__SERVERS__GONE": json.dumps({"url": url.replace("/mcp", "/nowhere"),
                                                          "headers": {"Authorization": f"Bearer {token}"}}),
               "CLAWGATE_MCP__SERVERS__RIGHT": json.dumps({"url": url, "headers": {"Authorization": f"Bearer {token}"}})}
        home = DaemonProcess(tmp_path / "home", anthropic_url=None, env=env)
        home.init()
        lines = doctor_lines(home)
    assert lines["right"].startswith("ok") and "listed 6 tool(s)" in lines["right"]
    assert lines["wrong"].startswith("FAIL") and f"(HTTP 401 from {url})" in lines["wrong"], lines["wrong"]
    assert lines["gone"].startswith("FAIL") and f"(HTTP 404 from {url.replace('/mcp', '/nowhere')})" in lines["gone"]
    shown = "\n".join(lines.values())
    assert "wrong-token-42" not in shown and "query-secret-99" not in shown
