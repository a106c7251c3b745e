"""The real daemon: completeness-check and drift events reach gateway clients, and the answer
carries the report."""

from __future__ import annotations

import json

from tests.drift_support import CHECK, REFLECT, check, reflection
from tests.fakes.anthropic_api import text, tool_use

ON = {"CLAWGATE_REFLECTION__ENABLED": "true", "CLAWGATE_DRIFT__ENABLED": "true",
      "CLAWGATE_DRIFT__RELEVANCE_THRESHOLD": "0"}


async def _run(client, text_: str, session: str) -> tuple[dict, list[dict]]:
    ack = await client.request("chat.send", {"session": session, "text": text_})
    seen: list[dict] = []
    async for frame in client.events():
        seen.append(frame)
        if frame["event"] == "chat" and frame["payload"].get("runId") == ack["runId"] and \
                frame["payload"]["state"] in ("final", "error"):
            return frame["payload"], seen
    raise AssertionError("connection closed before the answer")


async def test_reflection_events_and_the_report_reach_the_client(daemon_factory, fake_model):
    daemon = daemon_factory(ON)
    fake_model.enqueue(tool_use("write_file", {"path": "a.txt", "content": "a"}),
                       tool_use("write_file", {"path": "b.txt", "content": "b"}),
                       tool_use("write_file", {"path": "c.txt", "content": "c"}),
                       text("Wrote three files."),
                       tool_use("list_dir", {"path": "."}),
                       text("Wrote and listed three files."))
    fake_model.enqueue_for(CHECK, check(False, missing=["nothing was checked"], supplements=[
        {"action": "list the folder to confirm the three files", "tool": "list_dir"}]),
        check(True, verification="list_dir shows a.txt b.txt c.txt"))
    async with daemon.client(subscribe=["files"]) as client:
        final, frames = await _run(client, "write a.txt, b.txt and c.txt", "files")
    names = [f["event"] for f in frames if f["event"].startswith("reflection")]
    assert names == ["reflection", "reflection_plan", "reflection_exec", "reflection"]
    plan = next(f["payload"] for f in frames if f["event"] == "reflection_plan")
    assert plan["session"] == "files" and plan["supplements"][0]["tool"] == "list_dir"
    assert final["text"].startswith("Wrote and listed three files.")
    assert "Completeness check: complete." in final["text"] and "list_dir shows" in final["text"]


async def test_a_loop_without_a_task_goes_back_before_it_began_then_stops(daemon_factory, fake_model):
    """No task: the restore rung goes back to the turn checkpoint before the first signal (what was written
    since is removed), the continuation drifts again, and the ladder goes on to a reset and a stop."""
    daemon = daemon_factory({**ON, "CLAWGATE_REFLECTION__ENABLED": "false"})
    nope = tool_use("read_file", {"path": "nope.txt"})
    fake_model.enqueue(*[nope] * 3, tool_use("write_file", {"path": "junk.txt", "content": "x"}), *[nope] * 9)
    fake_model.enqueue_for(REFLECT, reflection(False))
    finals: dict[str, str] = {}
    async with daemon.client(subscribe=["loop"]) as client:
        assert {"drift", "reflection", "reflection_plan", "reflection_exec"} <= set(client.hello["events"])
        ack = await client.request("chat.send", {"session": "loop", "text": "read nope.txt"})
        frames: list[dict] = []
        async for frame in client.events():
            frames.append(frame)
            payload = frame["payload"]
            if frame["event"] == "chat" and payload["state"] in ("final", "error"):
                finals[payload["runId"]] = payload["text"]
                if any(k.startswith("drift:") for k in finals):
                    break
    report = finals[ack["runId"]]
    assert report.startswith('I was going in circles (loop: read_file(path="nope.txt") 3x')
    assert "the point in this request before the drift began (after model turn 2)" in report
    assert "1 file(s) I changed since then will be put back" in report
    [stopped] = [v for k, v in finals.items() if k.startswith("drift:")]
    assert stopped.startswith("I stopped working on this because drift persisted")
    drift = [f["payload"] for f in frames if f["event"] == "drift" and f["payload"]["action"] != "signal"]
    assert [(d["action"], d.get("step"), d.get("restored")) for d in drift if d["action"] != "reflection"] == [
        ("correction", "reflect", None), ("correction", "restore", None), ("restore", None, True),
        ("correction", "reset", None), ("reset", None, None), ("stop", None, None)]
    assert not (daemon.workspace / "junk.txt").exists()
    # the continuation saw the conversation as it was after turn 2: two reads, not the write or the later reads
    main = [b for b in fake_model.requests if "Reflection point" not in json.dumps(b["messages"][0])]
    continued = next(b for b in main if "Drift control took this work back" in json.dumps(b["messages"]))
    assert json.dumps(continued["messages"]).count('"name": "read_file"') == 2
    assert "junk.txt" not in json.dumps(continued["messages"][:-1])
    assert "The request was: read nope.txt" in continued["messages"][-1]["content"][-1]["text"]
    assert len(main) == 13 and len(fake_model.requests) == 14  # 7 turns, 6 after the restore, one reflection
