"""Chat commands from the gateway's own clients (terminal, web page), through the real daemon: each one
answered at once while a run is busy, never queued behind it and never sent to the model."""

from __future__ import annotations

import threading

from tests.fakes.anthropic_api import text, tool_use
from tests.waiting import DEFAULT_TIMEOUT, wait_until


async def test_every_command_is_answered_at_once_while_a_run_is_busy(daemon, fake_model):
    gate = threading.Event()
    fake_model.enqueue(text("the slow answer", hold=gate))
    async with daemon.client(subscribe=["cmds"]) as client:
        ack = await client.request("chat.send", {"session": "cmds", "text": "take your time"})
        fake_model.wait_requests(1, timeout=DEFAULT_TIMEOUT)
        answers = {}
        for command in ("/help", "/status", "/tasks", "/undo 2", "/new", "/start"):
            result = await client.request("chat.send", {"session": "cmds", "text": command})
            assert result["status"] == "command" and result["command"] == command[1:].split()[0]
            answers[command] = result["text"]
        assert len(fake_model.requests) == 1  # none of them reached the model, none waited for the run
        help_text = answers["/help"]
        for name in ("/new", "/status", "/stop", "/tasks", "/undo", "/approve", "/deny"):
            assert name in help_text
        assert "working" in answers["/status"]
        assert answers["/tasks"] == "No active tasks in this chat."
        assert "Send /stop first" in answers["/new"]  # busy: it says so and offers /stop
        # the answer also reaches this client as a chat event of kind "command", not numbered as a reply
        events = []
        async for frame in client.events():
            if frame["event"] == "chat" and frame["payload"].get("kind") == "command":
                events.append(frame["payload"])
                if len(events) == len(answers):
                    break
        assert [e["text"] for e in events] == list(answers.values()) and all("seq" not in e for e in events)
        stop = await client.request("chat.send", {"session": "cmds", "text": "/stop"})
        assert stop["status"] == "command" and "Stopping" in stop["text"]
        async for frame in client.events():
            payload = frame["payload"]
            if frame["event"] == "chat" and payload.get("runId") == ack["runId"] and payload["state"] != "delta":
                assert payload["text"] == "Stopped."
                break
        gate.set()
        status = await client.chat("/status", session="cmds")
        assert status["kind"] == "command" and "idle" in status["text"]
        fresh = await client.chat("/new", session="cmds")
        assert fresh["text"].startswith("Started a new conversation")
        # an unknown /word is text for the model, as on every channel
        fake_model.enqueue(text("that is not a command"))
        answer = await client.chat("/frobnicate now", session="cmds")
        assert answer["text"] == "that is not a command" and answer.get("kind") == "reply"


async def test_approve_and_deny_by_command_in_the_gateway_chat(daemon, fake_model):
    fake_model.enqueue(tool_use("exec", {"argv": ["touch", "by-command.txt"]}), text("Created it."))
    async with daemon.client(subscribe=["appr"]) as client:
        ack = await client.request("chat.send", {"session": "appr", "text": "make a file"})
        request = None
        async for frame in client.events():
            if frame["event"] == "approval" and frame["payload"].get("state") == "requested":
                request = frame["payload"]
                break
        assert request is not None
        missing = await client.request("chat.send", {"session": "appr", "text": "/approve nosuchid"})
        assert "No pending request nosuchid" in missing["text"]
        assert (await client.request("chat.send", {"session": "appr", "text": "/approve"}))["text"].startswith("Say which")
        done = await client.request("chat.send", {"session": "appr", "text": f"/approve {request['id']}"})
        assert done["text"] == "Approved."
        async for frame in client.events():
            payload = frame["payload"]
            if frame["event"] == "chat" and payload.get("runId") == ack["runId"] and payload["state"] == "final":
                assert payload["text"] == "Created it."
                break
    wait_until(lambda: (daemon.workspace / "by-command.txt").exists(), "the approved file")
