"""The agent loop driven without sockets: a scripted provider, real bus, sessions and tools."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from clawgate.agent.approvals import ApprovalBroker
from clawgate.agent.context.builder import ContextBuilder
from clawgate.agent.core.events import EventHub
from clawgate.agent.loop import AgentLoop
from clawgate.agent.providers.base import ModelRequest, ModelResponse
from clawgate.agent.session import SessionManager
from clawgate.agent.tools import ToolRegistry
from clawgate.agent.toolset import default_tools
from clawgate.config.schema import Settings
from clawgate.agent.bus import SqliteBus
from clawgate.agent.bus import InboundMessage
from clawgate.workspace.guard import WorkspaceGuard
from tests.waiting import wait_until_async


class ScriptedProvider:
    name = "scripted"

    def __init__(self, *replies: Any) -> None:
        self.replies = list(replies)
        self.requests: list[ModelRequest] = []

    async def complete(self, request: ModelRequest, on_text=None) -> ModelResponse:
        self.requests.append(request)
        reply = self.replies.pop(0)
        if isinstance(reply, BaseException):
            raise reply
        if callable(reply):
            return await reply()
        return reply

    async def close(self) -> None:
        return None


def text(t: str) -> ModelResponse:
    return ModelResponse(content=[{"type": "text", "text": t}], stop_reason="end_turn")


def call(name: str, args: dict, *, stop: str = "tool_use", cid: str = "t1") -> ModelResponse:
    return ModelResponse(content=[{"type": "tool_use", "id": cid, "name": name, "input": args}], stop_reason=stop)


@pytest.fixture
def make(tmp_path: Path):
    def build(provider: ScriptedProvider) -> tuple[AgentLoop, MessageBus, EventHub, WorkspaceGuard]:
        settings = Settings()
        ws = WorkspaceGuard(tmp_path / "ws")
        events = EventHub()
        bus = SqliteBus.open(tmp_path / "db.sqlite", fsync=False)
        tools = ToolRegistry(default_tools(settings), events=events, approvals=ApprovalBroker(events, mode="deny"))
        context = ContextBuilder(ws.root, tools=tools.definitions, model="m", max_tokens=100)
        loop = AgentLoop(bus=bus, sessions=SessionManager(tmp_path / "sessions", fsync=False), provider=provider,
                         tools=tools, context=context, events=events, settings=settings.agent, workspace=ws)
        return loop, bus, events, ws
    return build


def inbound(text: str, session: str = "s", **metadata: Any) -> InboundMessage:
    return InboundMessage(channel="gateway", chat_id=session, sender_id="u", session_key=session, text=text,
                          metadata=metadata)


async def run(loop: AgentLoop, bus: MessageBus, *msgs: InboundMessage) -> list:
    for msg in msgs:
        bus.publish_inbound(msg)
        loop.lanes.submit(msg.session_key, await bus.next_inbound())
    await asyncio.wait_for(loop.lanes.join(), 5)
    return list(bus.undelivered())


async def test_unexpected_error_still_answers_and_the_session_goes_on(make):
    loop, bus, events, _ = make(ScriptedProvider(RuntimeError("boom"), text("fine now")))
    ends = []
    events.subscribe(lambda e: ends.append(e) if e["type"] == "run_end" else None)
    replies = await run(loop, bus, inbound("one"), inbound("two"))
    assert [r.kind for r in replies] == ["error", "reply"]
    assert "went wrong" in replies[0].text and "RuntimeError" in replies[0].text
    assert replies[1].text == "fine now"
    assert len(ends) == 2 and bus.counts()["inboxOpen"] == 0


async def test_a_run_whose_session_writes_are_refused_stops_with_one_warning_and_no_answer(make, caplog):
    """A fleet worker that lost the session's lease mid-run (agent/fleet: Fenced): the refusal is a
    warning line, not a traceback, and this worker sends no "something went wrong" (the new holder answers)."""
    from clawgate.agent.fleet.bus import Fenced

    lost: list[bool] = []

    async def lose_the_lease_then_answer() -> ModelResponse:
        lost.append(True)
        return text("too late")

    loop, bus, *_ = make(ScriptedProvider(lose_the_lease_then_answer))

    def guard(key: str) -> None:
        if lost:
            raise Fenced(f"write to session {key} refused: this worker no longer holds partition 1")

    loop.sessions.guard = guard
    with caplog.at_level("WARNING"):
        sent = await run(loop, bus, inbound("hi"))
    assert sent == [] and lost
    assert [r.levelname for r in caplog.records] == ["WARNING"], [(r.levelname, r.getMessage()) for r in caplog.records]
    assert "no longer holds partition 1" in caplog.records[0].getMessage() and caplog.records[0].exc_info is None


async def test_tool_call_cut_off_by_max_tokens_is_not_run(make):
    loop, bus, _, ws = make(ScriptedProvider(
        call("write_file", {"path": "big.txt", "content": "partial"}, stop="max_tokens"), text("ok, smaller")))
    replies = await run(loop, bus, inbound("write a big file"))
    assert replies[0].text == "ok, smaller"
    assert not (ws.root / "big.txt").exists()
    result = loop.provider.requests[-1].messages[-1]["content"][0]
    assert result["is_error"] and "cut off by the output limit" in result["content"]


async def test_stop_only_cancels_a_turn_being_answered(make):
    gate = asyncio.Event()
    hook_ran = asyncio.Event()

    async def slow() -> ModelResponse:
        await gate.wait()
        return text("late")

    loop, bus, _, _ = make(ScriptedProvider(slow, text("after hook")))

    async def hook(session, msg) -> None:
        hook_ran.set()
        await asyncio.sleep(0.2)

    loop.after_run.append(hook)
    bus.publish_inbound(inbound("first"))
    loop.lanes.submit("s", await bus.next_inbound())
    await wait_until_async(lambda: loop.provider.requests, "the model call to start")
    assert loop.stop_current("s") is True
    await asyncio.wait_for(hook_ran.wait(), 2)
    assert loop.stop_current("s") is False  # the hook is bookkeeping, not a turn
    await loop.lanes.join()
    assert not loop._stopping
    [reply] = list(bus.undelivered())
    assert reply.text == "Stopped."


async def test_a_guests_stop_reaches_only_their_own_turn_or_queued_message(make):
    """A shared conversation: the owner's turn runs, the guest's message waits. The guest's stop takes the
    guest's message out of the queue (answered at once, never run) and leaves the owner's turn alone; the
    "Stopped." of a turn the guest stops answers the guest's /stop command."""
    gate = asyncio.Event()

    async def slow() -> ModelResponse:
        await gate.wait()
        return text("the owner's answer")

    async def forever() -> ModelResponse:
        await asyncio.Event().wait()
        return text("never")

    loop, bus, _, _ = make(ScriptedProvider(slow, forever))
    owners = InboundMessage(channel="slack", chat_id="C1", sender_id="1", session_key="s", text="owner's",
                            metadata={"owner": True, "message_id": "m1"})
    guests = InboundMessage(channel="slack", chat_id="C1", sender_id="2", session_key="s", text="guest's",
                            metadata={"message_id": "m2"})
    for msg in (owners, guests):
        bus.publish_inbound(msg)
        loop.lanes.submit("s", await bus.next_inbound())
    await wait_until_async(lambda: loop.provider.requests, "the owner's model call")
    assert loop.stop_current("s", user="slack:2") is False  # not the guest's turn
    assert loop.cancel_queued("s", "slack:3") == 0  # a third person has nothing queued
    assert loop.cancel_queued("s", "slack:2", reply_to="cmd-1") == 1
    [cancelled] = list(bus.undelivered())
    assert (cancelled.in_reply_to, cancelled.kind) == (guests.id, "notice") and "before it started" in cancelled.text
    assert cancelled.metadata["command_message"] == "cmd-1" and not bus.is_unanswered(guests.id)
    gate.set()
    await loop.lanes.join()
    assert [r.text for r in bus.undelivered() if r.in_reply_to == owners.id] == ["the owner's answer"]
    assert "guest's" not in [r.get("text") for r in loop.sessions.get("s").records if r.get("kind") == "user"]

    again = InboundMessage(channel="slack", chat_id="C1", sender_id="2", session_key="s", text="guest's again")
    bus.publish_inbound(again)
    loop.lanes.submit("s", await bus.next_inbound())
    await wait_until_async(lambda: len(loop.provider.requests) == 2, "the guest's model call")
    assert loop.stop_current("s", user="", reply_to="x") is False  # OWNER ("") names the owner's turns only
    assert loop.stop_current("s", user="slack:2", reply_to="cmd-2") is True
    await loop.lanes.join()
    [stopped] = [r for r in bus.undelivered() if r.in_reply_to == again.id]
    assert stopped.text == "Stopped." and stopped.metadata["command_message"] == "cmd-2"


async def test_triggered_run_acts_for_its_delivery_target(make):
    loop, bus, _, _ = make(ScriptedProvider(call("message", {"text": "progress"}), text("done")))
    msg = InboundMessage(channel="cron", chat_id="cron:j1", sender_id="cron", session_key="cron:j1", text="report",
                         metadata={"deliver": {"channel": "telegram", "chat_id": "42"}})
    replies = await run(loop, bus, msg)
    notice = [r for r in replies if r.kind == "notice"][0]
    assert (notice.channel, notice.chat_id) == ("telegram", "42")  # no approval needed: it is the person's chat
    assert [(r.channel, r.chat_id) for r in replies if r.kind == "reply"] == [("telegram", "42")]


async def test_recovery_finds_its_user_turn_however_long_the_run(make):
    loop, bus, _, _ = make(ScriptedProvider(*[call("list_dir", {}, cid=f"t{i}") for i in range(130)], text("end")))
    loop.settings.max_iterations = 200
    msg = inbound("long run")
    await run(loop, bus, msg)
    session = loop.sessions.get("s")
    assert len(session.records) > 400
    # Replayed after a crash: the answer already in the log is reused, no model call, no 2nd user turn.
    calls = len(loop.provider.requests)
    assert await loop.respond(session, msg) == ("end", "reply")
    assert len(loop.provider.requests) == calls
    assert [r["kind"] for r in session.records].count("user") == 1


async def test_a_session_that_cannot_be_opened_still_answers(make, tmp_path):
    """The session is opened inside the run's error handling: a key whose log cannot be opened
    (here a folder where the log file should be) gets the error reply, a run_end, and is answered."""
    loop, bus, events, _ = make(ScriptedProvider(text("other session fine")))
    (tmp_path / "sessions" / "broken.jsonl").mkdir(parents=True)
    ends = []
    events.subscribe(lambda e: ends.append(e) if e["type"] == "run_end" else None)
    replies = await run(loop, bus, inbound("hello", session="broken"), inbound("hi", session="fine"))
    by_session = {r.session_key: r for r in replies}
    assert by_session["broken"].kind == "error" and "went wrong" in by_session["broken"].text
    assert "IsADirectoryError" in by_session["broken"].text and "\n" not in by_session["broken"].text
    assert by_session["fine"].text == "other session fine"
    assert sorted(e["session"] for e in ends) == ["broken", "fine"]
    assert bus.counts()["inboxOpen"] == 0  # answered: it will not replay on the next start


async def test_an_invalid_key_from_an_old_inbox_row_still_answers(make):
    """A message accepted before keys were checked (its key cannot name a log) is answered once."""
    loop, bus, events, _ = make(ScriptedProvider())
    bad = "é" * 200
    replies = await run(loop, bus, inbound("hello", session=bad))
    assert len(replies) == 1 and replies[0].kind == "error" and "InvalidSessionKey" in replies[0].text
    assert bus.counts()["inboxOpen"] == 0 and loop.provider.requests == []


async def test_a_secret_in_tool_output_is_masked_in_the_session_log_and_trace(make, tmp_path):
    from clawgate.agent.core.redact import register_secrets
    from clawgate.agent.core.trace import TraceWriter

    secret = "sk-live-0123456789abcdef-loop-test"
    register_secrets([secret])
    loop, bus, events, ws = make(ScriptedProvider(call("read_file", {"path": ".env"}), text("read it")))
    events.subscribe(TraceWriter(tmp_path / "traces"))
    (ws.root / ".env").write_text(f"API_KEY={secret}\n")
    replies = await run(loop, bus, inbound("show me .env", session="leaky"))
    assert replies[0].text == "read it"
    log = (tmp_path / "sessions" / "leaky.jsonl").read_text()
    assert "API_KEY=sk-…***" in log and secret not in log  # the tool_done and tool_results records
    assert secret not in (tmp_path / "traces" / "leaky.jsonl").read_text()
    # what the model is shown from the log is masked too (the next request is built from it)
    assert secret not in repr(loop.provider.requests[-1].messages)


async def test_deltas_of_one_read_become_one_event_and_all_come_before_the_turn_ends(make):
    """A stream read often holds several text deltas; each event is a frame to every client."""
    async def streamed(on_text) -> ModelResponse:
        for piece in ("Hel", "lo, ", "wor"):  # arrive together, as one network read would deliver them
            on_text(piece)
        await asyncio.sleep(0.05)  # the next read comes later
        on_text("ld")
        on_text("!")  # the stream ends in the same step: flushed before turn_end, not after
        return text("Hello, world!")

    class Streaming(ScriptedProvider):
        async def complete(self, request: ModelRequest, on_text=None) -> ModelResponse:
            self.requests.append(request)
            return await streamed(on_text)

    loop, bus, events, _ = make(Streaming())
    seen: list[tuple[str, str]] = []
    events.subscribe(lambda e: seen.append((e["type"], e.get("text", ""))) if e["type"] in ("text_delta", "turn_end") else None)
    out = await run(loop, bus, inbound("hi"))
    assert out[0].text == "Hello, world!"
    assert seen == [("text_delta", "Hello, wor"), ("text_delta", "ld!"), ("turn_end", "")]
