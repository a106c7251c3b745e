"""Identity restatement through the real daemon: every request from the task's 21st turn on carries
it, drift notes or not; none once the task is finished; none in a long chat of one-line questions."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from tests.drift_support import REFLECT, is_side, reflection
from tests.fakes.anthropic_api import text, tool_use, tool_uses

GOAL = "Read the notes n0 to n23 and summarise them"
LINE = f"I am Claw. Current task: {GOAL}. Step "
DRIFT = {"CLAWGATE_DRIFT__ENABLED": "true", "CLAWGATE_DRIFT__RELEVANCE_THRESHOLD": "0",
         "CLAWGATE_DRIFT__REFLECT_EVERY": "5", "CLAWGATE_DRIFT__NO_PROGRESS_TURNS": "100"}


def _last_texts(body: dict[str, Any]) -> list[str]:
    return [b["text"] for b in body["messages"][-1]["content"] if b.get("type") == "text"]


async def test_every_turn_from_21_carries_the_restatement_drift_notes_included(daemon_factory, fake_model) -> None:
    daemon = daemon_factory(DRIFT)
    for i in range(24):
        (daemon.workspace / f"n{i}.txt").write_text(f"note {i}")
    fake_model.enqueue(tool_use("task", {"action": "plan", "goal": GOAL, "steps": ["read the notes", "summarise them"]}),
                       *[tool_use("read_file", {"path": f"n{i}.txt"}) for i in range(24)],
                       tool_use("task", {"action": "complete", "step": 1, "verification": "read all 24"}),
                       tool_uses(("task", {"action": "complete", "step": 2, "verification": "summary given"}),
                                 ("task", {"action": "finish", "status": "completed", "result": "read and summarised"})),
                       text("The 24 notes say note 0 to note 23."))
    fake_model.enqueue_for(REFLECT, *[reflection(True, "reading the notes in order", "read the next note")] * 6)
    async with daemon.client() as client:
        final = await asyncio.wait_for(client.chat("read the notes and summarise them", session="long"), 180)
    assert final["text"] == "The 24 notes say note 0 to note 23."
    main = [b for b in fake_model.requests if not is_side(b, REFLECT)]
    assert len(main) == 28
    # request i asks for model turn i + 1; the task exists from turn 1's tools and counts turns from turn 2,
    # so it has run more than 20 turns from the request for turn 23 on, until it was finished at turn 27
    carried = [i for i, body in enumerate(main) if any(t.startswith("[runtime] " + LINE) for t in _last_texts(body))]
    assert carried == list(range(22, 27))
    for i in carried:
        assert sum(LINE in t for t in _last_texts(main[i])) == 1
    assert _last_texts(main[22])[-1] == f"[runtime] {LINE}1/2. Next: read the notes."
    assert _last_texts(main[26])[-1] == f"[runtime] {LINE}2/2. Next: summarise them."
    # the periodic reflection of turn 25 lands as a drift note in the request for turn 26, with the line after it
    with_note = _last_texts(main[25])
    assert with_note[-2].startswith("[drift] Reflection (turn 25") and with_note[-1].startswith("[runtime] " + LINE)
    assert "Current task" not in json.dumps(main[27]["messages"][-1])  # finished: no plan to restate


async def test_a_thirty_message_chat_without_a_task_is_never_restated(daemon, fake_model) -> None:
    fake_model.enqueue(*[text(f"Answer {i}.") for i in range(30)])
    async with daemon.client() as client:
        for i in range(30):
            reply = await asyncio.wait_for(client.chat(f"quick question {i}?", session="casual"), 60)
            assert reply["text"] == f"Answer {i}."
    assert len(fake_model.requests) == 30
    last = json.dumps(fake_model.requests[-1]["messages"])
    assert "quick question 0?" in last and "quick question 29?" in last  # the whole chat was in view
    assert not [b for b in fake_model.requests if "I am Claw" in json.dumps(b["messages"])]
    assert not [b for b in fake_model.requests if "Current task" in json.dumps(b["messages"])]
