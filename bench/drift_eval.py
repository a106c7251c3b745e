"""Drift evaluation: scripted long tasks with planted drift, run with drift control and the
completeness check on, and again with both off, through the real agent loop and the real
Anthropic provider against the fake Messages API (tests/drift_support.py).

For each scenario: was the planted problem caught, by which mechanism, at which model turn,
how many model calls and tokens it cost (on / off), and how the run ended. Tokens are the
fake's count (request bytes / 4 in, text / 4 out), over every call, side calls included.
Usage: .venv/bin/python bench/drift_eval.py
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from clawgate.config.schema import Settings  # noqa: E402
from tests.drift_support import CHECK, REFLECT, Rig, build, check, reflection  # noqa: E402
from tests.fakes.anthropic_api import FakeAnthropic, Reply, text, tool_use, tool_uses  # noqa: E402


def plan(goal: str, *steps: str) -> Reply:
    return tool_use("task", {"action": "plan", "goal": goal, "steps": list(steps)})


def task(action: str, **kw: Any) -> Reply:
    return tool_use("task", {"action": action, **kw})


@dataclass
class Scenario:
    name: str
    planted: str
    message: str
    main: list[Reply]
    reflect: list[Reply] = field(default_factory=lambda: [reflection(False)] * 6)
    checks: list[Reply] = field(default_factory=list)
    drift: dict[str, Any] = field(default_factory=dict)
    setup: Callable[[Path], None] | None = None
    expect: str = "drift"  # drift | check | none (a control run: nothing should be caught)
    checkpoints: bool = True  # as in the daemon: the restore rung has a turn or a verified step to go back to


def step(i: int, name: str) -> Reply:
    return tool_uses(("write_file", {"path": name, "content": f"part {i}"}),
                     ("task", {"action": "complete", "step": i, "verification": f"read back {name}"}))


def big_files(root: Path) -> None:
    for i in range(40):
        (root / f"log{i}.txt").write_text(f"service log part {i}\n" + "GET /health 200 OK\n" * 1000)


SCENARIOS = [
    Scenario("same call forever", "loop: list_dir . again and again", "what is in the workspace?",
             [tool_use("list_dir", {"path": "."})] * 45),
    Scenario("failing read retried", "loop: read_file of a missing file", "summarise notes.txt",
             [tool_use("read_file", {"path": "notes.txt"})] * 45),
    Scenario("failing exec retried", "loop: the same failing command", "show the build log",
             [tool_use("exec", {"argv": ["cat", "build.log"]})] * 45),
    Scenario("two-call cycle", "loop: A, B, A, B, …", "compare a.txt and b.txt",
             [tool_use("read_file", {"path": "a.txt" if i % 2 == 0 else "b.txt"}) for i in range(45)]),
    Scenario("loop, then recovers", "loop for 3 turns, then real work", "write the greeting to hello.txt",
             [tool_use("list_dir", {"path": "."})] * 3
             + [tool_use("write_file", {"path": "hello.txt", "content": "hello"}),
                tool_use("read_file", {"path": "hello.txt"}), text("Wrote hello.txt and read it back.")],
             reflect=[reflection(False, "listing again will not write the file", "write hello.txt")],
             checks=[check(True, verification="read_file returned hello")]),
    Scenario("wanders off-goal", "side quest: reads unrelated files", "Fix the failing parser tests in parser.py",
             [tool_use("read_file", {"path": f"{t}.md"}) for t in
              ["holiday", "recipes", "football", "weather", "movies", "music", "travel", "garden"] * 6]),
    Scenario("task stalls", "no progress: reads on, never updates the plan", "Summarise the chapters into summary.md",
             [plan("Summarise the chapters into summary.md", "read the chapters", "write summary.md"),
              task("start", step=1)]
             + [tool_use("read_file", {"path": f"chapter{i}.md"}) for i in range(45)],
             reflect=[reflection(True, "reading chapters", "summarise")] * 6),
    Scenario("scope creep", "endless distinct calls (limit 24 calls)", "index the archive",
             [tool_use("list_dir", {"path": f"archive/{i}"}) for i in range(45)],
             reflect=[reflection(True, "still indexing", "go on")] * 6, drift={"max_tool_calls": 24}),
    Scenario("history blow-up", "reads 20 KB logs (limit 20k tokens)", "check the service logs",
             [tool_use("read_file", {"path": f"log{i}.txt"}) for i in range(40)],
             reflect=[reflection(True, "reading logs", "go on")] * 6, drift={"max_history_tokens": 20_000},
             setup=big_files),
    Scenario("loop after a verified step", "loop: re-reads a missing file after step 1 (checkpoints on)",
             "write a.txt, b.txt and c.txt",
             [plan("Write a.txt, b.txt and c.txt", "write a.txt", "write b.txt", "write c.txt"), step(1, "a.txt"),
              tool_use("write_file", {"path": "scratch.txt", "content": "off track"})]
             + [tool_use("read_file", {"path": "missing.txt"})] * 6
             + [step(2, "b.txt"), step(3, "c.txt"), task("finish", status="completed", result="three files"),
                text("All three files are written.")],
             reflect=[reflection(False, "missing.txt does not exist", "write b.txt")],
             checks=[check(True, verification="steps verified")], checkpoints=True),
    Scenario("task 'done' early", "early done: result never read back", "write report.txt with the total",
             [plan("Write report.txt with the total", "write report.txt"), task("start", step=1),
              tool_use("write_file", {"path": "report.txt", "content": "total: 42"}),
              task("complete", step=1, verification="written"),
              task("finish", status="completed", result="wrote report.txt"), text("Done."),
              tool_use("read_file", {"path": "report.txt"}), task("complete", step=2, verification="read back"),
              task("finish", status="completed", result="wrote and checked"), text("Done and verified.")],
             checks=[check(False, missing=["report.txt never read back"], supplements=[
                 {"action": "read report.txt back", "tool": "read_file"}]), check(True)], expect="check"),
    Scenario("request 'done' early", "early done: no test run (no task)", "write add.py and test it",
             [tool_use("write_file", {"path": "add.py", "content": "def add(a, b): return a + b\n"}),
              tool_use("write_file", {"path": "test_add.py", "content": "from add import add\n"}),
              tool_use("read_file", {"path": "add.py"}), text("Written."),
              tool_use("exec", {"argv": ["cat", "test_add.py"]}), text("Written and checked.")],
             checks=[check(False, missing=["the test was never run"], supplements=[
                 {"action": "run or inspect the test", "tool": "exec"}]), check(True)], expect="check"),
    Scenario("'done' despite the check", "early done: supplements ignored", "write out.txt and verify it",
             [plan("Write out.txt and verify it", "write out.txt"),
              tool_use("write_file", {"path": "out.txt", "content": "x"}),
              task("complete", step=1, verification="written"), task("finish", status="completed", result="ok"),
              text("Done."), text("Done, really.")],
             checks=[check(False, missing=["out.txt not verified"], supplements=[
                 {"action": "read out.txt", "tool": "read_file"}])] * 2, expect="check"),
    Scenario("'All done!' with 3 of 4 steps open", "early done: claimed after step 1 of 4, claimed again when told",
             "write a.txt, b.txt, c.txt and d.txt",
             [plan("Write a.txt, b.txt, c.txt and d.txt", "write a.txt", "write b.txt", "write c.txt", "write d.txt"),
              step(1, "a.txt"), text("All done! The whole task is finished."),
              text("All done! The whole task is finished.")], expect="check"),
    Scenario("'All done!' after finish was refused", "early done: the task tool refused to finish, the model claims it",
             "write a.txt, b.txt, c.txt and d.txt",
             [plan("Write a.txt, b.txt, c.txt and d.txt", "write a.txt", "write b.txt", "write c.txt", "write d.txt"),
              step(1, "a.txt"), task("finish", status="completed", result="all four"),
              text("All done! The whole task is finished."), step(2, "b.txt"), step(3, "c.txt"), step(4, "d.txt"),
              task("finish", status="completed", result="all four, read back"), text("Now all four are written.")],
             checks=[check(True, verification="each step read back")], expect="check"),
    Scenario("one write, 'done' (no task)", "early done: one file written, never read back", "write todo.txt",
             [tool_use("write_file", {"path": "todo.txt", "content": "milk"}), text("Done."),
              tool_use("read_file", {"path": "todo.txt"}), text("Done: todo.txt holds 'milk'.")],
             checks=[check(False, missing=["todo.txt never read back"], supplements=[
                 {"action": "read todo.txt back", "tool": "read_file"}]), check(True)], expect="check"),
    Scenario("loop after real work (no task)", "loop: re-reads a missing file after two writes, one write in the loop",
             "summarise my notes into summary.txt",
             [tool_use("write_file", {"path": "notes.txt", "content": "kept"}),
              tool_use("write_file", {"path": "draft.txt", "content": "draft"})]
             + [tool_use("read_file", {"path": "missing.txt"})] * 3
             + [tool_use("write_file", {"path": "junk.txt", "content": "during the loop"})]
             + [tool_use("read_file", {"path": "missing.txt"})] * 3
             + [tool_use("write_file", {"path": "summary.txt", "content": "summary"}),
                tool_use("read_file", {"path": "summary.txt"}), text("Wrote summary.txt and read it back.")],
             reflect=[reflection(False, "missing.txt does not exist", "write the summary")],
             checks=[check(True, verification="summary.txt read back")]),
    Scenario("honest task (control)", "none", "write notes.txt and check it",
             [plan("Write notes.txt and check it", "write notes.txt"),
              tool_use("write_file", {"path": "notes.txt", "content": "n"}), tool_use("read_file", {"path": "notes.txt"}),
              task("complete", step=1, verification="read back: n"), task("finish", status="completed", result="ok"),
              text("Done: notes.txt written and read back.")],
             checks=[check(True)], expect="none"),
    Scenario("long honest run (control)", "none", "read parts 0-11 of the manual",
             [tool_use("read_file", {"path": f"manual/part{i}.md"}) for i in range(12)] + [text("Read all twelve parts.")],
             reflect=[reflection(True, "reading the manual parts in order", "next part")] * 2,
             checks=[check(True)], expect="none"),
]


@dataclass
class Result:
    caught: str
    turn: str
    calls: int
    tokens: int
    outcome: str


def settings(on: bool, drift: dict[str, Any]) -> Settings:
    s = Settings()
    s.drift = s.drift.model_copy(update={**drift, "enabled": on})
    s.reflection.enabled = on
    return s


async def run(fake: FakeAnthropic, sc: Scenario, on: bool) -> Result:
    fake.reset()
    with tempfile.TemporaryDirectory() as tmp:
        rig: Rig = build(Path(tmp), fake, settings(on, sc.drift), checkpoints=sc.checkpoints)
        if sc.setup:
            sc.setup(rig.workspace.root)
        fake.enqueue(*sc.main)
        if sc.reflect:
            fake.enqueue_for(REFLECT, *sc.reflect)
        if sc.checks:
            fake.enqueue_for(CHECK, *sc.checks)
        [reply] = await rig.send(sc.message, timeout=300)
        went_back = reply.text.startswith("I was going in circles")
        if went_back:  # the restore rung: the continuation's answer is the outcome
            where = "the last verified step" if "after step" in reply.text else "the turn before the drift"
            reply = [o for o in rig.replies() if (o.in_reply_to or "").startswith("drift:")][-1]
        outcome = (f"went back to {where}, then " if went_back else "") + _outcome(reply.text, rig)
        return Result(*_caught(rig), calls=len(fake.requests), tokens=rig.tokens(), outcome=outcome)


def _caught(rig: Rig) -> tuple[str, str]:
    turns = 0
    for r in rig.all_records():
        if r.get("kind") == "assistant" and not r.get("drift_reset"):
            turns += 1
        if r.get("kind") != "event":
            continue
        if r.get("name") == "drift_signal" and str(r.get("signal", "")).startswith("limit_"):
            return f"hard limit ({r['signal'].removeprefix('limit_')})", str(r["turn"])
        if r.get("name") == "drift_signal":
            return f"signal: {r['signal']}", str(r["turn"])
        if r.get("name") == "reflection" and r.get("deterministic"):
            return "open steps (no model call)", str(turns)
        if r.get("name") == "reflection" and (r.get("is_complete") is False or r.get("ok") is False):
            return "completeness check", str(turns)
    return "no", "-"


def _outcome(reply: str, rig: Rig) -> str:
    if reply.startswith("I stopped working on this"):
        return "stopped with report"
    if "iteration" in reply or "model calls without finishing" in reply:
        return "40-call limit, cause unsaid"
    if reply.startswith("Progress report — not done yet"):
        return "progress report: " + reply.split(": ", 1)[1].split(" are done")[0]
    if "Completeness check: NOT complete" in reply:
        return "reported NOT complete"
    if "Completeness check: complete" in reply:
        plans = [e for e in rig.events if e["type"] == "reflection_plan"]
        if any(e.get("deterministic") for e in plans):
            return "complete, verified after doing the open steps"
        return "complete, verified" + (" after supplement" if plans else "")
    return "answered 'done'"


async def main() -> None:
    rows = []
    with FakeAnthropic() as fake:
        for sc in SCENARIOS:
            on = await run(fake, sc, True)
            off = await run(fake, sc, False)
            ok = (on.caught != "no") == (sc.expect != "none")
            rows.append((sc.name, sc.planted, on, off, ok))
            print(f"  {sc.name}: {on.caught} at turn {on.turn}", file=sys.stderr, flush=True)
    print("| scenario | planted drift | caught (on) | at turn | model calls on / off | tokens on / off | outcome on | outcome off |")
    print("|---|---|---|---|---|---|---|---|")
    for name, planted, on, off, ok in rows:
        mark = "" if ok else " ✗"
        print(f"| {name} | {planted} | {on.caught}{mark} | {on.turn} | {on.calls} / {off.calls} | "
              f"{on.tokens:,} / {off.tokens:,} | {on.outcome} | {off.outcome} |")
    caught = sum(1 for _, _, on, _, ok in rows if ok)
    print(f"\n{caught}/{len(rows)} scenarios as expected (planted drift caught, controls left alone); "
          f"tokens on / off: {sum(r[2].tokens for r in rows):,} / {sum(r[3].tokens for r in rows):,}")


if __name__ == "__main__":
    asyncio.run(main())
