"""Checkpoints in-process on real files: creation, the workspace store, retention, undo, last good."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from clawgate.agent.checkpoints import CheckpointRefused, CheckpointService
from clawgate.agent.commands import COMMANDS, CommandRouter
from clawgate.agent.core.events import EventHub
from clawgate.agent.session import Session, SessionManager
from clawgate.agent.tasks.store import Step, Task, TaskStore
from clawgate.channels.kit.commands import parse_command
from clawgate.config.schema import CheckpointSettings
from tests import checkpoint_rows as rows


class Rig:
    """A service on a temp home, and a way to play the records a run appends."""

    def __init__(self, home: Path, **settings: Any) -> None:
        self.home = home
        self.workspace = home / "workspace"
        self.workspace.mkdir(parents=True)
        self.sessions = SessionManager(home / "state/sessions", fsync=False)
        self.tasks = TaskStore(home / "state/tasks", fsync=False)
        self.events = EventHub()
        self.seen: list[dict[str, Any]] = []
        self.events.subscribe(self.seen.append)
        self.service = CheckpointService(
            folder=home / "state/checkpoints", workspace=self.workspace, sessions=self.sessions, tasks=self.tasks,
            events=self.events, settings=CheckpointSettings(**settings), version="test", busy=lambda key: False,
            invalidate=lambda key: None, fsync=False)
        self.sessions.observers += [self.service.tapes.on_append, self.service.on_append]
        self._ids = 0

    def session(self, key: str) -> Session:
        return self.sessions.get(key)

    def user(self, key: str, text: str) -> None:
        self.session(key).append("user", text=text, inbound_id=f"in{time.time_ns()}", channel="test", chat_id="1")

    def call(self, key: str, name: str, args: dict[str, Any], result: str, *, effect: Any = None) -> None:
        """One model turn with one tool call, run: assistant, intent, (the effect), done, results."""
        self._ids += 1
        call_id = f"toolu_{self._ids}"
        session = self.session(key)
        session.append("assistant", content=[{"type": "tool_use", "id": call_id, "name": name, "input": args}])
        session.append("tool_intent", id=call_id, name=name, input=args)
        if effect is not None:
            effect()
        session.append("tool_done", id=call_id, content=result, is_error=False, status="ok")
        session.append("tool_results", results=[{"tool_use_id": call_id, "content": result}])

    def plan(self, key: str, steps: int) -> Task:
        task = Task(goal="write files", session_key=key, status="in_progress",
                    steps=[Step(text=f"write f{i}.txt") for i in range(1, steps + 1)])
        self.call(key, "task", {"action": "plan", "goal": task.goal}, "created", effect=lambda: self.tasks.save(task))
        return task

    def step(self, key: str, task: Task, i: int) -> None:
        self.call(key, "write_file", {"path": f"f{i}.txt", "content": str(i)}, "created",
                  effect=lambda: (self.workspace / f"f{i}.txt").write_text(str(i)))

        def complete() -> None:
            task.steps[i - 1].status, task.steps[i - 1].verification = "done", f"read f{i}.txt back"
            self.tasks.save(task)
        self.call(key, "task", {"action": "complete", "step": i, "verification": "read back"}, "done", effect=complete)

    def steps_of(self, key: str) -> dict[int, Any]:
        return {c.step: c for c in self.service.store.all(key) if c.kind == "step"}


def test_step_boundaries_turns_and_intervals_make_checkpoints(tmp_path: Path) -> None:
    rig = Rig(tmp_path, every_events=6)
    rig.user("s", "do it")
    task = rig.plan("s", 3)
    for i in (1, 2, 3):
        rig.step("s", task, i)
    kinds = [c.kind for c in rig.service.store.all("s")]
    assert kinds.count("turn") == 1 and kinds.count("step") == 3 and kinds.count("auto") >= 1
    steps = rig.steps_of("s")
    assert all(steps[i].verified and steps[i].task == task.id for i in (1, 2, 3))
    assert steps[2].snapshot["task"]["steps"][1]["status"] == "done"
    assert steps[2].snapshot["task"]["steps"][2]["status"] == "pending"
    lineage = rig.service.store.lineage("s")
    assert [c.id for c in lineage][0] == steps[3].id and lineage[-1].kind == "turn" and lineage[-1].parent is None
    raw = rows.read(tmp_path / "state/checkpoints", steps[1].id)  # the stored JSON, as written
    assert raw["checksum"].startswith("sha256:") and raw["schema"] == 1 and raw["version"] == "test"


def test_workspace_comes_back_created_removed_deleted_restored(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    (rig.workspace / "keep.txt").write_text("keep")
    (rig.workspace / "docs").mkdir()
    (rig.workspace / "docs/old.md").write_text("old")
    tree = rig.service.workspace.snapshot()
    (rig.workspace / "docs/old.md").unlink()
    (rig.workspace / "keep.txt").write_text("changed")
    (rig.workspace / "new/deep").mkdir(parents=True)
    (rig.workspace / "new/deep/x.txt").write_text("x")
    changes = rig.service.workspace.restore(tree)
    assert sorted(changes.removed) == ["new/deep/x.txt"]
    assert sorted(changes.written) == ["docs/old.md", "keep.txt"]
    assert (rig.workspace / "keep.txt").read_text() == "keep" and (rig.workspace / "docs/old.md").read_text() == "old"
    assert not (rig.workspace / "new").exists()  # folders created after the point go too
    # the store lives outside the workspace, where the agent's file tools cannot reach it
    assert not str(rig.service.workspace.objects).startswith(str(rig.workspace))


def test_corrupt_and_newer_schema_refused_with_one_line(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    rig.user("s", "hi")
    cp = rig.service.store.all("s")[0]
    folder = tmp_path / "state/checkpoints"
    body = rows.read(folder, cp.id)
    body["description"] = "tampered"
    rows.write(folder, cp.id, body)
    with pytest.raises(CheckpointRefused) as corrupt:
        rig.service.restore(cp.id, confirm=True)
    assert "corrupt (checksum mismatch)" in corrupt.value.message and "\n" not in corrupt.value.message
    body["schema"] = 7
    rows.write(folder, cp.id, body)
    with pytest.raises(CheckpointRefused) as newer:
        rig.service.show(cp.id)
    assert "schema version 7" in newer.value.message and "upgrade clawgate" in newer.value.message
    assert rig.service.list(session="s")["problems"] == [newer.value.message]


def test_retention_prunes_old_ones_but_keeps_what_a_branch_needs(tmp_path: Path) -> None:
    rig = Rig(tmp_path, keep_count=5)
    for i in range(20):
        (rig.workspace / f"n{i}.txt").write_text(f"only in snapshot {i}")
        rig.user("a", f"message {i}")
        rig.session("a").append("assistant", content=[{"type": "text", "text": f"answer {i}"}])
    ordered = rig.service.store.all("a")
    base = ordered[2]  # an old checkpoint a fork stands on
    fork = rig.service.fork(base.id, "a-fork")
    removed = rig.service.prune()
    left = {c.id for c in rig.service.store.all("a")}
    assert len(removed) == 20 - 5 - 1
    assert base.id in left and ordered[-1].id in left and ordered[0].id not in left
    assert rig.service.store.head("a-fork") == base.id
    # the kept snapshot's files are still in the store (garbage collection spared them)
    tree = rig.service.workspace.tree(base.snapshot["workspace"])
    assert "n2.txt" in tree and "n3.txt" not in tree
    rig.service.workspace.restore(base.snapshot["workspace"])
    assert (rig.workspace / "n2.txt").read_text() == "only in snapshot 2" and not (rig.workspace / "n10.txt").exists()
    # age: everything old goes, except what a live branch stands on
    gone = rig.service.store.prune(keep_count=1000, keep_days=1, needed=rig.service.needed(), now=time.time() + 3 * 86400)
    assert base.id not in gone and ordered[-1].id not in gone and set(gone) == left - {base.id, ordered[-1].id}
    assert fork["session"] == "a-fork"


def test_prunes_read_each_log_once_and_still_see_branches_made_since(tmp_path: Path, monkeypatch) -> None:
    rig = Rig(tmp_path, keep_count=3)
    for key in ("a", "b", "c"):
        for i in range(4):
            rig.user(key, f"{key} {i}")
    reads: list[str] = []
    real = rig.service._read_branch_points
    monkeypatch.setattr(rig.service, "_read_branch_points", lambda key: reads.append(key) or real(key))
    rig.service.prune("a")
    rig.service.prune("b")
    rig.service.prune()
    assert sorted(reads) == ["a", "b", "c"]  # once per session, not once per session per prune
    # A rewind made after the logs were read: its branch point is kept once HEAD has moved on.
    point = rig.service.store.all("a")[-2]  # the oldest one left
    rig.service.restore(point.id, "conversation", confirm=True)
    for i in range(6):
        rig.user("a", f"after the rewind {i}")
    assert rig.service.store.head("a") != point.id
    rig.service.prune("a")
    left = {c.id for c in rig.service.store.all("a")}
    assert point.id in left and len(left) == 3 + 1
    assert sorted(reads) == ["a", "a", "b", "c"]  # only the rewound log was read again
    # A fork from an old checkpoint: the new session's HEAD stands on it.
    fork = rig.service.fork(point.id, "a-fork")
    rig.service.prune()
    assert point.id in {c.id for c in rig.service.store.all("a")} and fork["parent"] == point.id


def test_undo_goes_back_n_steps_and_asks_before_irreversible_effects(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    router = CommandRouter(agent_name="t", sessions=None, tasks=None, status=None,  # type: ignore[arg-type]
                           checkpoints=rig.service)
    assert "undo" in dict(COMMANDS)  # Telegram's command list is this table
    assert parse_command("/undo 2", dict(COMMANDS), "b") == ("undo", "2")
    assert "no completed task step" in (router.handle("undo", "s") or "")
    rig.user("s", "do it")
    task = rig.plan("s", 3)
    for i in (1, 2, 3):
        rig.step("s", task, i)
    rig.call("s", "message", {"text": "done!"}, "sent")
    reply = router.handle("undo", "s", "2") or ""
    assert "cannot undo" in reply and "message sent: text=done!" in reply and "/undo 2 confirm" in reply
    assert (rig.workspace / "f3.txt").exists()
    reply = router.handle("undo", "s", "2 confirm") or ""
    assert reply.startswith("Went back 2 step(s): step 1/3 done") and "2 file(s) restored" in reply
    assert (rig.workspace / "f1.txt").exists() and not (rig.workspace / "f2.txt").exists()
    saved = rig.tasks.get(task.id)
    assert saved is not None and [s.status for s in saved.steps] == ["done", "pending", "pending"]
    assert "only 1 step(s)" in (router.handle("undo", "s", "5") or "")
    assert "Usage" in (router.handle("undo", "s", "two") or "")


def test_last_good_and_the_drift_rewind(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    rig.user("s", "do it")
    task = rig.plan("s", 3)
    assert rig.service.last_good("s", task.id) is None  # no verified step yet
    rig.step("s", task, 1)
    rig.step("s", task, 2)
    rig.call("s", "write_file", {"path": "drift.txt", "content": "off track"}, "created",
             effect=lambda: (rig.workspace / "drift.txt").write_text("off track"))
    (rig.workspace / "other.txt").write_text("another session's file")  # not this session's write
    good = rig.service.last_good("s", task.id)
    assert good is not None and good.id == rig.steps_of("s")[2].id
    assert rig.service.last_good("s", "t_other") is None
    paths = rig.service.written_after(good)
    assert paths == ["drift.txt"] and rig.service.drift_changes(good, paths) == {"written": [], "removed": ["drift.txt"]}
    carried = {"kind": "event", "name": "drift_correction", "step": "reflect", "carried": True}
    result = rig.service.rewind_for_drift(good.id, paths=paths, fields={"drift": {"why": "loop"}}, after=[carried])
    assert result["files"] == {"written": [], "removed": ["drift.txt"]}
    assert not (rig.workspace / "drift.txt").exists() and (rig.workspace / "other.txt").exists()
    records = rig.sessions.get("s").records
    assert records[-2]["name"] == "branch" and records[-2]["how"] == "drift" and records[-2]["tape"] is None
    assert records[-2]["drift"] == {"why": "loop"} and records[-1]["step"] == "reflect"
    assert [r["seq"] for r in records[-2:]] == [good.seq + 1, good.seq + 2]
    assert rig.service.store.head("s") == good.id


def test_every_model_turn_that_ran_tools_gets_a_checkpoint(tmp_path: Path) -> None:
    rig = Rig(tmp_path)  # every_turns = 1, the default
    rig.user("s", "do it")
    for i in range(3):
        rig.call("s", "read_file", {"path": f"r{i}.txt"}, "x")
    task = rig.plan("s", 1)
    rig.step("s", task, 1)
    kinds = [(c.kind, c.description) for c in rig.service.store.all("s")]
    assert kinds == [("turn", "before message: do it"), *[("auto", f"after model turn {n}") for n in range(1, 6)],
                     ("step", "step 1/1 done: write f1.txt")]
    rig.user("s", "again")
    rig.call("s", "read_file", {"path": "r.txt"}, "x")  # the count starts again with each message
    assert rig.service.store.all("s")[-1].description == "after model turn 1"
    sparse = Rig(tmp_path / "sparse", every_turns=2)
    sparse.user("s", "do it")
    for i in range(5):
        sparse.call("s", "read_file", {"path": f"r{i}.txt"}, "x")
    assert [c.description for c in sparse.service.store.all("s")][1:] == ["after model turn 2", "after model turn 4"]


def test_each_checkpoint_counts_the_files_changed_since_the_one_before(tmp_path: Path) -> None:
    rig = Rig(tmp_path, every_turns=0)
    rig.user("s", "do it")
    task = rig.plan("s", 2)
    rig.step("s", task, 1)
    rig.step("s", task, 2)
    first = rig.service.store.all("s")
    turn = [c for c in first if c.kind == "turn"][0]
    assert turn.summary()["filesChanged"] is None  # the first of its lineage: nothing to compare with
    steps = rig.steps_of("s")
    assert steps[1].summary()["filesChanged"] == 1 and steps[1].snapshot["changed"] == ["f1.txt"]
    assert steps[2].snapshot["changed"] == ["f2.txt"]
    assert rig.service.show(steps[2].id)["changedFiles"] == ["f2.txt"]
    # a restarted service reads the previous tree once from the head checkpoint
    again = CheckpointService(folder=tmp_path / "state/checkpoints", workspace=rig.workspace, sessions=rig.sessions,
                              tasks=rig.tasks, events=rig.events, settings=CheckpointSettings(), version="test",
                              busy=lambda key: False, invalidate=lambda key: None, fsync=False)
    rig.sessions.observers = [again.tapes.on_append, again.on_append]
    (rig.workspace / "f1.txt").unlink()
    rig.user("s", "next")
    [newest] = [c for c in again.store.all("s") if c.description.endswith("next")]
    assert newest.snapshot["changed"] == ["f1.txt"]


def test_a_rewind_repeated_after_a_crash_reuses_the_abandoned_name(tmp_path: Path) -> None:
    """A crash after the old log got its second name and before the new log replaced it: doing it
    again keeps one abandoned branch, and the live log never went missing."""
    rig = Rig(tmp_path)
    rig.user("s", "do it")
    task = rig.plan("s", 2)
    rig.step("s", task, 1)
    good = rig.steps_of("s")[1]
    live = tmp_path / "state/sessions/s.jsonl"
    before = live.read_bytes()
    import os
    from clawgate.agent.checkpoints import branches
    os.link(live, branches.aside_name(live))  # the first half of a rewind, then "the crash"
    rig.sessions.forget("s")
    rig.service.rewind_for_drift(good.id, paths=[], fields={}, after=[])
    aside = list((tmp_path / "state/sessions").glob("s.*.abandoned"))
    assert len(aside) == 1 and aside[0].read_bytes() == before and live.read_bytes() != before


def test_a_reset_session_starts_a_new_lineage(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    rig.user("s", "first conversation")
    old = rig.service.store.head("s")
    rig.sessions.reset("s")
    rig.user("s", "second conversation")
    newest = rig.service.store.lineage("s")
    assert old and newest[0].id != old and newest[0].parent is None


def test_checkpoint_files_of_earlier_versions_move_into_the_database(tmp_path: Path) -> None:
    """Earlier versions wrote `sessions/<key>/<id>.json` and a HEAD file: at open they become rows
    (a corrupt one stays refused, HEAD is kept) and the files are removed."""
    from clawgate.agent.checkpoints.model import Checkpoint, encode

    old = tmp_path / "state/checkpoints/sessions"
    (old / "a%2Fb").mkdir(parents=True)  # a session key quoted as a folder name
    first = Checkpoint(session="a/b", seq=0, anchor_ts=None, kind="turn", description="before", time=100.0, turn=0,
                       version="old")
    second = Checkpoint(session="a/b", seq=4, anchor_ts=1.0, kind="step", description="step 1", time=200.0, turn=1,
                        version="old", parent=first.id)
    for cp in (first, second):
        (old / "a%2Fb" / f"{cp.id}.json").write_bytes(encode(cp))
    (old / "a%2Fb" / "cp_000000000bad.json").write_bytes(b'{"torn')
    (old / "a%2Fb" / "HEAD").write_text(f"{first.id}\n{second.id}\n")

    rig = Rig(tmp_path)
    store = rig.service.store
    assert [c.id for c in store.all("a/b")] == [first.id, second.id]
    assert store.head("a/b") == second.id and [c.id for c in store.lineage("a/b")] == [second.id, first.id]
    listing = rig.service.list(session="a/b")
    assert len(listing["checkpoints"]) == 2 and len(listing["problems"]) == 1 and "corrupt" in listing["problems"][0]
    assert not old.exists()  # nothing left behind
    # opened again: nothing to move, nothing changes
    reopened = CheckpointService(folder=tmp_path / "state/checkpoints", workspace=rig.workspace, sessions=rig.sessions,
                                 tasks=rig.tasks, events=EventHub(), settings=CheckpointSettings(), version="test",
                                 busy=lambda key: False, invalidate=lambda key: None, fsync=False)
    assert [c.id for c in reopened.store.all("a/b")] == [first.id, second.id] and reopened.store.head("a/b") == second.id


def test_a_checkpoint_is_made_durable_by_the_group_flush_of_one_wal(tmp_path: Path) -> None:
    """Every checkpoint of every session marks the same file, the database's WAL: one fsync per
    flush covers them all (a file per checkpoint needed two fsyncs each)."""
    from clawgate.agent.core.durability import Durability

    flushed: list[str] = []
    durability = Durability(fsync=flushed.append)
    sessions = SessionManager(tmp_path / "state/sessions", fsync=True, durability=durability)
    tasks = TaskStore(tmp_path / "state/tasks", fsync=False)
    (tmp_path / "workspace").mkdir()
    service = CheckpointService(folder=tmp_path / "state/checkpoints", workspace=tmp_path / "workspace",
                                sessions=sessions, tasks=tasks, events=EventHub(), settings=CheckpointSettings(),
                                version="test", busy=lambda key: False, invalidate=lambda key: None, fsync=True,
                                durability=durability)
    sessions.observers.append(service.on_append)
    for key in ("a", "b", "c"):
        sessions.get(key).append("user", text="hi", inbound_id=f"in-{key}", channel="test", chat_id="1")
    assert len(service.store.all()) == 3 and durability.pending
    durability.sync_now()
    assert flushed == [str(tmp_path / "state/checkpoints/checkpoints.db-wal")]


def test_an_unchanged_workspace_is_recognised_without_reading_a_file_and_any_change_is_seen(tmp_path: Path,
                                                                                            monkeypatch) -> None:
    import os

    from clawgate.agent.checkpoints.workspace_store import WorkspaceStore

    root = tmp_path / "ws"
    (root / "docs").mkdir(parents=True)
    (root / "a.txt").write_text("one")
    (root / "docs/b.md").write_text("two")
    store = WorkspaceStore(root, tmp_path / "store", fsync=False)
    first = store.snapshot()
    looked_up: list[str] = []
    real = store._blob_for
    monkeypatch.setattr(store, "_blob_for", lambda rel, st: looked_up.append(rel) or real(rel, st))
    assert store.snapshot() == first and looked_up == []  # the same stat everywhere: no lookup at all
    # same size, new content, an mtime that moved: a new tree holding the new content
    (root / "a.txt").write_text("ONE")
    os.utime(root / "a.txt", ns=(1, 1))
    second = store.snapshot()
    assert second != first and store.tree(second)["a.txt"] != store.tree(first)["a.txt"]
    # a file added deep down, one removed: each seen
    (root / "docs/deep").mkdir()
    (root / "docs/deep/c.txt").write_text("three")
    (root / "docs/b.md").unlink()
    assert sorted(store.tree(store.snapshot())) == ["a.txt", "docs/deep/c.txt"]


def test_a_snapshot_that_failed_midway_is_not_mistaken_for_the_previous_one(tmp_path: Path, monkeypatch) -> None:
    from clawgate.agent.checkpoints.workspace_store import WorkspaceStore

    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.txt").write_text("one")
    store = WorkspaceStore(root, tmp_path / "store", fsync=False)
    first = store.snapshot()
    (root / "a.txt").write_text("two, longer")
    real = store._blob_for

    def unreadable(rel, st):  # type: ignore[no-untyped-def]
        raise PermissionError(f"cannot read {rel}")

    monkeypatch.setattr(store, "_blob_for", unreadable)
    with pytest.raises(PermissionError):
        store.snapshot()
    monkeypatch.setattr(store, "_blob_for", real)
    again = store.snapshot()
    assert again != first and store.tree(again)["a.txt"] != store.tree(first)["a.txt"]


def test_a_collection_with_a_grace_spares_files_another_process_may_still_be_recording(tmp_path: Path) -> None:
    """A fleet's processes share the store: a blob written moments ago may belong to a snapshot whose
    tree and checkpoint another process has not recorded yet."""
    rig = Rig(tmp_path)
    store = rig.service.workspace
    (rig.workspace / "x.txt").write_text("kept")
    kept = store.snapshot()
    orphan = store.objects / "ab" / ("c" * 62)  # no tree names it (yet)
    orphan.parent.mkdir(parents=True, exist_ok=True)
    orphan.write_bytes(b"another process's snapshot in the making")
    assert store.collect({kept}, min_age_seconds=3600) == 0 and orphan.exists()
    hour_ago = time.time() - 7200
    os.utime(orphan, (hour_ago, hour_ago))
    assert store.collect({kept}, min_age_seconds=3600) == 1 and not orphan.exists()  # old and unnamed: collected
    store.restore(kept)
    assert (rig.workspace / "x.txt").read_text() == "kept"
