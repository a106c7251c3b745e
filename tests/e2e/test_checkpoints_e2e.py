"""Checkpoints through the real daemon: a multi-step task, restore, continue, fork, replay."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from clawgate.gateway.client import GatewayError
from tests import checkpoint_rows as rows
from tests.jsonl import complete_records
from tests.fakes.anthropic_api import text, tool_use, tool_uses
from tests.harness import ALLOW_PYTHON
from tests.telegram_support import CHAT, replies, telegram, tg_daemon  # noqa: F401
from tests.waiting import wait_until, wait_until_async

STEPS = 5


def _task_script(fake_model: Any, steps: int = STEPS) -> None:
    """A five-step task: plan, then per step write a file and complete the step (verified), then finish."""
    fake_model.enqueue(tool_use("task", {"action": "plan", "goal": "write five files",
                                         "steps": [f"write out/step{i}.txt" for i in range(1, steps + 1)]}))
    for i in range(1, steps + 1):
        fake_model.enqueue(tool_uses(("write_file", {"path": f"out/step{i}.txt", "content": f"step {i}"}),
                                     ("task", {"action": "complete", "step": i,
                                               "verification": f"read back out/step{i}.txt"})))
    fake_model.enqueue(tool_use("task", {"action": "finish", "status": "completed", "result": "five files written"}),
                       text("All five files are written."))


async def _chat(client: Any, message: str, session: str) -> dict[str, Any]:
    return await asyncio.wait_for(client.chat(message, session=session), 90)


async def _idle_request(client: Any, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """A restore right after an answer may meet the session's after-run bookkeeping: retry while busy."""
    async def attempt() -> dict[str, Any] | None:
        try:
            return await client.request(method, params)
        except GatewayError as exc:
            if "busy" not in exc.message:
                raise
            return None
    return await wait_until_async(attempt, f"{method} to find the session idle", interval=0.05)


def _log(home: Path, session: str) -> Path:
    return home / "state/sessions" / f"{session}.jsonl"


def _records(path: Path) -> list[dict[str, Any]]:
    return complete_records(path)


def _audit(home: Path) -> list[dict[str, Any]]:
    return complete_records(home / "state/audit.jsonl")


def _trace(home: Path, session: str) -> list[dict[str, Any]]:
    path = home / "state/traces" / f"{session}.jsonl"
    return complete_records(path)


def _step_checkpoints(listing: dict[str, Any]) -> dict[int, dict[str, Any]]:
    return {cp["step"]: cp for cp in listing["checkpoints"] if cp["kind"] == "step"}


async def _run_task(daemon: Any, fake_model: Any, session: str) -> dict[int, dict[str, Any]]:
    _task_script(fake_model)
    async with daemon.client() as client:
        final = await _chat(client, "write the five files", session)
        assert final["text"] == "All five files are written."
        listing = await client.request("checkpoints.list", {"session": session})
    steps = _step_checkpoints(listing)
    assert sorted(steps) == list(range(1, STEPS + 1))
    assert all(cp["verified"] and cp["task"] for cp in steps.values())
    assert any(cp["kind"] == "turn" for cp in listing["checkpoints"])
    return steps


async def test_restore_to_step_3_and_continue(daemon, fake_model):
    steps = await _run_task(daemon, fake_model, "job")
    ws = daemon.workspace
    before = {i: (ws / f"out/step{i}.txt").stat() for i in range(1, 4)}
    calls = len(fake_model.requests)

    async with daemon.client() as client:
        shown = await client.request("checkpoints.show", {"id": steps[3]["id"]})
        assert shown["task"]["steps"][2]["status"] == "done" and shown["task"]["steps"][3]["status"] == "pending"
        assert sorted(shown["restoreWouldChange"]["removed"]) == ["out/step4.txt", "out/step5.txt"]
        result = await _idle_request(client, "checkpoints.restore", {"id": steps[3]["id"], "mode": "both"})
        assert result["restored"] is True and result["irreversible"] == []
        assert sorted(result["files"]["removed"]) == ["out/step4.txt", "out/step5.txt"]
        # the later history stays on disk as an abandoned branch
        abandoned = daemon.home / "state/sessions" / result["abandoned"]
        assert "All five files are written." in abandoned.read_text()
        assert "All five files are written." not in _log(daemon.home, "job").read_text()
        assert not (ws / "out/step4.txt").exists() and not (ws / "out/step5.txt").exists()
        task = (await client.request("tasks.list", {"session": "job"}))["tasks"][0]
        assert task["status"] == "in_progress" and task["done"] == 3

        # continue: only the new turns reach the model; steps 1-3 are not written again
        for i in (4, 5):
            fake_model.enqueue(tool_uses(("write_file", {"path": f"out/step{i}.txt", "content": f"step {i} again"}),
                                         ("task", {"action": "complete", "step": i, "verification": "read back"})))
        fake_model.enqueue(text("Continued: steps 4 and 5 are done."))
        final = await _chat(client, "continue", "job")
    assert final["text"] == "Continued: steps 4 and 5 are done."
    assert len(fake_model.requests) == calls + 3
    first_new = json.dumps(fake_model.requests[calls]["messages"])
    assert '"path": "out/step3.txt"' in first_new and '"path": "out/step4.txt"' not in first_new
    assert "All five files are written." not in first_new
    assert (ws / "out/step4.txt").read_text() == "step 4 again"
    for i in range(1, 4):
        st = (ws / f"out/step{i}.txt").stat()
        assert (st.st_ino, st.st_mtime_ns) == (before[i].st_ino, before[i].st_mtime_ns)
    writes = [a["args"] for a in _audit(daemon.home) if a["tool"] == "write_file" and a["status"] == "ok"]
    for i in range(1, 4):
        assert sum(f"step{i}.txt" in json.dumps(args) for args in writes) == 1
    # the continued branch's first new checkpoint descends from the restored one
    async with daemon.client() as client:
        listing = await client.request("checkpoints.list", {"session": "job"})
    newest_step4 = [c for c in listing["checkpoints"] if c["kind"] == "step" and c["step"] == 4][0]
    assert newest_step4["parent"] == steps[3]["id"] or newest_step4["parent"] != steps[4]["parent"]


async def test_fork_from_step_2_leaves_the_original_unchanged(daemon, fake_model):
    steps = await _run_task(daemon, fake_model, "orig")
    original = _log(daemon.home, "orig").read_bytes()
    calls = len(fake_model.requests)
    fake_model.enqueue(tool_use("write_file", {"path": "summary.txt", "content": "two steps were enough"}),
                       text("Wrote a summary instead."))
    async with daemon.client() as client:
        fork = await client.request("checkpoints.fork", {"id": steps[2]["id"], "session": "orig-b"})
        assert fork["session"] == "orig-b" and fork["parent"] == steps[2]["id"] and fork["parentSession"] == "orig"
        final = await _chat(client, "stop after two steps and write a summary instead", "orig-b")
        assert final["text"] == "Wrote a summary instead."
        listing = await client.request("checkpoints.list", {"session": "orig-b"})
    assert _log(daemon.home, "orig").read_bytes() == original  # byte-identical history
    assert len(fake_model.requests) == calls + 2  # the fork diverged at once: the model answers it
    seen = json.dumps(fake_model.requests[calls]["messages"])
    assert '"path": "out/step2.txt"' in seen and '"path": "out/step3.txt"' not in seen
    fork_log = _records(_log(daemon.home, "orig-b"))
    branch = [r for r in fork_log if r["kind"] == "event" and r.get("name") == "branch"]
    assert branch and branch[0]["how"] == "fork" and branch[0]["checkpoint"] == steps[2]["id"]
    assert branch[0]["parent_session"] == "orig"
    assert (daemon.workspace / "summary.txt").read_text() == "two steps were enough"
    first = min(listing["checkpoints"], key=lambda c: c["time"])
    assert first["parent"] == steps[2]["id"]  # the fork's lineage records its parent
    assert any(e["type"] == "replay" and e["mode"] == "live" for e in _trace(daemon.home, "orig-b"))


async def test_resent_message_replays_without_model_or_side_effects(daemon, fake_model):
    fake_model.enqueue(text("Hello there."))
    fake_model.enqueue(tool_use("message", {"text": "a note sent on the side"}),
                       tool_use("write_file", {"path": "report.txt", "content": "report v1"}),
                       text("Sent the note and wrote the report."))
    async with daemon.client() as client:
        await _chat(client, "hello", "rt")
        await _chat(client, "send the note and write the report", "rt")
        listing = await client.request("checkpoints.list", {"session": "rt"})
        target = [c for c in listing["checkpoints"]
                  if c["kind"] == "turn" and "send the note" in c["description"]][0]
        # a message went out after that point: the restore lists it and changes nothing unconfirmed
        refused = await _idle_request(client, "checkpoints.restore", {"id": target["id"], "mode": "conversation"})
        assert refused["restored"] is False
        assert [e["tool"] for e in refused["irreversible"]] == ["message"]
        assert "send the note" in _log(daemon.home, "rt").read_text()
        # the CLI shows them and asks for --yes
        asked = await asyncio.to_thread(daemon.cli, "checkpoints", "restore", target["id"], "--mode", "conversation")
        assert asked.returncode == 1 and "message sent: text=a note sent on the side" in asked.stdout
        assert asked.stderr.strip() == "clawgate: run again with --yes to restore anyway"
        done = await asyncio.to_thread(daemon.cli, "checkpoints", "restore", target["id"], "--mode", "conversation",
                                       "--yes", "--json")
        assert done.returncode == 0 and json.loads(done.stdout)["restored"] is True
        report = (daemon.workspace / "report.txt").stat()
        audit_before = len(_audit(daemon.home))
        calls = len(fake_model.requests)

        again = await _chat(client, "send the note and write the report", "rt")
        assert again["text"] == "Sent the note and wrote the report."
        assert len(fake_model.requests) == calls  # replayed turns never reach the model
        new_audit = _audit(daemon.home)[audit_before:]
        assert {(a["tool"], a["status"]) for a in new_audit} == {("message", "replayed"), ("write_file", "replayed")}
        assert (daemon.workspace / "report.txt").stat().st_mtime_ns == report.st_mtime_ns
        modes = [(e.get("what"), e["mode"]) for e in _trace(daemon.home, "rt") if e["type"] == "replay"]
        assert ("model", "replayed") in modes and ("tool", "replayed") in modes

        # the tape is used up: the next message is answered live
        fake_model.enqueue(text("Live again."))
        live = await _chat(client, "anything else?", "rt")
    assert live["text"] == "Live again." and len(fake_model.requests) == calls + 1


async def test_corrupt_and_newer_checkpoints_are_refused(daemon_factory, fake_model):
    daemon = daemon_factory()
    fake_model.enqueue(text("hi"))
    async with daemon.client() as client:
        await _chat(client, "hello", "c")
        cp = (await client.request("checkpoints.list", {"session": "c"}))["checkpoints"][0]
    folder = daemon.home / "state/checkpoints"
    body = rows.read(folder, cp["id"])
    body["schema"] = 99
    rows.write(folder, cp["id"], body)
    async with daemon.client() as client:
        try:
            await _idle_request(client, "checkpoints.restore", {"id": cp["id"], "confirm": True})
        except Exception as exc:  # GatewayError
            assert "schema version 99" in str(getattr(exc, "message", exc)) and "upgrade" in str(getattr(exc, "message", exc))
        else:
            raise AssertionError("a newer-schema checkpoint was loaded")
        listing = await client.request("checkpoints.list", {"session": "c"})
        assert any("schema version 99" in p for p in listing["problems"])
    daemon.kill()
    rows.write(folder, cp["id"], json.dumps(body).replace('"kind"', '"kimd"', 1)[:-5].encode())
    proc = daemon.cli("checkpoints", "show", cp["id"])
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "corrupt" in lines[0] and "not loaded" in lines[0] and "Traceback" not in proc.stderr


def test_undo_on_telegram_goes_back_steps(tg_daemon, telegram, fake_model) -> None:
    daemon = tg_daemon()
    _task_script(fake_model, steps=3)
    telegram.inject_message(CHAT, "write the files")
    telegram.wait_for(lambda: "All five files are written." in replies(telegram, CHAT), timeout=60)
    def undo() -> str | None:  # right after an answer the chat may still be busy with its bookkeeping for a moment
        count = len(replies(telegram, CHAT))
        telegram.inject_message(CHAT, "/undo 2")
        telegram.wait_for(lambda: len(replies(telegram, CHAT)) > count)
        last = replies(telegram, CHAT)[-1]
        return None if last.startswith("Cannot undo: I'm still working") else last
    reply = wait_until(undo, "/undo to find the chat idle", interval=0.1)
    assert reply.startswith("Went back 2 step(s): step 1/3 done"), reply
    ws = daemon.guest_workspace(f"telegram:{CHAT}")  # no owner configured: the chat is a guest's, in its own workspace
    assert not (daemon.workspace / "out").exists()
    assert (ws / "out/step1.txt").exists() and not (ws / "out/step2.txt").exists()
    assert not (ws / "out/step3.txt").exists()
    task = json.loads(next((daemon.home / "state/tasks").glob("t_*.json")).read_text())
    assert [s["status"] for s in task["steps"]] == ["done", "pending", "pending"] and task["status"] == "in_progress"


async def test_a_corrupt_checkpoint_database_is_reported_offline_and_set_aside_by_the_daemon(daemon_factory,
                                                                                             fake_model):
    """Offline, `clawgate checkpoints list` names the problem in one line and leaves the file alone
    (it is the daemon's state); the daemon, at start, sets it aside and starts a fresh one."""
    daemon = daemon_factory()
    fake_model.enqueue(text("hi"))
    async with daemon.client() as client:
        await _chat(client, "hello", "c")
    daemon.kill()
    folder = daemon.home / "state/checkpoints"
    for extra in ("checkpoints.db-wal", "checkpoints.db-shm"):
        (folder / extra).unlink(missing_ok=True)
    (folder / "checkpoints.db").write_bytes(b"this is not a database " * 200)
    proc = daemon.cli("checkpoints", "list")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert "corrupt" in line and "checkpoints.db" in line
    assert (folder / "checkpoints.db").read_bytes().startswith(b"this is not a database")  # left alone
    daemon.start()
    fake_model.enqueue(text("again"))
    async with daemon.client() as client:
        await _chat(client, "hello again", "c")
        listing = await client.request("checkpoints.list", {"session": "c"})
    assert len(listing["checkpoints"]) == 1 and listing["problems"] == []  # a fresh database, working
    assert [p.name for p in folder.glob("checkpoints.db.corrupt-*")]  # the damaged one kept beside, not deleted


APPEND = ["python3", "-c", "open('log.txt','a').write('exec ran\\n'); open('made.txt','w').write('by exec')"]


async def _command_run(daemon: Any, fake_model: Any, session: str) -> tuple[Any, str]:
    """A run whose command appends to log.txt and creates made.txt, then a file write; restored with files
    to the checkpoint before it (the command is an irreversible effect: confirmed)."""
    (daemon.workspace / "log.txt").write_text("start\n")
    fake_model.enqueue(tool_use("exec", {"argv": APPEND}),
                       tool_use("write_file", {"path": "notes.txt", "content": "notes"}),
                       text("Ran the command and wrote notes.txt."))
    async with daemon.client() as client:
        first = await _chat(client, "run it and write the notes", session)
        assert first["text"] == "Ran the command and wrote notes.txt."
        listing = await client.request("checkpoints.list", {"session": session})
        [target] = [c for c in listing["checkpoints"] if c["kind"] == "turn" and "run it" in c["description"]]
        result = await _idle_request(client, "checkpoints.restore", {"id": target["id"], "mode": "both", "confirm": True})
    assert result["restored"] is True and [e["what"] for e in result["irreversible"]] == ["command run"]
    ws = daemon.workspace
    assert (ws / "log.txt").read_text() == "start\n" and not (ws / "made.txt").exists() and not (ws / "notes.txt").exists()
    return client, target["id"]


async def test_restore_both_then_replay_puts_back_what_a_command_changed(daemon_factory, fake_model) -> None:
    daemon = daemon_factory(ALLOW_PYTHON)
    await _command_run(daemon, fake_model, "cmd")
    calls, audit_before = len(fake_model.requests), len(_audit(daemon.home))
    async with daemon.client() as client:
        again = await _chat(client, "run it and write the notes", "cmd")
    assert again["text"] == "Ran the command and wrote notes.txt." and len(fake_model.requests) == calls
    # the workspace is exactly what the transcript says: the command's append once (not run again, not lost),
    # its new file, and the rewritten note
    ws = daemon.workspace
    assert (ws / "log.txt").read_text() == "start\nexec ran\n" and (ws / "made.txt").read_text() == "by exec"
    assert (ws / "notes.txt").read_text() == "notes"
    assert {(a["tool"], a["status"]) for a in _audit(daemon.home)[audit_before:]} == {("exec", "replayed"), ("write_file", "ok")}
    [replayed] = [e for e in _trace(daemon.home, "cmd") if e["type"] == "replay" and e.get("tool") == "exec"]
    assert sorted(replayed["effects"]) == ["log.txt", "made.txt"]


async def test_a_command_without_a_record_ends_the_replay_before_its_turn(daemon_factory, fake_model) -> None:
    daemon = daemon_factory(ALLOW_PYTHON)
    await _command_run(daemon, fake_model, "cmd")
    for record in (daemon.home / "state/checkpoints/effects").glob("*.json"):
        record.unlink()  # as a branch recorded before commands' changes were kept
    calls = len(fake_model.requests)
    fake_model.enqueue(text("I will not run the command again; tell me if you want it."))
    async with daemon.client() as client:
        again = await _chat(client, "run it and write the notes", "cmd")
    assert again["text"] == "I will not run the command again; tell me if you want it."
    assert len(fake_model.requests) == calls + 1  # the model answered that turn live
    assert (daemon.workspace / "log.txt").read_text() == "start\n" and not (daemon.workspace / "made.txt").exists()
    assert any(e["type"] == "replay" and e.get("reason") == "command effects not recorded"
               for e in _trace(daemon.home, "cmd"))
