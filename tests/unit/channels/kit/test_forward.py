"""A once-per-bot connection in a fleet, the kit's side: one runner holds it, the other is on standby and
sends through it; a forwarded call is checked by name and arguments before the adapter sees it. The
fleet's transport is stood in for in-process here (tests/unit/agent/fleet/test_calls.py runs the real
one on Redis; tests/e2e/fleet/test_fleet_channels.py the whole)."""

from __future__ import annotations

import asyncio
import base64
import logging
from typing import Any, Awaitable, Callable

import pytest

from clawgate.agent.bus import OutboundMessage
from clawgate.channels.base import DeliveryError
from clawgate.channels.kit import Target, Unconfirmed
from clawgate.channels.kit.forward import BadCall, decode, encode, execute, unwrap
from clawgate.channels.kit.runner import ChannelRunner
from tests.unit.channels.kit.support import Sleeps, make_kit, settle

Execute = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]


class OneLease:
    """The fleet's singleton lease and call queue for processes in one event loop."""

    def __init__(self) -> None:
        self.holder: str | None = None
        self.lock = asyncio.Lock()
        self.serving: dict[str, Execute] = {}

    def exclusive(self, node: str) -> Callable[[str, Callable[[], Awaitable[None]]], Awaitable[None]]:
        async def hold(name: str, body: Callable[[], Awaitable[None]]) -> None:
            async with self.lock:
                self.holder = node
                try:
                    await body()
                finally:
                    self.holder = None
        return hold

    def forwarder(self, node: str) -> Any:
        lease = self

        class Forward:
            async def call(self, name: str, op: str, args: dict[str, Any]) -> dict[str, Any]:
                return await lease.serving[name](op, args)

            async def serve(self, name: str, run: Execute) -> None:
                lease.serving[name] = run
                try:
                    await asyncio.Event().wait()
                finally:
                    if lease.serving.get(name) is run:
                        del lease.serving[name]

            async def holder(self, name: str) -> str | None:
                return lease.holder
        return Forward()


def two_runners(lease: "OneLease") -> list[ChannelRunner]:
    """Processes a and b running the same channel, sharing one connection lease."""
    runners = []
    for node in ("a", "b"):
        kit, adapter, _ = make_kit()
        kit.exclusive, kit.forward = lease.exclusive(node), lease.forwarder(node)
        runners.append(ChannelRunner(adapter, kit, sleep=Sleeps(), standby_poll=0.01))
    return runners


async def test_the_standby_runner_sends_through_the_one_holding_the_connection() -> None:
    lease = OneLease()
    runners = two_runners(lease)
    await runners[0].start()
    await settle(lambda: runners[0].status()["state"] == "running" and runners[0].kit.singleton in lease.serving,
                 "a holding the connection")
    await runners[1].start()
    await settle(lambda: runners[1].status()["state"] == "standby", "b on standby")
    assert runners[1].status()["reason"] == "connection held by a"
    assert runners[1].adapter.connects == 0  # never connected: the connection is a's
    await runners[1].send(OutboundMessage(channel="memory", chat_id="42", text="from b's run"))
    assert [(t.chat_id, text) for t, text in runners[0].adapter.sent] == [("42", "from b's run")]
    assert runners[0].adapter.sent[0][0].send_key  # the part's key reaches the holder's adapter
    assert runners[1].adapter.sent == []
    assert runners[0].kit.singleton == runners[1].kit.singleton  # the same name on every process
    for runner in runners:
        await runner.close()


async def test_a_stopped_holder_hands_the_connection_on_and_its_last_replies_go_through_the_next() -> None:
    lease = OneLease()
    runners = two_runners(lease)
    for runner in runners:
        await runner.start()
        await settle(lambda: lease.holder == "a", "a holding the connection")
    await settle(lambda: runners[1].status()["state"] == "standby", "b on standby")
    await runners[0].stop()  # the daemon stops: no more input here, the lease moves on
    await settle(lambda: runners[1].status()["state"] == "running" and runners[1].kit.singleton in lease.serving,
                 "b holding it and serving")
    assert runners[0].status()["state"] == "stopped" and not runners[0].kit.holding
    await runners[0].send(OutboundMessage(channel="memory", chat_id="9", text="a's last reply"))
    assert [text for _, text in runners[1].adapter.sent] == ["a's last reply"]
    assert runners[0].adapter.sent == []
    for runner in runners:
        await runner.close()


async def test_forwarded_failures_come_back_as_the_adapter_raised_them() -> None:
    kit, adapter, _ = make_kit()
    log = logging.getLogger("test")
    adapter.send_script = [DeliveryError("429", retry_after=2.5), Unconfirmed("timed out"),
                           DeliveryError("blocked", permanent=True)]
    args = encode("send_text", Target("7"), text="hi")
    for expected in (DeliveryError, Unconfirmed, DeliveryError):
        with pytest.raises(expected) as raised:
            unwrap(await execute(adapter, "send_text", args, log), "memory:x")
        last = raised.value
    assert isinstance(last, DeliveryError) and last.permanent
    with pytest.raises(NotImplementedError):
        unwrap(await execute(adapter, "edit_text", encode("edit_text", Target("7"), message_id="1", text="x"), log), "m")
    assert unwrap(await execute(adapter, "send_text", args, log), "m") == "1"


def test_only_known_calls_with_their_arguments_reach_the_adapter() -> None:
    caps = make_kit()[1].capabilities
    target = {"chat_id": "1", "thread_id": None, "reply_to": None}
    with pytest.raises(BadCall, match="unknown platform call"):
        decode("disconnect", {"target": target}, caps)
    with pytest.raises(BadCall, match="wrong arguments"):
        decode("send_text", {"target": target, "text": "x", "path": "/etc/passwd"}, caps)
    with pytest.raises(BadCall, match="strings"):
        decode("send_text", {"target": {**target, "chat_id": 1}, "text": "x"}, caps)
    with pytest.raises(BadCall, match="must be a string"):
        decode("delete", {"target": target, "message_id": ["1"]}, caps)
    file = {"target": target, "name": "a.txt", "data": base64.b64encode(b"x").decode(), "caption": ""}
    with pytest.raises(BadCall, match="limit"):  # this channel carries no files
        decode("send_file", file, caps)
    assert decode("send_text", {"target": target, "text": "hi"}, caps) == (Target("1"), {"text": "hi"})
    assert "send_key" not in encode("send_text", Target("1"), text="hi")["target"]  # as an older holder reads it
    keyed = encode("send_text", Target("1", send_key="m1:0"), text="hi")
    assert decode("send_text", keyed, caps) == (Target("1", send_key="m1:0"), {"text": "hi"})
    with pytest.raises(BadCall, match="strings"):
        decode("send_text", {"target": {**target, "send_key": 5}, "text": "x"}, caps)


async def test_a_prompt_of_a_run_on_another_process_is_answered_here_until_its_outcome() -> None:
    kit, _, _ = make_kit()
    request = {"id": "ap_1", "channel": "memory", "chat_id": "42", "session_key": "memory:42", "owner": True}
    assert kit.prompts.answer("ap_1", owner=True, approved=True, chat_id="42") == "This request is no longer pending."
    kit.prompts.on_remote_event({"type": "approval_request", "request": request})
    kit.prompts.on_remote_event({"type": "approval_request", "request": {**request, "id": "ap_2", "channel": "other"}})
    assert kit.prompts.answer("ap_1", owner=True, approved=True, chat_id="7") == "This request is no longer pending."
    assert kit.prompts.answer("ap_1", owner=False, approved=True, chat_id="42") == "Only the owner of this agent can answer this."
    assert kit.prompts.answer("ap_1", owner=True, approved=True, chat_id="42") == "Approved."
    assert not kit.prompts.pending_in("ap_2", None)  # another channel's request
    kit.prompts.on_remote_event({"type": "approval_result", "id": "ap_1", "approved": True})
    assert not kit.prompts.pending_in("ap_1", None)
