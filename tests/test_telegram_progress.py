"""Typing and the status message, driven by hub events, against recording chat operations (no network)."""

from __future__ import annotations

import asyncio
from typing import Any

from channels.telegram.progress import Progress

KEY, CHAT = "telegram:9", "9"


class Ops:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.next_id = 100

    async def typing(self, chat_id: str, thread_id: int | None) -> None:
        self.calls.append(("typing", chat_id))

    async def post(self, chat_id: str, text: str, thread_id: int | None, *, markup: Any = None,
                   html: bool = False) -> int | None:
        await asyncio.sleep(0.01)  # a real call takes time: events keep arriving meanwhile
        self.next_id += 1
        self.calls.append(("post", text))
        return self.next_id

    async def edit(self, chat_id: str, message_id: int, text: str, *, html: bool = False) -> bool:
        self.calls.append(("edit", text))
        return True

    async def delete(self, chat_id: str, message_id: int) -> None:
        self.calls.append(("delete", message_id))

    def kinds(self, kind: str) -> list[Any]:
        return [value for name, value in self.calls if name == kind]


def tool(step: str) -> dict[str, Any]:
    return {"type": "tool_start", "session": KEY, "tool": step, "summary": "path=."}


async def test_typing_repeats_while_busy_and_stops_with_the_run() -> None:
    ops, busy = Ops(), {KEY}
    progress = Progress(ops, lambda key: key in busy, typing_interval=0.05)
    progress.started(KEY, CHAT, None, "run1")
    await asyncio.sleep(0.22)
    ticks = len(ops.kinds("typing"))
    assert ticks >= 3
    progress.on_event({"type": "run_end", "session": KEY, "run_id": "run1"})
    busy.clear()
    await asyncio.sleep(0.15)
    assert len(ops.kinds("typing")) <= ticks + 1
    await progress.close()


async def test_a_new_message_shows_typing_at_once() -> None:
    ops = Ops()
    progress = Progress(ops, lambda key: True, typing_interval=10)
    progress.clock = lambda: 1000.0  # type: ignore[assignment]
    progress.started(KEY, CHAT, None, "run1")
    await asyncio.sleep(0.02)
    progress.clock = lambda: 1002.0  # type: ignore[assignment]
    progress.started(KEY, CHAT, None, "run2")  # the loop sleeps for 10 s; typing must not wait for it
    await asyncio.sleep(0.02)
    assert len(ops.kinds("typing")) == 2
    await progress.close()


async def test_status_message_is_posted_once_edits_coalesce_and_it_is_removed() -> None:
    ops = Ops()
    progress = Progress(ops, lambda key: True, typing_interval=10, edit_interval=0.2)
    for step in ("read_file", "list_dir", "exec", "write_file"):
        progress.on_event(tool(step))
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.3)
    assert len(ops.kinds("post")) == 1 and "read_file" in ops.kinds("post")[0]
    assert len(ops.kinds("edit")) == 1 and "step 4: write_file" in ops.kinds("edit")[0]  # only the latest
    progress.on_event({"type": "run_end", "session": KEY, "run_id": "r"})
    await asyncio.sleep(0.05)
    assert ops.kinds("delete") == [101]
    progress.on_event(tool("exec"))  # the next run gets a fresh status message, numbered from 1
    await asyncio.sleep(0.05)
    assert ops.kinds("post")[-1].startswith("⚙️ Working… step 1: exec")
    await progress.close()


async def test_a_run_that_ends_while_the_status_is_being_posted_leaves_nothing_behind() -> None:
    ops = Ops()
    progress = Progress(ops, lambda key: True, typing_interval=10)
    progress.on_event(tool("exec"))
    progress.on_event({"type": "run_end", "session": KEY, "run_id": "r"})  # a quick run: nothing is shown at all
    await asyncio.sleep(0.05)
    assert ops.calls == [] and progress._sessions == {}
    progress.on_event(tool("exec"))
    await asyncio.sleep(0.003)  # the post is under way
    progress.on_event({"type": "run_end", "session": KEY, "run_id": "r2"})
    await asyncio.sleep(0.05)
    assert len(ops.kinds("post")) == 1 and len(ops.kinds("delete")) == 1
    assert progress._sessions == {}
    progress.on_event({"type": "tool_start", "session": "main", "tool": "x"})  # not a Telegram session
    assert progress._sessions == {}
    await progress.close()


async def _until(predicate: Any, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.01)


async def test_a_background_job_stays_listed_after_the_run_until_it_ends() -> None:
    ops = Ops()
    progress = Progress(ops, lambda key: True, typing_interval=10, edit_interval=0.05)
    progress.on_event(tool("exec"))
    progress.on_event({"type": "bg_job_start", "session": KEY, "job": "bg-3", "tool": "exec", "summary": "make test"})
    await _until(lambda: any("bg-3" in t for t in ops.kinds("post") + ops.kinds("edit")))
    progress.on_event({"type": "run_end", "session": KEY, "run_id": "r"})
    await _until(lambda: ops.kinds("edit") and "step" not in ops.kinds("edit")[-1])
    shown = ops.kinds("edit")[-1]
    assert "job bg-3" in shown and "make test" in shown and not ops.kinds("delete")  # still there after the run
    progress.on_event({"type": "bg_job_end", "session": KEY, "job": "bg-3", "status": "done", "exit": 0})
    await _until(lambda: len(ops.kinds("delete")) == 1)  # gone once the job ended
    await progress.close()
