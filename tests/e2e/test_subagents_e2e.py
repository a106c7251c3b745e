"""Sub-agents end to end: the real daemon, the fake Messages API, real tools, real kills.

The fake routes each request by the text of its latest user message: the parent's request says
PARENT-…, a child's request is its task (CHILD-…), so parent and children are scripted apart.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path
from typing import Any, Callable

from tests.fakes.anthropic.request_text import _routing_text, tool_results
from tests.fakes.anthropic_api import FakeAnthropic, Reply, text, tool_use, tool_uses
from tests.harness import ALLOW_PYTHON
from tests.waiting import wait_until

NO_STREAM = {"CLAWGATE_AGENT__STREAM": "false"}


REPORT = "[sub-agent report]"


def _requests_for(fake: FakeAnthropic, marker: str) -> list[dict]:
    """Requests routed to `marker`'s script (a report quotes its child's task: it counts as a report)."""
    return [body for body in list(fake.requests) if marker in (routing := _routing_text(body))
            and (marker == REPORT or REPORT not in routing)]


async def _final(client, run_id: str, frames: list[dict] | None = None) -> dict:
    async for frame in client.events():
        if frames is not None:
            frames.append(frame)
        payload = frame["payload"]
        if frame["event"] == "chat" and payload.get("runId") == run_id and payload["state"] in ("final", "error"):
            return payload
    raise AssertionError("connection closed before the answer")


class Router:
    """A responder that answers parent and children from per-marker scripts (callables get the body)."""

    def __init__(self, scripts: dict[str, list[Reply | Callable[[dict], Reply]]]) -> None:
        self.scripts = scripts
        self.lock = threading.Lock()

    def __call__(self, body: dict) -> Reply:
        routing = _routing_text(body)
        with self.lock:
            marker = next((m for m in self.scripts if m in routing), None)
            if marker is None or not self.scripts[marker]:
                return text(f"unscripted request: {routing[-200:]}")
            step = self.scripts[marker].pop(0)
        return step(body) if callable(step) else step


async def test_two_children_run_concurrently_and_only_their_summaries_reach_the_parent(daemon_factory, fake_model):
    a_asked, b_asked = threading.Event(), threading.Event()

    def first(mine: threading.Event, other: threading.Event, path: str, content: str) -> Callable[[dict], Reply]:
        def reply(body: dict) -> Reply:
            mine.set()
            # Each child's first model call waits for the other's: children run one after another would stall here.
            if not other.wait(60):
                return text("NOT CONCURRENT")
            return tool_use("write_file", {"path": path, "content": content})
        return reply

    fake_model.responder = Router({
        "PARENT-JOB": [tool_uses(("spawn", {"task": "CHILD-A: write a.txt"}), ("spawn", {"task": "CHILD-B: write b.txt"})),
                       text("Both children are done.")],
        "CHILD-A": [first(a_asked, b_asked, "a.txt", "A-TRANSCRIPT-ONLY"), text("Summary A: wrote a.txt")],
        "CHILD-B": [first(b_asked, a_asked, "b.txt", "B-TRANSCRIPT-ONLY"), text("Summary B: wrote b.txt")],
    })
    daemon = daemon_factory(NO_STREAM)
    frames: list[dict] = []
    async with daemon.client(subscribe=["work"]) as client:
        ack = await client.request("chat.send", {"session": "work", "text": "PARENT-JOB: two files"})
        final = await _final(client, ack["runId"], frames)
    assert final["text"] == "Both children are done."
    assert (daemon.workspace / "a.txt").read_text() == "A-TRANSCRIPT-ONLY"
    assert (daemon.workspace / "b.txt").read_text() == "B-TRANSCRIPT-ONLY"

    parent = _requests_for(fake_model, "PARENT-JOB")
    assert len(parent) == 2
    results = tool_results(parent[1:])
    assert len(results) == 2 and "Summary A: wrote a.txt" in results[0] and "Summary B: wrote b.txt" in results[1]
    assert "NOT CONCURRENT" not in json.dumps(parent[1])
    # The children's transcripts stay out of the parent's context: not their tool calls, not their results.
    assert "TRANSCRIPT-ONLY" not in json.dumps(parent[1]) and "write_file" not in json.dumps(parent[1]["messages"])
    # …and the parent's conversation stays out of the children's: a child sees its task, the sub-agent prompt and
    # no spawn / cron / message tools.
    for marker in ("CHILD-A", "CHILD-B"):
        child = _requests_for(fake_model, marker)
        assert len(child) == 2
        assert "PARENT-JOB" not in json.dumps(child[0]["messages"])
        assert "You are a sub-agent" in json.dumps(child[0]["system"])
        names = {t["name"] for t in child[0]["tools"]}
        assert "write_file" in names and not names & {"spawn", "cron", "message", "task", "memory_append"}

    # Events: a start and an end per child, for the parent's session; the end carries the summary's length.
    agent = [f["payload"] for f in frames if f["event"] == "agent"]
    starts = [p for p in agent if p["stream"] == "subagent_start"]
    ends = [p for p in agent if p["stream"] == "subagent_end"]
    assert len(starts) == 2 and len(ends) == 2 and all(p["session"] == "work" for p in starts + ends)
    assert {p["child"] for p in starts} == {p["child"] for p in ends}
    assert sorted(p["summary_chars"] for p in ends) == [len("Summary A: wrote a.txt"), len("Summary B: wrote b.txt")]
    assert all(p["status"] == "done" and p["turns"] == 2 and p["usage"]["total"] > 0 for p in ends)
    # The transcripts are on disk, linked from the parent's log.
    sessions = daemon.home / "state/sessions"
    parent_log = [json.loads(line) for line in (sessions / "work.jsonl").read_text().splitlines()]
    links = [r for r in parent_log if r.get("name") == "subagent_end"]
    assert len(links) == 2
    for link in links:
        transcript = (daemon.home / "state" / link["transcript"]).read_text()
        assert "TRANSCRIPT-ONLY" in transcript and '"subagent_result"' in transcript


async def test_a_child_may_not_spawn(daemon_factory, fake_model):
    fake_model.responder = Router({
        "PARENT-DEPTH": [tool_use("spawn", {"task": "CHILD-D: delegate further"}), text("parent done")],
        "CHILD-D": [tool_use("spawn", {"task": "GRANDCHILD: never runs"}), text("I could not delegate.")],
        "GRANDCHILD": [text("grandchild ran")],
    })
    daemon = daemon_factory(NO_STREAM)
    async with daemon.client(subscribe=["depth"]) as client:
        ack = await client.request("chat.send", {"session": "depth", "text": "PARENT-DEPTH"})
        final = await _final(client, ack["runId"])
    assert final["text"] == "parent done"
    [refusal] = tool_results(_requests_for(fake_model, "CHILD-D")[1:])
    assert "spawn is not available to a sub-agent" in refusal and "max_depth" in refusal
    assert not _requests_for(fake_model, "GRANDCHILD")
    assert "I could not delegate." in tool_results(_requests_for(fake_model, "PARENT-DEPTH")[1:])[0]


async def test_a_background_child_reports_back_into_the_parent_session(daemon_factory, fake_model):
    release = threading.Event()

    def child_answer(body: dict) -> Reply:
        release.wait(60)  # the parent answers first: the child really runs in the background
        return text("Background summary: 42 files counted")

    def parent_on_report(body: dict) -> Reply:
        report = _routing_text(body)
        assert "[sub-agent report]" in report and "Background summary: 42 files counted" in report
        return text("Your background count finished: 42 files.")

    fake_model.responder = Router({
        "[sub-agent report]": [parent_on_report],
        "PARENT-BG": [tool_use("spawn", {"task": "CHILD-BG: count files", "background": True}), text("Started it.")],
        "CHILD-BG": [child_answer],
    })
    daemon = daemon_factory(NO_STREAM)
    async with daemon.client(subscribe=["bg"]) as client:
        ack = await client.request("chat.send", {"session": "bg", "text": "PARENT-BG"})
        first = await _final(client, ack["runId"])
        assert first["text"] == "Started it."
        [started] = tool_results(_requests_for(fake_model, "PARENT-BG")[1:])
        assert "in the background" in started
        release.set()
        async for frame in client.events():  # the report's run answers in the same chat
            payload = frame["payload"]
            if frame["event"] == "chat" and payload.get("state") == "final" and payload.get("runId") != ack["runId"]:
                assert payload["session"] == "bg"
                assert payload["text"] == "Your background count finished: 42 files."
                break
        history = await client.request("chat.history", {"session": "bg"})
    assert [m["text"] for m in history["messages"] if m["role"] == "assistant"][-1].startswith("Your background count")
    assert not list((daemon.home / "state/subagents").glob("*.json"))  # reported: no longer pending
    # The report acts for the same person as the parent run (the gateway token holder: the owner).
    log_lines = [json.loads(line) for line in (daemon.home / "state/sessions/bg.jsonl").read_text().splitlines()]
    [report] = [r for r in log_lines if r["kind"] == "user" and r.get("channel") == "subagent"]
    assert report["owner"] is True and report["deliver"] == {"channel": "gateway", "chat_id": "bg"}


async def test_budget_exceeded_stops_the_child_with_a_summary_saying_so(daemon_factory, fake_model):
    fake_model.responder = Router({
        "PARENT-BUDGET": [tool_use("spawn", {"task": "CHILD-LOOP: list forever", "max_turns": 3}), text("parent saw it")],
        "CHILD-LOOP": [tool_use("list_dir", {"path": "."}, text="still looking") for _ in range(10)],
    })
    daemon = daemon_factory({**NO_STREAM, "CLAWGATE_SUBAGENTS__MAX_TURNS": "5"})
    async with daemon.client(subscribe=["budget"]) as client:
        ack = await client.request("chat.send", {"session": "budget", "text": "PARENT-BUDGET"})
        assert (await _final(client, ack["runId"]))["text"] == "parent saw it"
    assert len(_requests_for(fake_model, "CHILD-LOOP")) == 3  # the call's own budget, below the configured 5
    [summary] = tool_results(_requests_for(fake_model, "PARENT-BUDGET")[1:])
    assert "budget; 3 model calls" in summary
    assert "Budget exceeded: the sub-agent was stopped after 3 of 3 model calls" in summary and "still looking" in summary


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def _answered(home: Path, run_id: str) -> bool:
    with sqlite3.connect(f"file:{home / 'state/clawgate.db'}?mode=ro", uri=True) as db:
        row = db.execute("SELECT status FROM inbox WHERE id=?", (run_id,)).fetchone()
    return row is not None and row[0] == "answered"


def _replies(home: Path, run_id: str) -> list[dict[str, Any]]:
    with sqlite3.connect(f"file:{home / 'state/clawgate.db'}?mode=ro", uri=True) as db:
        bodies = [json.loads(body) for (body,) in db.execute("SELECT body FROM outbox")]
    return [b for b in bodies if b["in_reply_to"] == run_id]


APPEND = ["python3", "-c", "open('log.txt','a').write('child\\n')"]


async def test_sigkill_while_a_child_runs_resumes_it_without_repeating_its_side_effect(daemon_factory, fake_model):
    fake_model.responder = Router({
        "PARENT-KILL": [tool_use("spawn", {"task": "CHILD-KILL: append one line"}), text("parent finished")],
        # the child's second call is slow: the daemon is killed during it, after the append ran
        "CHILD-KILL": [tool_use("exec", {"argv": APPEND}), text("lost", delay=30), text("Appended one line.")],
    })
    daemon = daemon_factory({**NO_STREAM, **ALLOW_PYTHON})
    async with daemon.client() as client:
        ack = await client.request("chat.send", {"session": "kill", "text": "PARENT-KILL"})
    wait_until(lambda: len(_requests_for(fake_model, "CHILD-KILL")) >= 2, "the child's second model call")
    assert _lines(daemon.workspace / "log.txt") == ["child"]
    daemon.kill()
    daemon.start()
    wait_until(lambda: _answered(daemon.home, ack["runId"]), "the parent's answer after the restart")
    [reply] = _replies(daemon.home, ack["runId"])
    assert reply["text"] == "parent finished"
    assert _lines(daemon.workspace / "log.txt") == ["child"]  # the child's append ran exactly once
    child = _requests_for(fake_model, "CHILD-KILL")
    assert len(child) == 3 and len(_requests_for(fake_model, "PARENT-KILL")) == 2
    [summary] = tool_results(_requests_for(fake_model, "PARENT-KILL")[1:])
    assert "Appended one line." in summary
    assert "outcome is unknown" not in json.dumps(child[-1])  # the append's recorded result was replayed


async def test_sigkill_after_a_background_child_finished_reports_once_and_never_reruns_it(daemon_factory, fake_model):
    fake_model.responder = Router({
        "[sub-agent report]": [text("report relayed", delay=30), text("report relayed")],
        "PARENT-BGK": [tool_use("spawn", {"task": "CHILD-BGK: append", "background": True}), text("started")],
        "CHILD-BGK": [tool_use("exec", {"argv": APPEND}), text("Background append done.")],
    })
    daemon = daemon_factory({**NO_STREAM, **ALLOW_PYTHON})
    async with daemon.client() as client:
        ack = await client.request("chat.send", {"session": "bgk", "text": "PARENT-BGK"})
    # killed while the parent model reads the report: the child is finished and its report is on the bus
    wait_until(lambda: len(_requests_for(fake_model, "[sub-agent report]")) >= 1, "the report's model call")
    daemon.kill()
    daemon.start()
    wait_until(lambda: len(_requests_for(fake_model, "[sub-agent report]")) >= 2, "the report after the restart")
    wait_until(lambda: _answered(daemon.home, "subagent:" + _child_key(daemon.home, "bgk")), "the report's answer")
    assert _lines(daemon.workspace / "log.txt") == ["child"]
    assert len(_requests_for(fake_model, "CHILD-BGK")) == 2  # never run again
    assert _answered(daemon.home, ack["runId"])
    assert not list((daemon.home / "state/subagents").glob("*.json"))


def _child_key(home: Path, parent: str) -> str:
    records = [json.loads(line) for line in (home / f"state/sessions/{parent}.jsonl").read_text().splitlines()]
    return next(r["child"] for r in records if r.get("name") == "subagent_end")


async def test_sigkill_while_a_background_child_runs_resumes_it_after_the_restart(daemon_factory, fake_model):
    fake_model.responder = Router({
        REPORT: [text("Your background append is done.")],
        "PARENT-BGM": [tool_use("spawn", {"task": "CHILD-BGM: append", "background": True}), text("started")],
        "CHILD-BGM": [tool_use("exec", {"argv": APPEND}), text("lost", delay=30), text("Background append done.")],
    })
    daemon = daemon_factory({**NO_STREAM, **ALLOW_PYTHON})
    async with daemon.client() as client:
        ack = await client.request("chat.send", {"session": "bgm", "text": "PARENT-BGM"})
    wait_until(lambda: _answered(daemon.home, ack["runId"]), "the parent's first answer")
    wait_until(lambda: len(_requests_for(fake_model, "CHILD-BGM")) >= 2, "the child's second model call")
    assert len(list((daemon.home / "state/subagents").glob("*.json"))) == 1
    daemon.kill()
    daemon.start()
    wait_until(lambda: _child_ended(daemon.home, "bgm"), "the resumed child's end")
    report_id = "subagent:" + _child_key(daemon.home, "bgm")
    wait_until(lambda: _answered(daemon.home, report_id), "the report's answer")
    [reply] = _replies(daemon.home, report_id)
    assert reply["text"] == "Your background append is done." and reply["chat_id"] == "bgm"
    assert _lines(daemon.workspace / "log.txt") == ["child"]  # the append ran once
    assert len(_requests_for(fake_model, "CHILD-BGM")) == 3
    assert not list((daemon.home / "state/subagents").glob("*.json"))
    assert "resuming 1 background sub-agent(s)" in daemon.log_text()


def _child_ended(home: Path, parent: str) -> bool:
    path = home / f"state/sessions/{parent}.jsonl"
    return path.exists() and '"subagent_end"' in path.read_text()


def test_the_terminal_chat_shows_a_childs_start_and_end(daemon, fake_model):
    from tests.e2e.test_cli_chat_pty import Terminal

    fake_model.responder = Router({
        "PARENT-CLI": [tool_use("spawn", {"task": "CHILD-CLI: say hi"}), text("parent relayed hi")],
        "CHILD-CLI": [text("hi from the child")],
    })
    term = Terminal(daemon, "chat", "-m", "PARENT-CLI")
    try:
        term.read_until("parent relayed hi")
        assert term.wait() == 0
    finally:
        term.close()
    lines = [line.strip() for line in term.seen.replace("\r", "").split("\n")]
    started = next(i for i, line in enumerate(lines) if line.startswith("↳ sub-agent sub-") and "started: CHILD-CLI" in line)
    ended = next(i for i, line in enumerate(lines) if line.startswith("↳ sub-agent sub-") and " done: 1 model calls" in line)
    assert started < ended < next(i for i, line in enumerate(lines) if "parent relayed hi" in line), term.seen
    assert "hi from the child" not in term.seen  # the child's words reach the parent model, not the screen
