"""Bounded resources: open descriptors are capped, big files are read lazily, writes are atomic."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from clawgate.agent.core.fsio import atomic_write_bytes
from clawgate.agent.session import SessionManager
from clawgate.agent.tasks.store import Task, TaskStore
from clawgate.agent.tools import ToolContext, ToolError
from clawgate.agent.tools import files
from clawgate.agent.tools.files import ReadFile, read_lines
from clawgate.agent.core.trace import TraceWriter
from clawgate.agent.triggers.heartbeat import Heartbeat
from clawgate.config.schema import HeartbeatSettings
from tests.untrusted_support import unwrap
from clawgate.workspace.guard import WorkspaceGuard


def open_fds(under: Path) -> int:
    """Descriptors of this process open on files below `under` (other tests' sockets may be
    collected at any moment, so the process-wide count is not a stable baseline)."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        count += target.startswith(str(under.resolve()))
    return count


# session logs ----------------------------------------------------------------------------------
def test_session_manager_keeps_at_most_max_open_files_open(tmp_path: Path) -> None:
    manager = SessionManager(tmp_path, fsync=False, max_open=4)
    before = open_fds(tmp_path)
    sessions = [manager.get(f"telegram:{i}") for i in range(20)]
    for turn in range(3):
        for session in sessions:  # callers hold the Session objects, as the loop does
            session.append("user", text=f"{session.key} turn {turn}", inbound_id=f"{session.key}:{turn}",
                           channel="telegram", chat_id=session.key)
            assert sum(s._fd is not None for s in sessions) <= 4
            assert open_fds(tmp_path) - before <= 4
    assert all(manager.get(s.key) is s for s in sessions)  # a closed file never means a second object
    manager.close()
    assert open_fds(tmp_path) == before and all(s._fd is None for s in sessions)

    reloaded = SessionManager(tmp_path, fsync=False)
    for session in sessions:
        records = reloaded.get(session.key).records
        assert [r["text"] for r in records] == [f"{session.key} turn {t}" for t in range(3)]
        assert [r["seq"] for r in records] == [1, 2, 3]
        assert reloaded.get(session.key).inbound_seqs == {f"{session.key}:{t}": t + 1 for t in range(3)}
    reloaded.close()


def test_the_least_recently_written_session_is_the_one_closed(tmp_path: Path) -> None:
    manager = SessionManager(tmp_path, fsync=False, max_open=2)
    a, b, c = (manager.get(k) for k in "abc")
    a.append("event", name="x")
    b.append("event", name="x")
    a.append("event", name="x")
    c.append("event", name="x")
    assert (a._fd is not None, b._fd is None, c._fd is not None) == (True, True, True)
    b.append("event", name="y")  # reopens, and a (written before c) gives way
    assert (a._fd is None, b._fd is not None, c._fd is not None) == (True, True, True)
    assert [r["name"] for r in manager.get("b").records] == ["x", "y"]
    manager.close()


def test_reset_forgets_the_old_session_file(tmp_path: Path) -> None:
    manager = SessionManager(tmp_path, fsync=False, max_open=2)
    old = manager.get("k")
    old.append("event", name="x")
    assert manager.reset("k") is not None and old._fd is None
    fresh = manager.get("k")
    assert fresh is not old and fresh.records == []
    fresh.append("event", name="y")
    assert list(manager._writers) == [fresh]
    manager.close()


# traces -------------------------------------------------------------------------------------
def test_trace_writer_keeps_at_most_max_open_files_open(tmp_path: Path) -> None:
    writer = TraceWriter(tmp_path, max_open=4)
    before = open_fds(tmp_path)
    for turn in range(3):
        for i in range(20):
            writer({"type": "tool_end", "session": f"s{i}", "turn": turn})
            assert len(writer._fds) <= 4 and open_fds(tmp_path) - before <= 4
        writer({"type": "text_delta", "session": "s0", "text": "skipped"})
    writer.close()
    assert open_fds(tmp_path) == before
    for i in range(20):
        lines = (tmp_path / f"s{i}.jsonl").read_text().splitlines()
        assert [json.loads(line)["turn"] for line in lines] == [0, 1, 2]


# reading big files ----------------------------------------------------------------------------
@pytest.fixture
def ws(tmp_path: Path) -> WorkspaceGuard:
    return WorkspaceGuard(tmp_path / "ws")


def ctx_for(ws: WorkspaceGuard) -> ToolContext:
    return ToolContext(session_key="s", channel="gateway", chat_id="s", sender_id="u", run_id="r", workspace=ws)


async def read(ws: WorkspaceGuard, path: str, *, cap: int = 64_000, **args) -> str:
    """read_file's text of a file the agent did not write: wrapped as untrusted data, unwrapped here."""
    tool = ReadFile(cap)
    return unwrap(await tool.run(tool.Arguments(path=path, **args), ctx_for(ws)))


@pytest.fixture
def big_log(ws: WorkspaceGuard) -> int:
    """A 30 MB log: line n reads "line n" padded to 60 bytes."""
    count = 500_000
    with open(ws.root / "big.log", "w") as fh:
        for n in range(1, count + 1):
            fh.write(f"line {n}".ljust(59, ".") + "\n")
    assert (ws.root / "big.log").stat().st_size == 30_000_000
    return count


async def test_read_file_of_a_big_file_returns_the_asked_lines(ws: WorkspaceGuard, big_log: int) -> None:
    out = await read(ws, "big.log", offset=250_000, limit=3)
    lines = out.splitlines()
    assert lines[:3] == [f"{n:>5}\t" + f"line {n}".ljust(59, ".") for n in (250_000, 250_001, 250_002)]
    assert lines[3] == f"[{big_log - 250_002} more lines; continue with offset=250003]"
    last = await read(ws, "big.log", offset=big_log, limit=10)
    assert last == f"{big_log:>5}\t" + f"line {big_log}".ljust(59, ".")


async def test_lines_past_a_very_big_window_are_not_counted(ws: WorkspaceGuard, big_log: int,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(files, "COUNT_LIMIT", 1_000_000)
    out = await read(ws, "big.log", offset=10, limit=2)
    assert out.splitlines()[-1] == "[more lines follow; continue with offset=12]"
    end = await read(ws, "big.log", offset=big_log - 1, limit=2)  # the end is reached: nothing more to say
    assert "more lines" not in end and len(end.splitlines()) == 2


def test_read_lines_splits_like_splitlines(tmp_path: Path) -> None:
    data = b"one\r\ntwo\rthree\x0cfour\n\nbad \xff\xfe bytes\n\xc3\xa9t\xc3\xa9\nno newline at the end"
    (tmp_path / "f").write_bytes(data)
    expected = data.decode("utf-8", errors="replace").splitlines()
    assert read_lines(tmp_path / "f", 1, 100) == (expected, len(expected))
    assert read_lines(tmp_path / "f", 3, 2) == (expected[2:4], len(expected))
    assert read_lines(tmp_path / "f", 50, 2) == ([], len(expected))
    (tmp_path / "empty").write_bytes(b"")
    assert read_lines(tmp_path / "empty", 1, 5) == ([], 0)


def test_an_over_long_line_is_cut_and_numbering_goes_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(files, "LINE_BYTES", 16)
    (tmp_path / "f").write_bytes(b"short\n" + b"x" * 100 + b"\nafter\n" + b"y" * 40)
    assert read_lines(tmp_path / "f", 1, 10) == (["short", "x" * 16, "after", "y" * 16], 4)


async def test_output_cap_points_at_the_next_unshown_line(ws: WorkspaceGuard) -> None:
    (ws.root / "wide.txt").write_text("".join(f"{n} " + "w" * 100 + "\n" for n in range(1, 101)))
    out = await read(ws, "wide.txt", cap=1_000)
    assert "[… output capped; read further with offset]" in out
    # 10 lines fill 1,000 characters; the 10th is cut, so reading goes on right after it.
    assert out.endswith("[90 more lines; continue with offset=11]")


async def test_read_file_errors_are_unchanged(ws: WorkspaceGuard) -> None:
    (ws.root / "blob.bin").write_bytes(b"\x00\x01" * 3000)
    with pytest.raises(ToolError, match=r"blob.bin is a binary file \(6000 bytes\)"):
        await read(ws, "blob.bin")
    (ws.root / "empty.txt").write_text("")
    assert await read(ws, "empty.txt") == "(empty file)"


# atomic writes ----------------------------------------------------------------------------------
def test_atomic_write_replaces_whole_files_with_the_asked_mode(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "state.json"
    atomic_write_bytes(target, b"first")
    assert target.read_bytes() == b"first" and stat.S_IMODE(target.stat().st_mode) == 0o600
    target.chmod(0o755)
    atomic_write_bytes(target, b"second" * 100_000, mode=None)  # keeps the mode it had
    assert target.read_bytes() == b"second" * 100_000 and stat.S_IMODE(target.stat().st_mode) == 0o755
    atomic_write_bytes(target, b"third", fsync=False)
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert sorted(p.name for p in target.parent.iterdir()) == ["state.json"]


def test_a_failed_atomic_write_leaves_the_old_state_and_no_temp_file(tmp_path: Path) -> None:
    (tmp_path / "taken").mkdir()  # a rename over a folder fails
    with pytest.raises(OSError):
        atomic_write_bytes(tmp_path / "taken", b"data")
    assert [p.name for p in tmp_path.iterdir()] == ["taken"]


def test_task_store_saves_through_the_atomic_write(tmp_path: Path) -> None:
    store = TaskStore(tmp_path / "tasks")
    task = Task(goal="g", session_key="s")
    store.save(task)
    path = store.path(task.id)
    assert json.loads(path.read_text())["goal"] == "g" and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert TaskStore(tmp_path / "tasks").get(task.id).goal == "g"
    assert [p.name for p in path.parent.iterdir()] == [path.name]


async def test_editing_a_file_keeps_its_mode(ws: WorkspaceGuard) -> None:
    from clawgate.agent.tools.files import EditFile

    script = ws.root / "run.sh"
    script.write_text("echo one\n")
    script.chmod(0o755)
    tool = EditFile()
    await tool.run(tool.Arguments(path="run.sh", old_text="one", new_text="two"), ctx_for(ws))
    assert script.read_text() == "echo two\n" and stat.S_IMODE(script.stat().st_mode) == 0o755


# heartbeat target: the session's last origin ----------------------------------------------------
def test_heartbeat_delivers_to_the_sessions_last_origin(tmp_path: Path) -> None:
    sessions = SessionManager(tmp_path / "sessions", fsync=False)
    beat = Heartbeat(HeartbeatSettings(), workspace=tmp_path, tasks=TaskStore(tmp_path / "tasks"),
                     sessions=sessions, bus=None, events=None, busy=lambda s: False)  # type: ignore[arg-type]
    assert beat._target("unknown") is None and not sessions.exists("unknown")
    work = sessions.get("work")
    work.append("user", text="hi", channel="telegram", chat_id="42", sender_id="42")
    work.append("user", text="beat", channel="heartbeat", chat_id="work", sender_id="heartbeat")
    work.append("user", text="job", channel="cron", chat_id="work", sender_id="cron")
    assert beat._target("work") == {"channel": "telegram", "chat_id": "42"}
    work.append("user", text="job", channel="cron", chat_id="work", sender_id="cron",
                deliver={"channel": "telegram", "chat_id": "7"})
    target = beat._target("work")
    assert target == {"channel": "telegram", "chat_id": "7"}
    target["chat_id"] = "changed"  # a copy: the session's record stays as it was
    assert work.records[-1]["deliver"] == {"channel": "telegram", "chat_id": "7"}


# the open-file limit ---------------------------------------------------------------------------
def test_daemon_raises_a_low_open_file_limit_and_sizes_its_file_caches_from_it() -> None:
    """Run in a child process, so this test's own limit is left alone."""
    import subprocess
    import sys

    script = (
        "import resource\n"
        "from clawgate.gateway.limits import raise_open_file_limit, open_files_per_cache\n"
        "soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))\n"
        "got = raise_open_file_limit(2048)\n"
        "print(got, resource.getrlimit(resource.RLIMIT_NOFILE)[0], hard, open_files_per_cache(got))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[2]).stdout.split()
    got, now, hard, per_cache = (int(v) for v in out)
    expected = 2048 if hard < 0 else min(2048, hard)  # RLIM_INFINITY is -1
    assert got == now == expected
    assert per_cache == max(16, min(512, expected // 8))


def test_file_caches_stay_within_bounds_for_any_limit() -> None:
    from clawgate.gateway.limits import open_files_per_cache

    assert open_files_per_cache(64) == 16  # a tiny limit still leaves room to work
    assert open_files_per_cache(1024) == 128
    assert open_files_per_cache(1_000_000) == 512  # a huge one does not hold thousands of logs open


# the event loop and the garbage collector (gateway/runtime.py) ---------------------------------
async def test_daemon_serves_on_uvloop_by_default_and_on_asyncio_when_configured(daemon_factory) -> None:
    pytest.importorskip("uvloop")
    fast = daemon_factory()
    async with fast.client() as client:
        assert (await client.request("status"))["eventLoop"] == "uvloop"
        final = await client.chat("hello", session="loop")  # a whole turn: model stream, session log, reply
    assert final["state"] == "final" and final["text"].strip()
    standard = daemon_factory({"CLAWGATE_GATEWAY__EVENT_LOOP": "asyncio"})
    async with standard.client() as client:
        assert (await client.request("status"))["eventLoop"] == "asyncio"


def test_asking_for_uvloop_where_it_is_missing_is_one_line_naming_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from clawgate.gateway.runtime import RuntimeUnavailable, loop_factory

    monkeypatch.setitem(sys.modules, "uvloop", None)  # as on a platform without it
    assert loop_factory("auto") is None  # auto: the standard loop, quietly
    assert loop_factory("asyncio") is None
    with pytest.raises(RuntimeUnavailable) as info:
        loop_factory("uvloop")
    assert "\n" not in str(info.value) and "pip install uvloop" in str(info.value)


def test_settled_heap_is_frozen_out_of_collections_and_young_ones_run_less_often() -> None:
    """In a child process: freezing is for the whole interpreter."""
    import subprocess
    import sys

    code = ("import gc\nfrom clawgate.gateway.runtime import settle_heap, YOUNG_COLLECTION_EVERY\n"
            "before = gc.get_threshold()\nsettle_heap()\n"
            "print(gc.get_freeze_count() > 1_000, gc.get_threshold()[0] == YOUNG_COLLECTION_EVERY > before[0],"
            " gc.get_threshold()[1:] == before[1:], gc.isenabled())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[2]).stdout.split()
    assert out == ["True", "True", "True", "True"]
