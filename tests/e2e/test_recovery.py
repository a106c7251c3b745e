"""Recovery pieces: task resume after a restart, poison guards, duplicates, corrupt state."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

from clawgate.agent.recovery.restart import resume_tasks
from clawgate.agent.session import SessionManager
from clawgate.agent.tasks.store import Step, Task, TaskStore
from clawgate.agent.bus import SqliteBus
from clawgate.agent.core.statedb import open_state_db
from clawgate.agent.bus import InboundMessage
from tests.fakes.anthropic_api import last_user_block, text
from tests.harness import ALLOW_PYTHON
from tests.scripted_job import ScriptedJob
from tests.waiting import wait_until_async


def _bus(tmp_path: Path) -> MessageBus:
    return SqliteBus.open(tmp_path / "db.sqlite", fsync=False)


def _task(store: TaskStore, session: str = "s") -> Task:
    task = Task(goal="ship it", session_key=session, status="in_progress",
                steps=[Step("a", "done", "checked"), Step("b", "in_progress"), Step("c")])
    store.save(task)
    return task


def test_resume_queues_a_continuation_and_tells_the_user(tmp_path):
    tasks, sessions, bus = TaskStore(tmp_path / "tasks"), SessionManager(tmp_path / "sessions"), _bus(tmp_path)
    sessions.get("s").append("user", text="start", channel="telegram", chat_id="42")
    task = _task(tasks)
    assert resume_tasks(tasks, sessions, bus, max_resumes=3) == [task.id]
    [inbound] = list(bus.unanswered())
    assert inbound.session_key == "s" and "step 2/3" in inbound.text
    assert inbound.metadata["deliver"] == {"channel": "telegram", "chat_id": "42"}
    [notice] = list(bus.undelivered())
    assert notice.channel == "telegram" and notice.chat_id == "42"
    assert notice.text.startswith("Resumed after a restart: step 2/3")


def test_resume_skips_sessions_with_a_replayed_message(tmp_path):
    tasks, sessions, bus = TaskStore(tmp_path / "tasks"), SessionManager(tmp_path / "sessions"), _bus(tmp_path)
    _task(tasks)
    bus.publish_inbound(InboundMessage(channel="gateway", chat_id="s", sender_id="u", session_key="s", text="hi"))
    assert resume_tasks(tasks, sessions, bus, max_resumes=3) == []


def test_task_interrupted_again_and_again_is_failed_and_reported(tmp_path):
    tasks, sessions, bus = TaskStore(tmp_path / "tasks"), SessionManager(tmp_path / "sessions"), _bus(tmp_path)
    sessions.get("s").append("user", text="start", channel="gateway", chat_id="s")
    task = _task(tasks)
    for _ in range(2):
        assert resume_tasks(tasks, sessions, bus, max_resumes=2) == [task.id]
        for msg in list(bus.unanswered()):
            bus.settle(msg.id)  # each continuation was cut short by another crash
    assert resume_tasks(tasks, sessions, bus, max_resumes=2) == []
    reloaded = TaskStore(tmp_path / "tasks").get(task.id)
    assert reloaded.status == "failed" and "restarts" in reloaded.result
    assert any("stopped after repeated restarts" in m.text for m in bus.undelivered())


def test_corrupt_task_file_is_moved_aside_and_others_load(tmp_path, caplog):
    store = TaskStore(tmp_path)
    good = _task(store)
    (tmp_path / "t_broken.json").write_text('{"goal": "x", "steps": [')
    fresh = TaskStore(tmp_path)
    assert [t.id for t in fresh.all()] == [good.id]
    assert list(tmp_path.glob("t_broken.corrupt-*"))
    assert "corrupt" in caplog.text


def test_task_writes_are_atomic_files(tmp_path):
    store = TaskStore(tmp_path)
    task = _task(store)
    assert json.loads((tmp_path / f"{task.id}.json").read_text())["goal"] == "ship it"
    assert not list(tmp_path.glob(".*.tmp"))
    assert (tmp_path / f"{task.id}.json").stat().st_mode & 0o077 == 0


def test_corrupt_database_is_moved_aside_not_fatal(tmp_path, caplog):
    path = tmp_path / "clawgate.db"
    path.write_bytes(b"this is not a database" * 100)
    bus = SqliteBus.open(path, fsync=False)
    assert bus.counts() == {"inboxOpen": 0, "outboxPending": 0}
    assert list(tmp_path.glob("clawgate.db.corrupt-*"))
    assert "corrupt" in caplog.text


def test_duplicate_inbound_ids_are_accepted_once(tmp_path):
    bus = _bus(tmp_path)
    msg = InboundMessage(id="telegram:1", channel="telegram", chat_id="1", sender_id="1", session_key="k", text="x")
    assert bus.publish_inbound(msg) is True
    assert bus.publish_inbound(InboundMessage(**{**msg.to_dict()})) is False
    assert bus.inbound_depth == 1


async def test_same_idempotency_key_twice_is_answered_once_even_across_restart(daemon, fake_model):
    async with daemon.client() as client:
        first = await client.request("chat.send", {"session": "d", "text": "once", "idempotencyKey": "k1"})
        async for frame in client.events():
            if frame["event"] == "chat" and frame["payload"]["state"] == "final":
                break
        second = await client.request("chat.send", {"session": "d", "text": "once", "idempotencyKey": "k1"})
    # seq: the number of the session's last reply when the retry came (the first answer's)
    assert first["status"] == "accepted" and second == {"runId": first["runId"], "status": "duplicate", "seq": 1}
    daemon.restart()
    async with daemon.client() as client:
        third = await client.request("chat.send", {"session": "d", "text": "once", "idempotencyKey": "k1"})
        history = await client.request("chat.history", {"session": "d"})
    assert third["status"] == "duplicate"
    assert [m["text"] for m in history["messages"] if m["role"] == "user"] == ["once"]
    assert sum(1 for body in fake_model.requests if last_user_block(body) == "once") == 1


async def test_interrupted_task_resumes_on_start_and_user_is_told(daemon_factory, fake_model):
    job = ScriptedJob(steps=3)
    original = job.decide

    def decide(messages):
        reply = original(messages)
        said = last_user_block({"messages": [m for m in messages if m["role"] == "user"
                                             and any(b.get("type") == "text" for b in m["content"])]})
        # In the first run, stop talking after step 1 is complete (the task stays in progress).
        if said == "run the job" and reply.tool_calls and reply.tool_calls[0]["input"].get("argv") and "step 2" in str(reply.tool_calls[0]["input"]):
            return text("Step 1 is done; I will continue with step 2.")
        return reply

    job.decide = decide
    fake_model.responder = job
    daemon = daemon_factory({"CLAWGATE_AGENT__STREAM": "false", **ALLOW_PYTHON})
    async with daemon.client() as client:
        final = await client.chat("run the job", session="job")
    assert "continue with step 2" in final["text"]
    daemon.kill()
    daemon.start()
    async with daemon.client(subscribe=["job"]) as client:
        seen: list[str] = []
        async for frame in client.events():
            if frame["event"] == "chat" and frame["payload"]["state"] == "final":
                seen.append(frame["payload"]["text"])
                if "done and verified" in seen[-1]:
                    break
        history = await client.request("chat.history", {"session": "job"})
    notices = [m["text"] for m in history["messages"] if m.get("name") == "notice"]
    assert notices == ["Resumed after a restart: step 2/3 — write the job log"]
    db = sqlite3.connect(daemon.home / "state/clawgate.db")
    bodies = [json.loads(b) for (b,) in db.execute("SELECT body FROM outbox WHERE status='delivered'")]
    assert [b["text"] for b in bodies if b["kind"] == "notice"] == notices
    assert (daemon.workspace / "log.txt").read_text().splitlines() == ["step 1", "step 2", "step 3"]
    assert "resuming 1 interrupted task" in daemon.log_text()


async def test_message_that_keeps_crashing_the_daemon_is_set_aside(daemon_factory, fake_model):
    started = []

    def hang(body):
        started.append(time.monotonic())
        return text("never seen", delay=30)

    fake_model.responder = hang
    daemon = daemon_factory({"CLAWGATE_AGENT__MAX_MESSAGE_ATTEMPTS": "2", "CLAWGATE_AGENT__STREAM": "false"})
    async with daemon.client() as client:
        await client.request("chat.send", {"session": "p", "text": "poison"})
    for n in (1, 2):
        await wait_until_async(lambda: len(started) >= n, f"model call {n} to start")
        daemon.kill()
        daemon.start()
    async with daemon.client() as client:
        async def set_aside() -> bool:
            history = await client.request("chat.history", {"session": "p"})
            return any(m["role"] == "event" and m["name"] == "poison_message" for m in history["messages"])
        await wait_until_async(set_aside, "the poison message to be set aside", interval=0.05)
    db = sqlite3.connect(daemon.home / "state/clawgate.db")
    [(body,)] = db.execute("SELECT body FROM outbox").fetchall()
    assert "set aside" in json.loads(body)["text"]
    assert len(started) == 2


def test_tracker_counts_turns_and_reminds_a_stale_plan(tmp_path):
    from clawgate.agent.core.events import EventHub
    from clawgate.agent.recovery.restart import TaskTracker
    from clawgate.agent.tools import ToolContext, ToolOutcome
    from clawgate.workspace.guard import WorkspaceGuard

    tasks = TaskStore(tmp_path / "tasks")
    task = _task(tasks)
    hub = EventHub()
    tracker = TaskTracker(tasks, remind_after=3, events=hub)
    hub.subscribe(tracker.on_event)
    ctx = ToolContext(session_key="s", channel="c", chat_id="c", sender_id="u", run_id="r",
                      workspace=WorkspaceGuard(tmp_path / "ws"))
    reminded = []
    for _ in range(5):
        hub.emit("turn_end", session="s")
        outcome = ToolOutcome("listed")
        tracker.remind({"name": "list_dir", "input": {}}, outcome, ctx)
        reminded.append("[reminder]" in outcome.content)
    assert reminded == [False, False, True, True, True]  # the 3rd turn without an update reminds
    assert TaskStore(tmp_path / "tasks").get(task.id).turns == 5
    task.notes.append("progress")
    tasks.save(task)  # the plan was updated: the count starts again
    hub.emit("turn_end", session="s")
    outcome = ToolOutcome("listed")
    tracker.remind({"name": "list_dir", "input": {}}, outcome, ctx)
    assert "[reminder]" not in outcome.content


def test_old_finished_queue_rows_are_pruned_and_open_ones_kept(tmp_path):
    from clawgate.agent.bus import OutboundMessage

    db = open_state_db(tmp_path / "db.sqlite", fsync=False)
    bus = SqliteBus(db)
    old = InboundMessage(id="old", channel="gateway", chat_id="s", sender_id="u", session_key="s", text="a")
    open_msg = InboundMessage(id="open", channel="gateway", chat_id="s", sender_id="u", session_key="s", text="b")
    bus.publish_inbound(old)
    bus.publish_inbound(open_msg)
    bus.publish_outbound(OutboundMessage(id="r-old", channel="gateway", chat_id="s", text="x"), answers="old")
    bus.mark_delivered("r-old")
    bus.publish_outbound(OutboundMessage(id="r-pending", channel="gateway", chat_id="s", text="y"))
    db.execute("UPDATE inbox SET answered_at = answered_at - 40*86400, accepted_at = accepted_at - 40*86400")
    db.execute("UPDATE outbox SET created_at = created_at - 40*86400")
    assert bus.prune(keep_days=30) == 2
    assert [row[0] for row in db.execute("SELECT id FROM inbox")] == ["open"] and bus.is_unanswered("open")
    assert bus.delivery_status("r-old") is None and bus.delivery_status("r-pending") == "pending"
