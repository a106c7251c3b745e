"""Drift control and the completeness check in a conversation several people share, in the real agent
loop against the fake Messages API: a guest's run is checked against the guest's own work, never the
owner's task, plan or calls (agent/context/shared_view.py)."""

from __future__ import annotations

import json
from pathlib import Path

from clawgate.agent.tasks.store import Step, Task
from clawgate.workspace.users import OWNER
from tests.drift_support import REFLECT, build, reflection
from tests.fakes.anthropic_api import text, tool_use
from tests.unit.agent.supervision.test_drift_loop import settings

VAULT = "migrate the owner's private vault 7f21"


async def test_a_guest_s_run_is_checked_against_its_own_work_not_the_owner_s_task(tmp_path: Path, fake_model) -> None:
    rig = build(tmp_path, fake_model, settings(reflect_every=1))
    fake_model.enqueue(text("hello owner"))
    await rig.send("hello", owner=True)
    vault = Task(goal=VAULT, session_key="s", status="in_progress", user=OWNER,
                 steps=[Step(text="copy the vault keys", status="in_progress"), Step(text="wipe the old vault")])
    rig.tasks.save(vault)
    fake_model.enqueue_for(REFLECT, reflection(True, "reading the file as asked", "answer"))
    fake_model.enqueue(tool_use("read_file", {"path": "missing.txt"}), text("There is no such file."))
    replies = await rig.send("read missing.txt", owner=False)
    # the owner's open steps do not hold the guest's answer back, nor turn it into a report on the vault
    assert [r.text for r in replies] == ["There is no such file."]
    guest_calls = fake_model.requests[1:]
    assert rig.side_calls(REFLECT)  # drift control did look at the guest's run …
    for body in guest_calls:  # … and nothing the guest's run caused the model to read names the owner's task
        assert "7f21" not in json.dumps(body), body["messages"][0]
    assert all("7f21" not in json.dumps(r) for r in rig.session().records if r.get("kind") == "note")
    # the owner's own next run still has its task line, and the completeness gate still holds the owner
    fake_model.enqueue(tool_use("read_file", {"path": "missing.txt"}), text("All done!"))
    [owner_reply] = await rig.send("go on", owner=True)
    assert owner_reply.text.startswith("Progress report — not done yet") and "7f21" in owner_reply.text
