"""The first request of a fresh session is small (a size budget, sent with every message) and still
carries what the model needs: every tool, and the rules that its descriptions and schemas state."""

from __future__ import annotations

import json

from tests.fakes.anthropic_api import FakeAnthropic
from tests.harness import DaemonProcess

BUDGET = 14_300  # bytes; bench/context_bench.py prints the breakdown (web_search and browser: ~2.1 kB with their skill line)
# The request names the daemon's home (the workspace's path); the test's home is a temp dir whose length
# depends on the test's name and on the runner (an xdist worker's temp dirs are deeper). The size is
# counted as it would be with a person's home at this typical place.
TYPICAL_HOME = "/home/alice/.clawgate"

TOOLS = {"cron", "edit_file", "exec", "list_dir", "load_skill", "memory_append", "memory_get", "memory_replace",
         "memory_search", "message", "read_file", "send_file", "spawn", "task", "web_fetch", "write_file",
         "web_search", "browser"}


async def test_the_first_hello_request_stays_under_the_budget_with_every_tool(daemon: DaemonProcess,
                                                                            fake_model: FakeAnthropic) -> None:
    async with daemon.client() as client:
        assert (await client.chat("hello", session="fresh"))["state"] == "final"
    body, size = fake_model.requests[0], int(fake_model.headers[0]["content-length"])
    home = str(daemon.home)
    size -= json.dumps(body).count(home) * (len(home) - len(TYPICAL_HOME))
    sections = {k: len(json.dumps(body[k], separators=(",", ":")).encode()) for k in ("tools", "system", "messages")}
    assert size < BUDGET, f"first request is {size:,} B (budget {BUDGET:,}): {sections}"
    tools = {t["name"]: t for t in body["tools"]}
    assert set(tools) == TOOLS
    # what the model must still be told
    assert "no shell" in tools["exec"]["description"] and "background" in tools["exec"]["input_schema"]["properties"]
    assert all(k in tools["cron"]["description"] for k in ("'at'", "'every'", "'cron'", "'tz'", "'deliver'"))
    assert "verification" in tools["task"]["description"]
    assert "sees nothing of this chat" in tools["spawn"]["description"]
    assert "exactly once" in tools["edit_file"]["description"]
    # optional arguments are plain types (the model leaves them out), and still validated as before
    assert tools["task"]["input_schema"]["properties"]["status"] == {"enum": ["completed", "failed", "cancelled"],
                                                                      "type": "string"}
    assert all("anyOf" not in json.dumps(t) for t in body["tools"])
    assert tools["exec"]["input_schema"]["additionalProperties"] is False
    system = "".join(b["text"] for b in body["system"])
    assert "untrusted-data" in system and "approval" in system
