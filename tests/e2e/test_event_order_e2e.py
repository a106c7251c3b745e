"""A request's response comes before the events it causes: `chat.send`'s result arrives before
the run's `checkpoint`, `agent` and `chat` events (docs/protocol.md, "Order")."""

from __future__ import annotations

import json

from websockets.asyncio.client import connect

from tests.fakes.anthropic_api import text, tool_use


async def test_chat_send_result_comes_before_the_events_of_its_run(daemon, fake_model):
    fake_model.enqueue(tool_use("write_file", {"path": "a.txt", "content": "a"}), text("wrote a.txt"))
    async with connect(daemon.url, open_timeout=60) as ws:
        await ws.send(json.dumps({"type": "req", "id": "c", "method": "connect",
                                  "params": {"auth": {"token": daemon.client_token}, "subscribe": ["o"]}}))
        assert json.loads(await ws.recv())["ok"]
        await ws.send(json.dumps({"type": "req", "id": "s", "method": "chat.send", "params": {"session": "o", "text": "go"}}))
        frames = []
        while not (frames and frames[-1].get("event") == "chat" and frames[-1]["payload"]["state"] == "final"):
            frames.append(json.loads(await ws.recv()))
    kinds = [f.get("event") or f["type"] for f in frames]
    assert kinds[0] == "res" and frames[0]["id"] == "s" and frames[0]["ok"], kinds
    assert "checkpoint" in kinds and kinds.count("res") == 1
    event_seqs = [f["seq"] for f in frames if f["type"] == "event"]
    assert event_seqs == sorted(event_seqs)
