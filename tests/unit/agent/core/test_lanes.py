"""Lanes: serial per key, concurrent across keys, capped, cancellable."""

from __future__ import annotations

import asyncio

from clawgate.agent.core.lanes import Lanes


async def test_serial_per_key_concurrent_across_keys_under_cap():
    running: set[str] = set()
    peak = 0
    order: dict[str, list[int]] = {}

    async def handle(key: str, item: int) -> None:
        nonlocal peak
        assert key not in running, "two items of one key ran at once"
        running.add(key)
        peak = max(peak, len(running))
        await asyncio.sleep(0.01)
        order.setdefault(key, []).append(item)
        running.discard(key)

    lanes: Lanes[str, int] = Lanes(handle, max_concurrent=3)
    for i in range(5):
        for key in "abcdef":
            lanes.submit(key, i)
    await lanes.join()
    assert all(items == [0, 1, 2, 3, 4] for items in order.values()) and len(order) == 6
    assert peak == 3


async def test_cancel_current_keeps_queue():
    done: list[int] = []
    started = asyncio.Event()

    async def handle(key: str, item: int) -> None:
        if item == 0:
            started.set()
            await asyncio.sleep(10)
        done.append(item)

    lanes: Lanes[str, int] = Lanes(handle)
    lanes.submit("k", 0)
    lanes.submit("k", 1)
    await started.wait()
    assert lanes.cancel_current("k")
    await asyncio.wait_for(lanes.join(), 2)
    assert done == [1]


async def test_failing_item_does_not_stop_the_lane():
    done: list[int] = []

    async def handle(key: str, item: int) -> None:
        if item == 0:
            raise RuntimeError("boom")
        done.append(item)

    lanes: Lanes[str, int] = Lanes(handle)
    lanes.submit("k", 0)
    lanes.submit("k", 1)
    await lanes.join()
    assert done == [1]
