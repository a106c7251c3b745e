"""Frames clients parse, through the real daemon's WebSocket: the heartbeat `tick`, tool-step
summaries in `agent` events, and the close reason for a binary `connect` frame."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from clawgate.gateway.client import GatewayClient
from tests.fakes.anthropic_api import text, tool_use


async def first_event(client: GatewayClient, event: str, timeout: float = 60.0) -> dict[str, Any]:
    async def scan() -> dict[str, Any]:
        async for frame in client.events():
            if frame["event"] == event:
                return frame
        raise AssertionError("the gateway closed the connection")
    return await asyncio.wait_for(scan(), timeout)


async def test_tick_carries_epoch_seconds(daemon_factory) -> None:
    daemon = daemon_factory({"CLAWGATE_GATEWAY__TICK_SECONDS": "0.5"})
    async with daemon.client() as client:
        before = time.time()
        tick = await first_event(client, "tick")
        after = time.time()
    ts = tick["payload"]["ts"]
    # a wall-clock reading taken between the two, not the monotonic clock (hours or days since boot)
    assert before - 5 <= ts <= after + 5, (before, ts, after)


async def test_tool_step_summaries_are_json(daemon, fake_model) -> None:
    args = {"path": "notes/it's.txt", "content": 'she said "hi"\n' + "x" * 300}
    nested = {"options": {"path": "a.txt", "flags": [1, True, None]}, "label": "{'not': 'a repr'}"}
    fake_model.enqueue(tool_use("write_file", args), tool_use("no_such_tool", nested), text("done"))
    starts: list[dict[str, Any]] = []
    async with daemon.client() as client:
        await client.request("chat.send", {"session": "steps", "text": "write it"})

        async def scan() -> dict[str, Any]:
            async for frame in client.events():
                if frame["event"] == "agent" and frame["payload"]["stream"] == "tool_start":
                    starts.append(frame["payload"])
                if frame["event"] == "chat" and frame["payload"]["state"] == "final":
                    return frame["payload"]
            raise AssertionError("the gateway closed the connection")
        final = await asyncio.wait_for(scan(), 120)
    assert final["text"] == "done"
    assert [s["tool"] for s in starts] == ["write_file", "no_such_tool"]
    written = json.loads(starts[0]["summary"])
    assert written["path"] == "notes/it's.txt"
    assert written["content"].startswith('she said "hi"\n') and written["content"].endswith("…")
    assert len(starts[0]["summary"]) <= 200
    assert json.loads(starts[1]["summary"]) == nested


async def test_a_binary_connect_frame_is_closed_with_a_reason(daemon) -> None:
    request = {"type": "req", "id": "1", "method": "connect",
               "params": {"auth": {"token": daemon.client_token}}}
    async with connect(daemon.url, open_timeout=60) as ws:
        await ws.send(json.dumps(request).encode())
        try:
            extra = await asyncio.wait_for(ws.recv(), 60)
            raise AssertionError(f"the gateway answered a binary connect: {extra!r}")
        except ConnectionClosed:
            pass
        assert ws.close_code == 1003
        assert "binary frame refused" in (ws.close_reason or "") and "JSON text frame" in ws.close_reason
    # the same request as a text frame is accepted
    async with connect(daemon.url, open_timeout=60) as ws:
        await ws.send(json.dumps(request))
        hello = json.loads(await asyncio.wait_for(ws.recv(), 60))
    assert hello.get("ok") is True, hello
