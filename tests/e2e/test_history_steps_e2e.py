"""chat.history carries each assistant turn's tool calls as steps, as they ended, through the
real daemon and its WebSocket (the web page shows them after a reload, docs/web.md)."""

from __future__ import annotations

import json

from tests.fakes.anthropic_api import text, tool_uses


async def test_history_lists_the_runs_tool_steps_with_how_they_ended(daemon, fake_model):
    fake_model.enqueue(tool_uses(("write_file", {"path": "notes/a.txt", "content": "alpha"}),
                                 ("read_file", {"path": "missing.txt"}), text="Working on it."),
                       text("Wrote **a.txt**; `missing.txt` is not there."))
    async with daemon.client() as client:
        final = await client.chat("write and read", session="steps")
        assert final["state"] == "final"
        history = (await client.request("chat.history", {"session": "steps"}))["messages"]
    assert (daemon.workspace / "notes/a.txt").read_text() == "alpha"
    turns = [m for m in history if m["role"] == "assistant"]
    assert [m["text"] for m in turns] == ["Working on it.", "Wrote **a.txt**; `missing.txt` is not there."]
    first, last = turns
    assert first["tools"] == ["write_file", "read_file"]  # the older field stays as it was
    assert first["runId"] == last["runId"] == final["runId"]
    steps = first["steps"]
    assert [(s["tool"], s["status"]) for s in steps] == [("write_file", "ok"), ("read_file", "error")]
    assert json.loads(steps[0]["summary"]) == {"path": "notes/a.txt", "content": "alpha"}
    assert json.loads(steps[1]["summary"]) == {"path": "missing.txt"}
    assert all(s["id"] and s["durationMs"] >= 0 for s in steps)
    assert "steps" not in last and last["tools"] == []


async def test_a_long_argument_is_cut_in_the_step_summary(daemon, fake_model):
    fake_model.enqueue(tool_uses(("write_file", {"path": "big.txt", "content": "x" * 5000})), text("ok"))
    async with daemon.client() as client:
        await client.chat("write a big file", session="big")
        history = (await client.request("chat.history", {"session": "big"}))["messages"]
    (step,) = next(m for m in history if m["role"] == "assistant" and m["tools"])["steps"]
    assert step["status"] == "ok" and (daemon.workspace / "big.txt").stat().st_size == 5000
    assert len(step["summary"]) == 200 and step["summary"].startswith('{"path": "big.txt", "content": "xxx')
    assert step["summary"].endswith("…")
