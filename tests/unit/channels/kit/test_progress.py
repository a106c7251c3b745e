"""The kit's typing and status message, driven by hub events, against recording chat operations (no network)."""

from __future__ import annotations

import asyncio
from typing import Any

from clawgate.channels.kit.keys import parse_session_key
from clawgate.channels.kit.markdown import to_plain
from clawgate.channels.kit.progress import Progress
from tests.waiting import wait_until_async

KEY, CHAT = "telegram:9", "9"


def locate(key: str) -> tuple[str, str | None] | None:
    return parse_session_key(key, "telegram")


class Ops:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.next_id = 100
        self.post_started = asyncio.Event()
        self.post_gate = asyncio.Event()  # cleared: a post waits (a test acts while it is under way)
        self.post_gate.set()

    async def typing(self, chat_id: str, thread_id: str | None) -> None:
        self.calls.append(("typing", chat_id))

    async def post(self, chat_id: str, text: str, thread_id: str | None) -> str | None:
        self.post_started.set()
        await self.post_gate.wait()
        await asyncio.sleep(0.01)  # a real call takes time: events keep arriving meanwhile
        self.next_id += 1
        self.calls.append(("post", text))
        return str(self.next_id)

    async def edit(self, chat_id: str, message_id: str, text: str) -> bool:
        self.calls.append(("edit", text))
        return True

    async def delete(self, chat_id: str, message_id: str) -> None:
        self.calls.append(("delete", message_id))

    def kinds(self, kind: str) -> list[Any]:
        return [value for name, value in self.calls if name == kind]


class FakeTime:
    """A clock the test moves: a sleep ends only when advance() moves the clock past its end."""

    def __init__(self) -> None:
        self.now = 1000.0
        self._sleepers: list[tuple[float, asyncio.Future[None]]] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        woken: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._sleepers.append((self.now + seconds, woken))
        await woken

    async def advance(self, seconds: float) -> None:
        """Once some task sleeps, move the clock and wake every sleep that is over."""
        await wait_until_async(lambda: self._sleepers, "a task to sleep")
        self.now += seconds
        for entry in [e for e in self._sleepers if e[0] <= self.now]:
            self._sleepers.remove(entry)
            if not entry[1].done():
                entry[1].set_result(None)


def tool(step: str) -> dict[str, Any]:
    return {"type": "tool_start", "session": KEY, "tool": step, "summary": "path=."}


async def test_typing_repeats_while_busy_and_stops_with_the_run() -> None:
    ops, busy, t = Ops(), {KEY}, FakeTime()
    progress = Progress(ops, locate=locate, busy=lambda key: key in busy, typing_interval=5, clock=t.clock, sleep=t.sleep)
    progress.started(KEY, CHAT, None, "run1")
    await wait_until_async(lambda: len(ops.kinds("typing")) == 1, "the first typing")
    for n in (2, 3):
        await t.advance(5)
        await wait_until_async(lambda: len(ops.kinds("typing")) == n, f"typing number {n}")
    progress.on_event({"type": "run_end", "session": KEY, "run_id": "run1"})
    busy.clear()
    await t.advance(5)
    await wait_until_async(lambda: progress._sessions == {}, "the typing loop to end")
    assert len(ops.kinds("typing")) == 3
    await progress.close()


async def test_a_new_message_shows_typing_at_once() -> None:
    ops, t = Ops(), FakeTime()
    progress = Progress(ops, locate=locate, busy=lambda key: True, typing_interval=10, clock=t.clock, sleep=t.sleep)
    progress.started(KEY, CHAT, None, "run1")
    await wait_until_async(lambda: len(ops.kinds("typing")) == 1, "the first typing")
    t.now += 2  # the typing loop still sleeps (nothing wakes it): typing must not wait for it
    progress.started(KEY, CHAT, None, "run2")
    await wait_until_async(lambda: len(ops.kinds("typing")) == 2, "typing for the new message")
    await progress.close()


async def test_status_message_is_posted_once_edits_coalesce_and_it_is_removed() -> None:
    ops, t = Ops(), FakeTime()
    progress = Progress(ops, locate=locate, busy=lambda key: True, typing_interval=10, edit_interval=2, clock=t.clock, sleep=t.sleep)
    progress.on_event(tool("read_file"))
    await wait_until_async(lambda: ops.kinds("post"), "the status message")
    for step in ("list_dir", "exec", "write_file"):  # within one edit interval
        progress.on_event(tool(step))
    await t.advance(2)
    state = progress._sessions[KEY]
    await wait_until_async(lambda: state.worker is not None and state.worker.done(), "the edits to settle")
    assert len(ops.kinds("post")) == 1 and "read_file" in to_plain(ops.kinds("post")[0])
    assert len(ops.kinds("edit")) == 1 and "step 4: write_file" in to_plain(ops.kinds("edit")[0])  # only the latest
    progress.on_event({"type": "run_end", "session": KEY, "run_id": "r"})
    await wait_until_async(lambda: ops.kinds("delete"), "the status message deleted")
    assert ops.kinds("delete") == ["101"]
    progress.on_event(tool("exec"))  # the next run gets a fresh status message, numbered from 1
    await wait_until_async(lambda: len(ops.kinds("post")) == 2, "a fresh status message")
    assert to_plain(ops.kinds("post")[-1]).startswith("⚙️ Working… step 1: exec")
    await progress.close()


async def test_a_run_that_ends_while_the_status_is_being_posted_leaves_nothing_behind() -> None:
    ops = Ops()
    progress = Progress(ops, locate=locate, busy=lambda key: True, typing_interval=10)
    progress.on_event(tool("exec"))
    progress.on_event({"type": "run_end", "session": KEY, "run_id": "r"})  # a quick run: nothing is shown at all
    await wait_until_async(lambda: progress._sessions == {}, "the session forgotten")
    assert ops.calls == []
    ops.post_gate.clear()
    progress.on_event(tool("exec"))
    await ops.post_started.wait()  # the post is under way
    progress.on_event({"type": "run_end", "session": KEY, "run_id": "r2"})
    ops.post_gate.set()
    await wait_until_async(lambda: progress._sessions == {}, "the session forgotten")
    assert len(ops.kinds("post")) == 1 and len(ops.kinds("delete")) == 1
    progress.on_event({"type": "tool_start", "session": "main", "tool": "x"})  # not a Telegram session
    assert progress._sessions == {}
    await progress.close()


async def test_a_background_job_stays_listed_after_the_run_until_it_ends() -> None:
    ops = Ops()
    progress = Progress(ops, locate=locate, busy=lambda key: True, typing_interval=10, edit_interval=0.05)
    progress.on_event(tool("exec"))
    progress.on_event({"type": "bg_job_start", "session": KEY, "job": "bg-3", "tool": "exec", "summary": "make test"})
    await wait_until_async(lambda: any("bg-3" in t for t in ops.kinds("post") + ops.kinds("edit")), "the job listed")
    progress.on_event({"type": "run_end", "session": KEY, "run_id": "r"})
    await wait_until_async(lambda: ops.kinds("edit") and "step" not in ops.kinds("edit")[-1], "an edit without the step")
    shown = ops.kinds("edit")[-1]
    assert "job bg-3" in shown and "make test" in shown and not ops.kinds("delete")  # still there after the run
    progress.on_event({"type": "bg_job_end", "session": KEY, "job": "bg-3", "status": "done", "exit": 0})
    await wait_until_async(lambda: len(ops.kinds("delete")) == 1, "the status deleted")  # gone once the job ended
    await progress.close()
