"""The real daemon with a model that says "All done!" with steps of its plan still open: the person never
receives that as done (gateway and Telegram), with or without the task tool having refused to finish, and
no model call is spent on seeing it. A model that goes on when told finishes and passes the check."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from tests.drift_support import CHECK, check
from tests.fakes.anthropic_api import FakeAnthropic, Reply, text, tool_use, tool_uses
from tests.telegram_support import CHAT, replies, telegram, tg_daemon  # noqa: F401

ON = {"CLAWGATE_REFLECTION__ENABLED": "true"}
DONE = "All done! The whole task is finished."
STEPS = ["write a.txt", "write b.txt", "write c.txt", "write d.txt"]


def _step(i: int) -> Reply:
    name = "abcd"[i - 1] + ".txt"
    return tool_uses(("write_file", {"path": name, "content": f"part {i}"}),
                     ("task", {"action": "complete", "step": i, "verification": f"read back {name}"}))


def _early_done(fake: FakeAnthropic, *, refused: bool) -> None:
    """Plans four steps, does one, claims done (after trying to finish the task, if `refused`), and
    claims it again when told steps are open."""
    fake.enqueue(tool_use("task", {"action": "plan", "goal": "Write a.txt, b.txt, c.txt and d.txt", "steps": STEPS}),
                 _step(1))
    if refused:
        fake.enqueue(tool_use("task", {"action": "finish", "status": "completed", "result": "all four written"}))
    fake.enqueue(text(DONE), text(DONE))


def _check_not_done(answer: str, fake: FakeAnthropic) -> None:
    assert not answer.startswith(DONE)
    assert answer.startswith('Progress report — not done yet: 1 of 4 steps of the task "Write a.txt, b.txt, c.txt')
    assert "Done and verified: 1. write a.txt (verified: read back a.txt)" in answer
    assert "Remains: 2. write b.txt; 3. write c.txt; 4. write d.txt" in answer
    assert not [b for b in fake.requests if CHECK in json.dumps(b["messages"][0])]  # no model call to see it
    told = [b for b in fake.requests if "[clawgate check] Not done yet" in json.dumps(b["messages"])]
    assert len(told) == 1 and "3 of 4 steps open" in json.dumps(told[0]["messages"][-1])


async def _chat(daemon: Any, message: str, session: str) -> tuple[str, list[dict[str, Any]]]:
    async with daemon.client(subscribe=[session]) as client:
        ack = await client.request("chat.send", {"session": session, "text": message})
        seen: list[dict[str, Any]] = []
        async for frame in client.events():
            seen.append(frame)
            payload = frame["payload"]
            if frame["event"] == "chat" and payload.get("runId") == ack["runId"] and payload["state"] in ("final", "error"):
                return payload["text"], seen
    raise AssertionError("connection closed before the answer")


@pytest.mark.parametrize("refused", [False, True], ids=["claimed", "after-finish-refused"])
async def test_an_early_done_with_open_steps_reaches_the_gateway_as_a_progress_report(daemon_factory, fake_model,
                                                                                     refused: bool) -> None:
    daemon = daemon_factory(ON)
    _early_done(fake_model, refused=refused)
    answer, frames = await asyncio.wait_for(_chat(daemon, "write the four files", "early"), 120)
    _check_not_done(answer, fake_model)
    checks = [f["payload"] for f in frames if f["event"] == "reflection"]
    assert [(c["deterministic"], c["tokens"], c["is_complete"]) for c in checks] == [(True, 0, False)] * 2
    task = json.loads(next((daemon.home / "state/tasks").glob("t_*.json")).read_text())
    assert task["status"] == "in_progress" and [s["status"] for s in task["steps"]][1:] == ["pending"] * 3
    if refused:
        log = (daemon.home / "state/sessions/early.jsonl").read_text()
        assert "steps [2, 3, 4] are not done and verified" in log  # the tool refused; the answer still was not done


def test_an_early_done_with_open_steps_reaches_telegram_as_a_progress_report(tg_daemon, telegram,  # noqa: F811
                                                                            fake_model) -> None:
    tg_daemon(env=ON)
    _early_done(fake_model, refused=True)
    telegram.inject_message(CHAT, "write the four files")
    telegram.wait_for(lambda: any("Progress report" in r for r in replies(telegram, CHAT)), timeout=120)
    [answer] = [r for r in replies(telegram, CHAT) if "Progress report" in r]
    assert not any(r.startswith("All done") for r in replies(telegram, CHAT))
    _check_not_done(answer, fake_model)


async def test_a_model_told_its_steps_are_open_finishes_them_and_passes_the_check(daemon_factory, fake_model) -> None:
    daemon = daemon_factory(ON)
    fake_model.enqueue(tool_use("task", {"action": "plan", "goal": "Write a.txt, b.txt, c.txt and d.txt", "steps": STEPS}),
                       _step(1), text(DONE), _step(2), _step(3), _step(4),
                       tool_use("task", {"action": "finish", "status": "completed", "result": "four files, read back"}),
                       text("Now all four files are written and read back."))
    fake_model.enqueue_for(CHECK, check(True, verification="every step read back"))
    answer, frames = await asyncio.wait_for(_chat(daemon, "write the four files", "honest"), 120)
    assert answer.startswith("Now all four files are written and read back.")
    assert "Completeness check: complete." in answer and "Remains: nothing" in answer
    names = [(f["event"], f["payload"].get("deterministic", False)) for f in frames if f["event"].startswith("reflection")]
    assert names == [("reflection", True), ("reflection_plan", True), ("reflection_exec", False), ("reflection", False)]
    assert [(daemon.workspace / f"{n}.txt").read_text() for n in "abcd"] == [f"part {i}" for i in range(1, 5)]
    assert DONE not in answer
