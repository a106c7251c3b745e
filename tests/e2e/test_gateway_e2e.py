"""End-to-end through the real daemon process and its WebSocket."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from tests.fakes.anthropic_api import text, tool_use
from tests.harness import TOKEN


async def test_chat_round_trip_streams_deltas_and_final(daemon, fake_model):
    # The model's stream waits after its first delta until the client has it (deltas that arrive
    # together are sent as one event), so the answer must reach the client in parts.
    gate = threading.Event()
    fake_model.enqueue(text("Hello! I am here to help you today.", hold=gate))
    async with daemon.client() as client:
        assert client.hello["protocol"] == 1
        assert "chat.send" in {m["name"] for m in client.hello["methods"]}
        deltas: list[str] = []
        final = await client.chat("hi", on_delta=lambda t: (deltas.append(t), gate.set()))
    assert final["state"] == "final"
    assert final["text"] == "Hello! I am here to help you today."
    assert len(deltas) > 1 and "".join(deltas) == final["text"]
    body = fake_model.requests[-1]
    assert body["messages"][-1]["content"][-1]["text"] == "hi"


async def test_tool_round_trip_writes_file_in_workspace(daemon, fake_model):
    fake_model.enqueue(tool_use("write_file", {"path": "notes/hello.txt", "content": "written by the agent"}),
                       text("Done: wrote notes/hello.txt."))
    async with daemon.client(subscribe=["main"]) as client:
        final = await client.chat("write the note")
        events = [f for f in client._events if f["event"] == "agent"]
    assert final["text"] == "Done: wrote notes/hello.txt."
    assert (daemon.workspace / "notes/hello.txt").read_text() == "written by the agent"
    result = fake_model.requests[-1]["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and "created notes/hello.txt" in result["content"]
    audit = [json.loads(line) for line in (daemon.home / "state/audit.jsonl").read_text().splitlines()]
    assert audit[-1]["tool"] == "write_file" and audit[-1]["status"] == "ok"


async def test_agent_events_reach_the_client(daemon, fake_model):
    fake_model.enqueue(tool_use("list_dir", {"path": "."}), text("listed"))
    async with daemon.client() as client:
        ack = await client.request("chat.send", {"session": "ev", "text": "list"})
        streams = []
        async for frame in client.events():
            if frame["event"] == "agent":
                streams.append(frame["payload"]["stream"])
            if frame["event"] == "chat" and frame["payload"]["state"] == "final":
                assert frame["payload"]["runId"] == ack["runId"]
                break
    assert streams[:3] == ["turn_end", "tool_start", "tool_end"] or ["tool_start", "tool_end"] == [s for s in streams if s.startswith("tool")]
    assert "turn_end" in streams and "run_end" in streams


async def test_cli_chat_one_shot(daemon, fake_model):
    fake_model.enqueue(text("the answer is 42"))
    result = await asyncio.to_thread(daemon.cli, "chat", "-m", "question", "--session", "cli")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "the answer is 42"


async def test_cli_chat_without_daemon_says_so_in_one_line(daemon):
    daemon.kill()
    result = await asyncio.to_thread(daemon.cli, "chat", "-m", "hello")
    assert result.returncode == 3
    assert result.stderr.strip().count("\n") == 0
    assert "no gateway is running" in result.stderr and "Traceback" not in result.stderr


async def test_wrong_token_closes_with_reason(daemon):
    async with connect(daemon.url) as ws:
        await ws.send(json.dumps({"type": "req", "id": "1", "method": "connect", "params": {"auth": {"token": "nope"}}}))
        with pytest.raises(ConnectionClosed) as info:
            await ws.recv()
    assert info.value.rcvd.code == 1008 and "wrong gateway token" in info.value.rcvd.reason
    async with daemon.client() as client:  # still serving
        assert (await client.request("status"))["version"]


async def test_first_frame_must_be_connect(daemon):
    async with connect(daemon.url) as ws:
        await ws.send(json.dumps({"type": "req", "id": "1", "method": "status", "params": {}}))
        with pytest.raises(ConnectionClosed) as info:
            await ws.recv()
    assert "first frame must be a connect" in info.value.rcvd.reason


async def test_bad_frames_get_error_responses_and_connection_survives(daemon):
    async with connect(daemon.url) as ws:
        await ws.send(json.dumps({"type": "req", "id": "c", "method": "connect", "params": {"auth": {"token": TOKEN}}}))
        assert json.loads(await ws.recv())["ok"] is True
        cases = [
            ("{not json", None, "invalid_frame"),
            ("[1,2]", None, "invalid_frame"),
            (json.dumps({"type": "req", "id": "u", "method": "no.such"}), "u", "unknown_method"),
            (json.dumps({"type": "req", "id": "p", "method": "chat.send", "params": {}}), "p", "invalid_params"),
            (json.dumps({"type": "req", "id": "q", "method": "chat.send", "params": {"text": 5}}), "q", "invalid_params"),
            (json.dumps({"type": "req", "id": "x", "method": "chat.send", "params": {"text": "a", "bogus": 1}}), "x", "invalid_params"),
            (json.dumps({"type": "nope", "id": "t"}), "t", "invalid_frame"),
        ]
        for raw, rid, code in cases:
            await ws.send(raw)
            frame = json.loads(await ws.recv())
            assert frame["type"] == "res" and frame["ok"] is False, raw
            assert frame["id"] == rid and frame["error"]["code"] == code, frame
            assert frame["error"]["message"]
        await ws.send(json.dumps({"type": "req", "id": "s", "method": "status"}))
        assert json.loads(await ws.recv())["ok"] is True


async def test_oversize_frame_closes_1009_and_daemon_survives(daemon):
    async with connect(daemon.url, max_size=None) as ws:
        await ws.send(json.dumps({"type": "req", "id": "c", "method": "connect", "params": {"auth": {"token": TOKEN}}}))
        await ws.recv()
        await ws.send("x" * (2 * 1024 * 1024))
        with pytest.raises(ConnectionClosed) as info:
            await ws.recv()
    assert info.value.rcvd.code == 1009
    async with daemon.client() as client:
        assert (await client.request("status"))["version"]


async def test_no_provider_configured_answers_how_to_fix(daemon_factory):
    proc = daemon_factory(model=False)
    async with proc.client() as client:
        final = await client.chat("hello")
    assert final["state"] == "error"
    assert "ANTHROPIC_API_KEY" in final["text"]


async def test_model_overloaded_then_recovers_and_final_failure_is_reported(daemon, fake_model):
    fake_model.fail_next(529, times=2)
    fake_model.enqueue(text("made it"))
    async with daemon.client() as client:
        assert (await client.chat("try"))["text"] == "made it"
        fake_model.fail_next(529, times=50)
        final = await client.chat("try again")
    assert final["state"] == "error"
    assert "unavailable" in final["text"].lower()


async def test_history_and_sessions_and_reset(daemon, fake_model):
    async with daemon.client() as client:
        await client.chat("first", session="s1")
        await client.chat("second", session="s1")
        history = await client.request("chat.history", {"session": "s1"})
        assert [m["text"] for m in history["messages"] if m["role"] == "user"] == ["first", "second"]
        assert [m["text"] for m in history["messages"] if m["role"] == "assistant"] == ["echo: first", "echo: second"]
        keys = [s["key"] for s in (await client.request("sessions.list"))["sessions"]]
        assert "s1" in keys
        reset = await client.request("sessions.reset", {"session": "s1"})
        assert reset["archived"]
        assert (await client.request("chat.history", {"session": "s1"}))["messages"] == []
    archived = list((daemon.home / "state/sessions").glob("s1.*.archived"))
    assert len(archived) == 1


async def test_transcript_survives_restart(daemon, fake_model):
    async with daemon.client() as client:
        await client.chat("remember me", session="r")
    daemon.restart()
    fake_model.enqueue(text("still here"))
    async with daemon.client() as client:
        await client.chat("again", session="r")
    messages = fake_model.requests[-1]["messages"]
    texts = [b.get("text") for m in messages for b in m["content"] if isinstance(b, dict)]
    assert "remember me" in texts and "echo: remember me" in texts


async def test_sigterm_exits_cleanly(daemon):
    assert daemon.terminate() == 0
    assert "shutting down" in daemon.log_text()


async def test_slow_client_is_dropped_and_never_blocks_the_daemon(daemon_factory, fake_model):
    from websockets.asyncio.client import connect as ws_connect

    import base64
    import os

    # Incompressible, so permessage-deflate cannot shrink it below the socket buffers.
    big = base64.b64encode(os.urandom(150_000)).decode()
    fake_model.responder = lambda body: text(big)
    daemon = daemon_factory({"CLAWGATE_GATEWAY__SEND_QUEUE": "8"})
    # A client that subscribes to everything and then never reads again.
    slow = await ws_connect(daemon.url, max_size=None, max_queue=1)
    await slow.send(json.dumps({"type": "req", "id": "c", "method": "connect",
                                "params": {"auth": {"token": TOKEN}, "subscribe": "*"}}))
    try:
        async with daemon.client() as client:
            for i in range(40):
                final = await asyncio.wait_for(client.chat(f"m{i}", session="busy"), 10)
                assert len(final["text"]) == 200_000
            status = await client.request("status")
        assert status["clients"] == 1, "the slow client should have been disconnected"
        assert "too slow" in daemon.log_text()
    finally:
        slow.transport.abort()


async def test_a_client_can_ask_for_chat_events_only(daemon, fake_model):
    """A plain chat client is not sent the checkpoint and agent events a dashboard wants."""
    fake_model.enqueue(text("first answer"), text("second answer"))

    async def every_frame_until_final(ws, events: list[str] | None, ready: asyncio.Event) -> list[dict]:
        params = {"auth": {"token": TOKEN}, "subscribe": ["main"], **({"events": events} if events else {})}
        await ws.send(json.dumps({"type": "req", "id": "c", "method": "connect", "params": params}))
        assert json.loads(await ws.recv())["ok"] is True
        ready.set()
        frames = []
        while True:
            frame = json.loads(await asyncio.wait_for(ws.recv(), 60))
            frames.append(frame)
            if frame.get("event") == "chat" and frame["payload"].get("state") == "final":
                if frame["payload"]["text"] == "second answer":
                    return frames

    async with connect(daemon.url) as narrow, connect(daemon.url) as wide:
        ready = asyncio.Event(), asyncio.Event()
        narrow_frames = asyncio.ensure_future(every_frame_until_final(narrow, ["chat"], ready[0]))
        wide_frames = asyncio.ensure_future(every_frame_until_final(wide, None, ready[1]))
        await asyncio.wait_for(asyncio.gather(ready[0].wait(), ready[1].wait()), 60)  # both listen first
        async with daemon.client() as sender:
            assert (await sender.chat("hi"))["text"] == "first answer"
            assert (await sender.chat("again"))["text"] == "second answer"
        narrow_seen, wide_seen = await narrow_frames, await wide_frames
    names = {f["event"] for f in narrow_seen}
    assert names == {"chat"}  # deltas and finals only
    assert [f["seq"] for f in narrow_seen] == list(range(1, len(narrow_seen) + 1))  # seq counts what it got
    assert {"delta", "final"} <= {f["payload"]["state"] for f in narrow_seen}
    assert {"chat", "checkpoint", "agent"} <= {f["event"] for f in wide_seen}


async def test_unknown_event_names_are_refused_in_one_line(daemon):
    async with connect(daemon.url) as ws:
        await ws.send(json.dumps({"type": "req", "id": "c", "method": "connect",
                                  "params": {"auth": {"token": TOKEN}, "subscribe": ["main"],
                                             "events": ["chat", "gossip"]}}))
        reply = json.loads(await ws.recv())
        with pytest.raises(ConnectionClosed):
            await ws.recv()
    assert reply["ok"] is False and reply["error"]["code"] == "invalid_params"
    assert "'gossip'" in reply["error"]["message"] and "chat" in reply["error"]["message"]
    assert "\n" not in reply["error"]["message"]
