"""Outbound delivery: outages are waited out, permanent errors are not retried, chats are independent."""

from __future__ import annotations

import asyncio

from clawgate.channels.base import Channel, DeliveryError
from clawgate.agent.bus import SqliteBus
from clawgate.gateway.dispatcher import Dispatcher
from clawgate.agent.bus import OutboundMessage


class Flaky(Channel):
    name = "flaky"

    def __init__(self, failures: dict[str, list[DeliveryError | Exception]]) -> None:
        self.failures = failures
        self.sent: list[str] = []

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    async def send(self, msg: OutboundMessage) -> None:
        queue = self.failures.get(msg.chat_id, [])
        if queue:
            raise queue.pop(0)
        self.sent.append(msg.text)


async def deliver(tmp_path, channel: Flaky, *msgs: OutboundMessage) -> tuple[Store, list[float]]:
    waits: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        waits.append(seconds)
        await asyncio.sleep(0)

    bus = SqliteBus.open(tmp_path / "db", fsync=False)
    dispatcher = Dispatcher(bus, {"flaky": channel}, sleep=fake_sleep)
    for msg in msgs:
        bus.publish_outbound(msg)
        dispatcher.lanes.submit((msg.channel, msg.chat_id), await bus.next_outbound())
    await asyncio.wait_for(dispatcher.lanes.join(), 5)
    return bus, waits


def out(chat: str, text: str) -> OutboundMessage:
    return OutboundMessage(channel="flaky", chat_id=chat, text=text)


async def test_a_long_outage_is_waited_out_not_dropped(tmp_path):
    channel = Flaky({"a": [DeliveryError("network down") for _ in range(12)]})
    msg = out("a", "hello")
    store, waits = await deliver(tmp_path, channel, msg)
    assert channel.sent == ["hello"]
    assert store.delivery_status(msg.id) == "delivered"
    assert max(waits) == 300.0 and sum(waits) > 600  # minutes of outage, capped backoff


async def test_permanent_error_is_given_up_at_once(tmp_path):
    channel = Flaky({"a": [DeliveryError("blocked by user", permanent=True)]})
    msg = out("a", "hello")
    store, waits = await deliver(tmp_path, channel, msg)
    assert channel.sent == [] and waits == [] and store.delivery_status(msg.id) == "failed"


async def test_retry_after_is_honoured_and_other_chats_are_not_delayed(tmp_path):
    channel = Flaky({"slow": [DeliveryError("429", retry_after=7.0)]})
    store, waits = await deliver(tmp_path, channel, out("slow", "later"), out("fast", "now"))
    assert waits == [7.0]
    assert channel.sent.index("now") < channel.sent.index("later")


async def test_a_channel_bug_is_retried_a_few_times_then_recorded(tmp_path):
    channel = Flaky({"a": [RuntimeError("bug")] * 10})
    msg = out("a", "x")
    store, waits = await deliver(tmp_path, channel, msg)
    assert len(waits) == 4 and store.delivery_status(msg.id) == "failed"
