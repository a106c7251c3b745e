"""A tool call cut by a crash (intent saved, result not) is resolved per tool after a real SIGKILL.

The daemon dies at the exact point through CLAWGATE_CRASH_AT (agent/recovery/tool_calls.py), or, for a
long exec, from outside while the command runs; it is restarted without the crash point.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from tests.drift_support import CHECK, check, is_side
from tests.fakes.anthropic_api import text, tool_use
from tests.harness import ALLOW_PYTHON, DaemonProcess
from tests.waiting import wait_until

NO_STREAM = {"CLAWGATE_AGENT__STREAM": "false"}


def _final_replies(home: Path, run_id: str) -> list[dict[str, Any]]:
    with sqlite3.connect(f"file:{home / 'state/clawgate.db'}?mode=ro", uri=True) as db:
        bodies = [json.loads(body) for (body,) in db.execute("SELECT body FROM outbox")]
    return [b for b in bodies if b["in_reply_to"] == run_id]


def _records(home: Path, session: str) -> list[dict[str, Any]]:
    path = next((home / "state/sessions").glob(f"*{session}.jsonl"))
    return [json.loads(line) for line in path.read_text().splitlines()]


def _tool_result(request: dict[str, Any], call_id: str) -> dict[str, Any]:
    """The tool_result block the model was sent for one call."""
    for message in request["messages"]:
        for block in message["content"] if isinstance(message["content"], list) else []:
            if block.get("type") == "tool_result" and block.get("tool_use_id") == call_id:
                return block
    raise AssertionError(f"no tool_result for {call_id} in the request")


def _result_text(block: dict[str, Any]) -> str:
    content = block["content"]
    return content if isinstance(content, str) else "".join(part.get("text", "") for part in content)


async def _send(daemon: DaemonProcess, session: str, message: str) -> str:
    async with daemon.client() as client:
        ack = await client.request("chat.send", {"session": session, "text": message})
    return str(ack["runId"])


def _restart_without_crash_point(daemon: DaemonProcess) -> None:
    wait_until(lambda: daemon.proc is not None and daemon.proc.poll() is not None, "the daemon to die at the crash point")
    daemon.kill()  # reap the reader
    daemon.env.pop("CLAWGATE_CRASH_AT")
    daemon.start()


async def test_write_cut_after_its_intent_is_finished_once_on_restart(daemon_factory, fake_model):
    content = "line one\nline two — ünïcode\n"
    fake_model.enqueue(tool_use("write_file", {"path": "notes/out.txt", "content": content}, id="w1"), text("written"))
    daemon = daemon_factory({**NO_STREAM, "CLAWGATE_CRASH_AT": "after_intent:write_file"})
    run_id = await _send(daemon, "w", "write the notes")
    _restart_without_crash_point(daemon)
    target = daemon.workspace / "notes/out.txt"

    wait_until(lambda: _final_replies(daemon.home, run_id), "the reply after the restart")
    assert target.read_bytes() == content.encode()
    [reply] = _final_replies(daemon.home, run_id)
    assert reply["text"] == "written"  # nothing unknown to report
    records = _records(daemon.home, "w")
    intents = [r for r in records if r["kind"] == "tool_intent" and r["id"] == "w1"]
    dones = [r for r in records if r["kind"] == "tool_done" and r["id"] == "w1"]
    assert len(intents) == 2 and len(dones) == 1 and dones[0]["status"] == "ok"  # one write, after the restart
    assert any(r.get("name") == "tool_recovered" and r.get("how") == "finish" for r in records)
    assert "created notes/out.txt" in _result_text(_tool_result(fake_model.requests[-1], "w1"))


async def test_write_done_before_the_crash_is_checked_not_repeated(daemon_factory, fake_model):
    content = "already there\n"
    fake_model.enqueue(tool_use("write_file", {"path": "done.txt", "content": content}, id="w2"), text("ok"))
    daemon = daemon_factory({**NO_STREAM, "CLAWGATE_CRASH_AT": "after_effect:write_file"})
    run_id = await _send(daemon, "w2", "write it")
    _restart_without_crash_point(daemon)
    target = daemon.workspace / "done.txt"
    written = target.stat()  # the write happened before the kill; its result was never recorded

    wait_until(lambda: _final_replies(daemon.home, run_id), "the reply after the restart")
    after = target.stat()
    assert target.read_bytes() == content.encode()
    assert (after.st_ino, after.st_mtime_ns) == (written.st_ino, written.st_mtime_ns)  # not written again
    result = _result_text(_tool_result(fake_model.requests[-1], "w2"))
    assert "completed before the daemon restarted" in result and "done.txt" in result
    assert [r["status"] for r in _records(daemon.home, "w2") if r["kind"] == "tool_done"] == ["recovered"]


async def test_read_cut_by_a_crash_is_run_again(daemon_factory, fake_model):
    fake_model.enqueue(tool_use("read_file", {"path": "in.txt"}, id="r1"), text("read it"))
    daemon = daemon_factory({**NO_STREAM, "CLAWGATE_CRASH_AT": "after_intent:read_file"})
    (daemon.workspace / "in.txt").write_text("the secret number is 4417\n")
    run_id = await _send(daemon, "r", "read in.txt")
    _restart_without_crash_point(daemon)

    wait_until(lambda: _final_replies(daemon.home, run_id), "the reply after the restart")
    block = _tool_result(fake_model.requests[-1], "r1")
    assert "4417" in _result_text(block) and not block.get("is_error")
    records = _records(daemon.home, "r")
    assert [r["status"] for r in records if r["kind"] == "tool_done" and r["id"] == "r1"] == ["ok"]
    assert any(r.get("name") == "tool_recovered" and r.get("how") == "rerun" for r in records)
    assert "Outcome unknown" not in _final_replies(daemon.home, run_id)[0]["text"]


async def test_exec_cut_by_a_crash_is_reported_unknown_and_not_repeated(daemon_factory, fake_model):
    """The model, the user and the completeness check all learn that the command's outcome is unknown."""
    argv = ["python3", "-c", "import time; open('ran.txt','a').write('ran\\n'); time.sleep(60)"]
    fake_model.enqueue(tool_use("exec", {"argv": argv}, id="x1"), text("The command ran."))
    fake_model.enqueue_for(CHECK, check(True, verification="the command was started"))
    daemon = daemon_factory({**NO_STREAM, **ALLOW_PYTHON, "CLAWGATE_REFLECTION__ENABLED": "true",
                             "CLAWGATE_REFLECTION__MIN_TOOL_CALLS": "1"})
    marker = daemon.workspace / "ran.txt"
    run_id = await _send(daemon, "x", "run the script")
    wait_until(marker.exists, "the command to start")
    daemon.kill()  # SIGKILL while the command runs: its intent is saved, its result is not
    daemon.start()

    wait_until(lambda: _final_replies(daemon.home, run_id), "the reply after the restart")
    assert marker.read_text() == "ran\n"  # never run a second time
    main = [r for r in fake_model.requests if not is_side(r, CHECK)]
    block = _tool_result(main[-1], "x1")
    assert block.get("is_error") and "outcome is unknown" in _result_text(block)
    [check_request] = [r for r in fake_model.requests if is_side(r, CHECK)]
    prompt = check_request["messages"][0]["content"][0]["text"]
    assert "outcome unknown, not repeated:\n- exec python3 -c" in prompt
    [reply] = _final_replies(daemon.home, run_id)
    assert reply["text"].startswith("The command ran.")
    assert "complete apart from calls whose outcome is unknown" in reply["text"]  # never plain "complete"
    assert "Outcome unknown" in reply["text"] and "exec python3 -c" in reply["text"]  # the user is told which call
    assert any(r.get("name") == "tool_outcome_unknown" and r.get("run_id") == run_id for r in _records(daemon.home, "x"))
    assert "Traceback" not in daemon.log_text()
