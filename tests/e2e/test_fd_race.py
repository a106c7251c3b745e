"""The symlink race on workspace folders, played for real: a separate process swaps a workspace
folder and a symlink pointing outside it (renameat2 RENAME_EXCHANGE and plain renames) thousands
of times while the file tools, the checkpoint store and a real daemon read and write through the
folder. Nothing outside may be read (the secret never shows) or written (files, names and inodes
outside stay as they were).

The first test shows the race is real on this machine: the old check-then-open by path does read
the secret. The others run the real code under the same race and count zero escapes.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import zlib
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

import pytest

from clawgate.agent.approvals import ApprovalBroker
from clawgate.agent.core.audit import AuditLog
from clawgate.agent.checkpoints.workspace_store import WorkspaceStore
from clawgate.agent.core.events import EventHub
from clawgate.agent.memory.store import Memory
from clawgate.agent.memory.search import MemorySearch
from clawgate.agent.tools import ToolContext, ToolRegistry
from clawgate.agent.toolset import default_tools
from clawgate.config.schema import Settings
from tests.fakes.anthropic_api import text, tool_use, tool_uses
from clawgate.workspace.guard import PathOutsideWorkspace, WorkspaceGuard

SECRET = "SECRET-7f3a-never-read-me"
CONFIG = "[gateway]\n# ORIGINAL-CONFIG-b81c\n"
FLIPS = 3000  # the racer swaps folder and link at least this often while the code under test works
DEADLINE = 600.0  # generous: a loaded 2-core machine


def outside_dir(base: Path) -> Path:
    """A folder outside the workspace holding a secret and a config file, like the daemon's home."""
    out = base / "outside"
    out.mkdir()
    (out / "f.txt").write_text(SECRET)
    (out / "config.toml").write_text(CONFIG)
    (out / "outside-only.txt").write_text(SECRET)
    return out


def inside_folder(ws: Path) -> Path:
    """`ws/d`: the folder the agent works in; `ws/.d.link`: the racer's link out of the workspace."""
    folder = ws / "d"
    folder.mkdir(parents=True)
    (folder / "f.txt").write_text("inside text\n")
    (folder / "config.toml").write_text("inside = true\n")
    return folder


def state_of(folder: Path) -> dict[str, tuple[int, bytes]]:
    """Every name in `folder` with its inode and content: a write, a rename or a new file shows."""
    return {p.name: (p.lstat().st_ino, p.read_bytes()) for p in folder.iterdir() if p.is_file() and not p.is_symlink()}


@contextmanager
def racing(folder: Path, link_target: Path, counter: Path, mode: str) -> Iterator[Callable[[], int]]:
    """Run the racer on `folder` and a link beside it to `link_target` (made unless there); yields
    the flip count."""
    link = folder.parent / f".{folder.name}.link"
    if not os.path.lexists(link):
        os.symlink(link_target, link)
    racer = subprocess.Popen([sys.executable, "-m", "tests.fakes.symlink_racer", str(folder), str(link),
                              str(counter), mode], cwd=Path(__file__).resolve().parents[2])

    def flips() -> int:
        assert racer.poll() is None, "the racer stopped"
        try:
            return int(counter.read_text() or 0)
        except (FileNotFoundError, ValueError):
            return 0

    try:
        yield flips
    finally:
        racer.kill()
        racer.wait(timeout=30)


def until(done: Callable[[], bool], step: Callable[[], None], what: str) -> None:
    """Do `step` until `done()`, within the generous deadline."""
    deadline = time.monotonic() + DEADLINE
    while not done():
        assert time.monotonic() < deadline, f"{what}: not reached in time"
        step()


def test_the_race_is_real_check_then_open_by_path_reads_the_secret(tmp_path: Path) -> None:
    """The control: the guard's path check followed by an open by name escapes under this racer."""
    out = outside_dir(tmp_path)
    ws = tmp_path / "ws"
    inside_folder(ws)
    guard = WorkspaceGuard(ws)
    escapes = 0

    def naive_read() -> None:
        nonlocal escapes
        try:
            real = guard.resolve("d/f.txt")
            escapes += SECRET in real.read_text()
        except (PathOutsideWorkspace, OSError):
            pass

    with racing(ws / "d", out, tmp_path / "count", "exchange"):
        until(lambda: escapes > 0, naive_read, "the old check-then-open escaping")
    assert escapes > 0


@pytest.mark.parametrize("mode", ["exchange", "rename"])
async def test_file_tools_never_leave_the_workspace_while_a_folder_flips_with_a_link(tmp_path: Path, mode: str) -> None:
    """Plain renames leave a moment with no `d` at all, in which write_file would rightly make a new
    folder and end the race; that mode runs the calls that never create one."""
    out = outside_dir(tmp_path)
    before = state_of(out)
    ws = tmp_path / "ws"
    inside_folder(ws)
    events = EventHub()
    registry = ToolRegistry(default_tools(Settings()), events=events, audit=AuditLog(tmp_path / "audit.jsonl"),
                            approvals=ApprovalBroker(events, mode="deny"))
    ctx = ToolContext(session_key="s", channel="gateway", chat_id="s", sender_id="u1", run_id="r1",
                      workspace=WorkspaceGuard(ws), owner=True)
    calls = [("read_file", {"path": "d/f.txt"}), ("read_file", {"path": "d/config.toml"}),
             ("write_file", {"path": "d/config.toml", "content": "[mcp]\nservers = ['attacker']\n"}),
             ("write_file", {"path": "d/new/deep.txt", "content": "made under the race\n"}),
             ("edit_file", {"path": "d/f.txt", "old_text": "inside", "new_text": "inside"}),
             ("list_dir", {"path": "d"})]
    if mode == "rename":
        calls = [(name, args) for name, args in calls if name != "write_file"]
    results: list[str] = []
    succeeded = {name: 0 for name, _ in calls}
    with racing(ws / "d", out, tmp_path / "count", mode) as flips:
        while flips() < FLIPS or len(results) < 600 or min(succeeded.values()) == 0:
            assert len(results) < 600_000, "the tools never got through while the folder was in place"
            for name, args in calls:
                outcome = await registry.execute({"id": f"t{len(results)}", "name": name, "input": args}, ctx)
                results.append(outcome.content)
                succeeded[name] += not outcome.is_error
        flipped = flips()
    assert flipped >= FLIPS and min(succeeded.values()) > 0, succeeded
    assert not [r for r in results if SECRET in r or "ORIGINAL-CONFIG" in r or "outside-only" in r]
    assert state_of(out) == before  # nothing written, renamed or created outside
    # The work landed inside: under the real folder, wherever the racer left it.
    [real] = [p for p in (ws / "d", ws / ".d.link", ws / "d.spare") if p.is_dir() and not p.is_symlink()]
    if mode == "exchange":
        assert (real / "config.toml").read_text() == "[mcp]\nservers = ['attacker']\n"
        assert (real / "new/deep.txt").read_text() == "made under the race\n"
    assert (real / "f.txt").read_text() == "inside text\n"
    assert not [p for p in real.iterdir() if p.name.endswith(".tmp")]


def test_checkpoint_snapshot_and_restore_never_leave_the_workspace_under_the_race(tmp_path: Path) -> None:
    out = outside_dir(tmp_path)
    before = state_of(out)
    ws = tmp_path / "ws"
    inside_folder(ws)
    (ws / "d/sub").mkdir()
    (ws / "d/sub/g.txt").write_text("deeper\n")
    os.symlink(out, ws / ".d.link")
    store = WorkspaceStore(ws, tmp_path / "store", fsync=False)
    point = store.snapshot()  # folder and link in place: what every restore brings back
    snapshots = restores = 0

    def step() -> None:
        nonlocal snapshots, restores
        (ws / "top.txt").write_text(f"changed {snapshots}\n")  # each snapshot has something new to store
        store.snapshot()
        snapshots += 1
        if store.restore(point).written:
            restores += 1

    # Exchange only: a restore that finds no `d` in a plain-rename gap makes one, which wedges that racer.
    with racing(ws / "d", out, tmp_path / "count", "exchange") as flips:
        until(lambda: flips() >= FLIPS and snapshots >= 200 and restores >= 50, step, "snapshots under the race")
    assert state_of(out) == before  # no restore wrote, removed or created anything outside
    stored = [zlib.decompress(p.read_bytes()) for p in (tmp_path / "store").rglob("*") if p.is_file()]
    assert stored and not [b for b in stored if SECRET.encode() in b or b"ORIGINAL-CONFIG" in b]
    # Without the racer, a restore puts the folder back as it was.
    if (ws / "d").is_symlink():
        os.unlink(ws / "d")
    store.restore(point)
    assert (ws / "d/f.txt").read_text() == "inside text\n" and (ws / "d/sub/g.txt").read_text() == "deeper\n"


def test_memory_logs_never_append_outside_the_workspace_under_the_race(tmp_path: Path) -> None:
    """`memory/` flips with a link to a folder holding a file of today's log name: the log, the
    archive and MEMORY.md writes must land inside or fail, never append to or replace it."""
    out = outside_dir(tmp_path)
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    memory = Memory(ws)
    (out / memory.daily_path().name).write_text(SECRET + "\n")
    before = state_of(out)
    done = refused = 0

    def step() -> None:
        nonlocal done, refused
        try:
            memory.log(f"note {done}")
            memory.archive("part", "raw transcript part")
            done += 1
        except (PathOutsideWorkspace, OSError):
            refused += 1
        assert SECRET not in "".join(memory.facts())

    with racing(ws / "memory", out, tmp_path / "count", "exchange") as flips:
        until(lambda: flips() >= FLIPS and done >= 200 and refused >= 1, step, "memory writes under the race")
    assert state_of(out) == before
    [real] = [p for p in (ws / "memory", ws / ".memory.link") if p.is_dir() and not p.is_symlink()]
    log = (real / memory.daily_path().name).read_text()
    assert SECRET not in log and log.count("- ") >= 200


async def test_the_daemon_reads_and_writes_through_a_flipping_folder_without_escaping(daemon, fake_model,
                                                                                       tmp_path: Path) -> None:
    """The attack on a real daemon: the link points at the daemon's own home (config.toml)."""
    home = daemon.home
    (home / "secret.txt").write_text(SECRET)
    with (home / "config.toml").open("a") as fh:  # read at start only: a marker to look for
        fh.write("# ORIGINAL-CONFIG-b81c\n")
    config_before = (home / "config.toml").read_bytes()
    before = {name: (home / name).lstat().st_ino for name in ("config.toml", "secret.txt")}
    ws = daemon.workspace
    inside_folder(ws)
    (ws / "d/secret.txt").write_text("inside\n")
    batch = tool_uses(("read_file", {"path": "d/secret.txt"}), ("read_file", {"path": "d/config.toml"}),
                      ("write_file", {"path": "d/config.toml", "content": "[mcp]\nservers = ['attacker']\n"}),
                      ("edit_file", {"path": "d/f.txt", "old_text": "inside", "new_text": "inside"}))
    turns = 0
    async with daemon.client() as client:
        with racing(ws / "d", home, tmp_path / "count", "exchange") as flips:
            while flips() < FLIPS or turns < 3:
                assert turns < 500, "the racer never reached its flips"
                fake_model.enqueue(*[batch] * 10, text(f"turn {turns} done"))
                final = await client.chat(f"work on d, turn {turns}", session="race")
                assert final["state"] == "final", final
                turns += 1
    results = [str(block.get("content")) for request in fake_model.requests for message in request["messages"]
               if isinstance(message["content"], list) for block in message["content"]
               if block.get("type") == "tool_result"]
    assert len(results) >= 40 * turns
    # The work went through whenever the folder was in place (and only then).
    assert [r for r in results if "inside" in r] and [r for r in results if r.startswith("overwrote d/config.toml")]
    assert not [r for r in results if SECRET in r or "ORIGINAL-CONFIG" in r]
    assert (home / "config.toml").read_bytes() == config_before and (home / "secret.txt").read_text() == SECRET
    assert {name: (home / name).lstat().st_ino for name in before} == before  # not replaced by a rename
    assert not [name for name in os.listdir(home) if name.endswith(".tmp") or name == "f.txt"]
    assert daemon.alive()


async def test_prompt_files_linked_out_of_the_workspace_never_reach_the_model(daemon, fake_model) -> None:
    """SOUL.md and a skill planted as links to files outside: the system prompt and load_skill leave
    them out; a link to a file inside the workspace still works (followed through descriptors)."""
    (daemon.home / "secret.txt").write_text(SECRET)
    (daemon.workspace / "SOUL.md").unlink()
    os.symlink(daemon.home / "secret.txt", daemon.workspace / "SOUL.md")
    (daemon.workspace / "notes").mkdir()
    (daemon.workspace / "notes/user.md").write_text("The user is called INSIDE-LINK-4d2e.\n")
    (daemon.workspace / "USER.md").unlink()
    os.symlink("notes/user.md", daemon.workspace / "USER.md")
    (daemon.home / "skill.md").write_text(f"---\nname: planted\ndescription: {SECRET}\n---\nbody {SECRET}\n")
    (daemon.workspace / "skills/planted").mkdir(parents=True)
    os.symlink(daemon.home / "skill.md", daemon.workspace / "skills/planted/SKILL.md")
    fake_model.enqueue(tool_use("load_skill", {"name": "planted"}), text("hello"))
    async with daemon.client() as client:
        assert (await client.chat("hi", session="prompt"))["text"] == "hello"
    system = str(fake_model.requests[-1].get("system"))
    assert "INSIDE-LINK-4d2e" in system and SECRET not in system
    assert "no skill named 'planted'" in str(fake_model.requests[-1]["messages"])
    assert SECRET not in str(fake_model.requests[-1]["messages"])


def test_memory_search_leaves_out_memory_files_linked_out_of_the_workspace(tmp_path: Path) -> None:
    out = outside_dir(tmp_path)
    (out / "notes.md").write_text(f"the vault pin is {SECRET}\n")
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory/inside.md").write_text("the vault is in the basement\n")
    os.symlink(out / "notes.md", ws / "memory/leak.md")
    os.symlink(out, ws / "memory/folder")
    hits = MemorySearch(ws).search("vault pin")
    assert [hit.file for hit in hits] == ["memory/inside.md"]
    assert SECRET not in str(hits)


def test_a_received_telegram_file_is_never_written_through_a_link_out(tmp_path: Path) -> None:
    from clawgate.channels.kit.files import write_file as _write

    out = outside_dir(tmp_path)
    before = state_of(out)
    ws = tmp_path / "ws"
    ws.mkdir()
    os.symlink(out, ws / "inbox")
    with pytest.raises(ValueError, match="refusing to write outside the workspace"):
        _write(ws, Path("inbox/photo.jpg"), b"\xff\xd8 image")
    os.unlink(ws / "inbox")
    _write(ws, Path("inbox/photo.jpg"), b"\xff\xd8 image")
    assert state_of(out) == before and (ws / "inbox/photo.jpg").read_bytes() == b"\xff\xd8 image"


async def test_a_fifo_planted_as_a_prompt_file_does_not_hang_the_daemon(daemon, fake_model) -> None:
    """Opening a FIFO for reading waits for a writer; the prompt files are opened non-blocking and
    must be regular files, so the turn goes on without them."""
    for name in ("SOUL.md", "HEARTBEAT.md"):
        (daemon.workspace / name).unlink()
        os.mkfifo(daemon.workspace / name)
    fake_model.enqueue(text("still answering"))
    async with daemon.client() as client:
        final = await asyncio.wait_for(client.chat("hi", session="fifo"), timeout=120)
    assert final["text"] == "still answering" and daemon.alive()
