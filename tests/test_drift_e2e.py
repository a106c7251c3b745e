"""The real daemon: completeness-check and drift events reach gateway clients, and the answer
carries the report."""

from __future__ import annotations

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


async def test_a_looping_run_is_stopped_and_the_client_sees_why(daemon_factory, fake_model):
    daemon = daemon_factory({**ON, "CLAWGATE_REFLECTION__ENABLED": "false"})
    fake_model.enqueue(*[tool_use("read_file", {"path": "nope.txt"}) for _ in range(12)])
    fake_model.enqueue_for(REFLECT, reflection(False))
    async with daemon.client(subscribe=["loop"]) as client:
        assert {"drift", "reflection", "reflection_plan", "reflection_exec"} <= set(client.hello["events"])
        final, frames = await _run(client, "read nope.txt", "loop")
    drift = [f["payload"] for f in frames if f["event"] == "drift" and f["payload"]["action"] != "signal"]
    assert [d["action"] for d in drift] == ["correction", "reflection", "correction", "correction", "reset", "stop"]
    # no task, so no verified step to go back to: the restore rung falls through to the reset in the same turn
    assert [(d["step"], d.get("restored")) for d in drift if d["action"] == "correction"] == \
        [("reflect", None), ("restore", False), ("reset", None)]
    assert final["text"].startswith("I stopped working on this because drift persisted")
    assert len(fake_model.requests) == 10  # 9 turns and one reflection, instead of 40 turns
