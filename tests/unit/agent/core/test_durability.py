"""Group commit: concurrent waiters share one flush, and nothing is promised before its flush."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from clawgate.agent.bus import InboundMessage, OutboundMessage, SqliteBus
from clawgate.agent.core.durability import Durability
from clawgate.agent.session import SessionManager
from clawgate.agent.core.statedb import open_state_db
from clawgate.channels.base import Channel
from clawgate.gateway.dispatcher import Dispatcher
from tests.waiting import wait_until_async


class GatedFsync:
    """An fsync that records what it flushed and can be held back, like a slow disk."""

    def __init__(self) -> None:
        self.flushed: list[str] = []
        self.gate = threading.Event()
        self.gate.set()
        self.fail: OSError | None = None
        self.entered = 0  # flushes that reached the disk (held at a closed gate, or done)

    def __call__(self, path: str) -> None:
        self.entered += 1
        assert self.gate.wait(30), "the test never opened the gate"
        if self.fail is not None:
            raise self.fail
        self.flushed.append(path)


async def test_concurrent_waiters_share_one_flush(tmp_path: Path) -> None:
    disk = GatedFsync()
    barrier = Durability(fsync=disk)
    for n in range(50):
        barrier.mark(tmp_path / f"f{n % 5}")
    await asyncio.gather(*(barrier.sync() for _ in range(100)))
    assert barrier.flushes == 1
    assert sorted(disk.flushed) == sorted(str(tmp_path / f"f{n}") for n in range(5))  # each file once
    await barrier.sync()  # nothing new marked: no flush at all
    assert barrier.flushes == 1 and not barrier.pending


async def test_a_mark_made_during_a_flush_waits_for_the_next_one(tmp_path: Path) -> None:
    disk = GatedFsync()
    barrier = Durability(fsync=disk)
    barrier.mark(tmp_path / "first")
    disk.gate.clear()
    early = asyncio.ensure_future(barrier.sync())
    await wait_until_async(lambda: disk.entered, "the first flush to be held at the gate")
    barrier.mark(tmp_path / "second")
    late = asyncio.ensure_future(barrier.sync())
    disk.gate.set()
    await asyncio.wait_for(asyncio.gather(early, late), 30)
    assert disk.flushed == [str(tmp_path / "first"), str(tmp_path / "second")]
    assert barrier.flushes == 2


async def test_a_failed_flush_raises_to_every_waiter_and_is_retried(tmp_path: Path) -> None:
    disk = GatedFsync()
    disk.fail = OSError(5, "Input/output error")
    barrier = Durability(fsync=disk)
    barrier.mark(tmp_path / "log")
    results = await asyncio.gather(barrier.sync(), barrier.sync(), return_exceptions=True)
    assert all(isinstance(r, OSError) for r in results)
    assert barrier.pending
    disk.fail = None
    await barrier.sync()
    assert disk.flushed == [str(tmp_path / "log")] and not barrier.pending


async def test_a_flush_of_several_files_syncs_each_and_raises_the_first_failure(tmp_path: Path) -> None:
    """The first file is synced by the flush's own worker, the others beside it in the pool: a failing
    file never keeps the others from reaching the disk, and its error is the one raised."""
    threads: dict[str, str] = {}
    synced: list[str] = []

    def fsync(path: str) -> None:
        threads[path] = threading.current_thread().name
        if path.endswith("bad"):
            raise OSError(5, "Input/output error", path)
        synced.append(path)

    barrier = Durability(fsync=fsync)
    for name in ("a-bad", "b", "c"):
        barrier.mark(tmp_path / name)
    with pytest.raises(OSError) as raised:
        await barrier.sync()
    assert raised.value.filename == str(tmp_path / "a-bad")
    assert sorted(synced) == [str(tmp_path / "b"), str(tmp_path / "c")]
    assert len(set(threads.values())) >= 2 and threading.current_thread().name not in threads.values()
    assert barrier.pending  # the failed flush is tried again by the next sync


async def test_disabled_barrier_marks_nothing(tmp_path: Path) -> None:
    disk = GatedFsync()
    barrier = Durability(enabled=False, fsync=disk)
    barrier.mark(tmp_path / "x")
    await barrier.sync()
    assert disk.flushed == [] and barrier.flushes == 0


async def test_the_bus_flushes_its_wal_before_a_reply_is_sent(tmp_path: Path) -> None:
    """The dispatcher holds a reply until the flush that covers its outbox row returned."""
    disk = GatedFsync()
    barrier = Durability(fsync=disk)
    bus = SqliteBus(open_state_db(tmp_path / "state.db", fsync=False), barrier)

    class Recorder(Channel):
        name = "rec"

        def __init__(self) -> None:
            self.sent: list[str] = []

        async def start(self) -> None: ...

        async def stop(self) -> None: ...

        async def send(self, msg: OutboundMessage) -> None:
            self.sent.append(msg.text)

    channel = Recorder()
    dispatcher = Dispatcher(bus, {"rec": channel})
    disk.gate.clear()
    bus.publish_outbound(OutboundMessage(channel="rec", chat_id="c", text="hello"))
    dispatcher.lanes.submit(("rec", "c"), await bus.next_outbound())
    await wait_until_async(lambda: disk.entered, "the reply's flush to be held at the gate")
    assert channel.sent == []  # the disk has not confirmed the reply yet
    disk.gate.set()
    await asyncio.wait_for(dispatcher.lanes.join(), 30)
    assert channel.sent == ["hello"]
    assert disk.flushed == [str(tmp_path / "state.db") + "-wal"]


async def test_an_accepted_message_is_durable_once_durable_returns(tmp_path: Path) -> None:
    disk = GatedFsync()
    barrier = Durability(fsync=disk)
    bus = SqliteBus(open_state_db(tmp_path / "state.db", fsync=False), barrier)
    assert bus.publish_inbound(InboundMessage(channel="t", chat_id="1", sender_id="1", session_key="s", text="hi"))
    await bus.durable()
    assert disk.flushed == [str(tmp_path / "state.db") + "-wal"]
    assert Path(disk.flushed[0]).exists()  # the WAL holds the commit until a checkpoint


async def test_a_durable_session_record_is_flushed_by_the_barrier(tmp_path: Path) -> None:
    disk = GatedFsync()
    barrier = Durability(fsync=disk)
    sessions = SessionManager(tmp_path / "sessions", durability=barrier)
    session = sessions.get("s")
    session.append("user", text="not urgent")
    assert not barrier.pending
    session.append("tool_intent", durable=True, id="t1", name="exec", input={})
    assert barrier.pending
    await session.flush()
    assert sorted(disk.flushed) == sorted([str(session.path), str(tmp_path / "sessions")])  # a new file: its folder too


@pytest.mark.parametrize("fsync", [True, False])
def test_sync_now_flushes_in_the_calling_thread(tmp_path: Path, fsync: bool) -> None:
    disk = GatedFsync()
    barrier = Durability(enabled=fsync, fsync=disk)
    barrier.mark(tmp_path / "a")
    barrier.sync_now()
    assert disk.flushed == ([str(tmp_path / "a")] if fsync else [])
    assert not barrier.pending
