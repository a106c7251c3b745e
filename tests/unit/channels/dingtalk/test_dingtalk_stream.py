"""The SDK's Stream client against the fake gateway (tests/fakes/dingtalk): the open-connection address is each
client's own, an envelope is ACKed only after the handler returned (a handler that fails leaves it to be
delivered again), a message that can never be read is ACKed and dropped, refused credentials are told apart."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Iterator

import pytest

from clawgate.channels.dingtalk.stream import Credential, OpenRefused, RobotHandler, StreamClient
from tests.fakes.dingtalk import CLIENT_ID, CLIENT_SECRET, FakeDingTalk
from tests.fakes.dingtalk.server import ROBOT_TOPIC
from tests.waiting import wait_until_async

LOG = logging.getLogger("test.dingtalk")


@pytest.fixture
def fake() -> Iterator[FakeDingTalk]:
    with FakeDingTalk() as server:
        yield server


def client_for(fake: FakeDingTalk, handler: RobotHandler, secret: str = CLIENT_SECRET) -> StreamClient:
    client = StreamClient(Credential(fake.client_id, secret), fake.url, LOG, timeout=10)
    client.register_callback_handler(ROBOT_TOPIC, handler)
    return client


async def test_each_client_opens_its_connection_at_its_own_address() -> None:
    with FakeDingTalk() as one, FakeDingTalk(client_id="dingother02") as two:
        first = StreamClient(Credential(CLIENT_ID, CLIENT_SECRET), one.url, LOG, timeout=10)
        second = StreamClient(Credential("dingother02", CLIENT_SECRET), two.url, LOG, timeout=10)
        for client in (first, second):
            client.register_callback_handler(ROBOT_TOPIC, RobotHandler(lambda *_: asyncio.sleep(0)))
        assert (await asyncio.to_thread(first.open_connection))["ticket"]
        assert (await asyncio.to_thread(second.open_connection))["ticket"]
        assert one.opens_count() == 1 and two.opens_count() == 1
        assert one.opens[0]["subscriptions"] == [{"type": "CALLBACK", "topic": ROBOT_TOPIC}]


async def test_a_refused_secret_is_told_from_an_outage(fake: FakeDingTalk) -> None:
    client = client_for(fake, RobotHandler(lambda *_: asyncio.sleep(0)), secret="wrong")
    with pytest.raises(OpenRefused) as refused:
        await asyncio.to_thread(client.open_connection)
    assert refused.value.status == 401
    fake.stop()
    with pytest.raises(OpenRefused) as down:
        await asyncio.to_thread(client.open_connection)
    assert down.value.status == 0


async def test_an_envelope_is_acked_only_after_the_handler_returned_and_otherwise_comes_again(
        fake: FakeDingTalk) -> None:
    seen: list[str] = []
    fail = {"once": True}

    async def on_message(message: Any, raw: dict[str, Any]) -> None:
        seen.append(str(message.message_id))
        if fail.pop("once", False):
            raise RuntimeError("the state database is locked")

    person = fake.add_person("alice")
    client = client_for(fake, RobotHandler(on_message))
    serving = asyncio.create_task(client.serve())
    await wait_until_async(fake.connected, "the connection")
    envelope = fake.write(person, "hello")
    with pytest.raises(RuntimeError):  # the failure ends this connection, unacknowledged
        await asyncio.wait_for(serving, 30)
    assert not fake.acknowledged(envelope)
    serving = asyncio.create_task(client.serve())  # the kit's runner reconnects: the envelope comes again
    await wait_until_async(lambda: fake.acknowledged(envelope), "the envelope ACKed after it was handled")
    assert seen == [seen[0], seen[0]]  # the same msgId both times (the kit's dedupe key)
    serving.cancel()


async def test_a_message_that_can_never_be_read_is_acked_and_dropped(fake: FakeDingTalk) -> None:
    seen: list[Any] = []

    async def on_message(message: Any, raw: dict[str, Any]) -> None:
        seen.append(message)

    client = client_for(fake, RobotHandler(on_message))
    serving = asyncio.create_task(client.serve())
    await wait_until_async(fake.connected, "the connection")
    envelope = fake.deliver(ROBOT_TOPIC, {"msgId": "broken", "msgtype": "picture"})  # no `content`: the SDK fails
    await wait_until_async(lambda: fake.acknowledged(envelope), "the broken message ACKed")
    assert seen == []
    serving.cancel()


def test_the_sdk_is_imported_only_when_the_channel_connects() -> None:
    """The adapter's module (loaded for a [channels.dingtalk] section, `doctor` included) leaves the SDK out."""
    import subprocess
    import sys

    code = ("import sys, clawgate.channels.dingtalk.adapter; "
            "print(sorted(m for m in sys.modules if m.startswith(('dingtalk_stream', 'requests'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
