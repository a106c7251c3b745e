"""The fake Feishu Open Platform, driven by the real lark-oapi SDK: what the real one refuses is refused
(a wrong secret, a wrong bearer token with Feishu's error JSON), and the long connection's events are
delivered again until a handler answers them with success, as Feishu does."""

from __future__ import annotations

import asyncio
import json
from typing import Any, Iterator

import httpx
import lark_oapi as lark
import pytest
from lark_oapi.api.im.v1 import CreateMessageRequest, CreateMessageRequestBody

from clawgate.channels.feishu.longconn import ConnectionRefused, LongConnection
from tests.fakes.feishu import APP_ID, APP_SECRET, FakeFeishu
from tests.waiting import wait_until_async


@pytest.fixture
def fake() -> Iterator[FakeFeishu]:
    with FakeFeishu(redelivery_seconds=0.2) as server:
        yield server


def test_the_token_endpoint_checks_the_secret_and_the_api_the_bearer(fake: FakeFeishu) -> None:
    wrong = httpx.post(f"{fake.url}/open-apis/auth/v3/tenant_access_token/internal",
                       json={"app_id": APP_ID, "app_secret": "nope"}, trust_env=False).json()
    assert wrong["code"] == 10014 and "tenant_access_token" not in wrong
    refused = httpx.get(f"{fake.url}/open-apis/bot/v3/info", headers={"Authorization": "Bearer t-forged"},
                        trust_env=False)
    assert refused.status_code == 400 and refused.json()["code"] == 99991663


def test_the_sdk_sends_a_message_and_bad_content_is_refused(fake: FakeFeishu) -> None:
    client = lark.Client.builder().app_id(APP_ID).app_secret(APP_SECRET).domain(fake.url).build()
    chat = fake.p2p_chat(fake.add_user("alice"))

    def send(msg_type: str, content: str) -> Any:
        body = CreateMessageRequestBody.builder().receive_id(chat).msg_type(msg_type).content(content).build()
        return client.im.v1.message.create(CreateMessageRequest.builder().receive_id_type("chat_id")
                                           .request_body(body).build())

    sent = send("text", json.dumps({"text": "hello"}))
    assert sent.success() and sent.data.message_id.startswith("om_") and fake.sent_to(chat)[0].content == '{"text": "hello"}'
    assert send("post", json.dumps({"title": "no zh_cn"})).code == 230001
    assert send("text", json.dumps({"text": "x" * 160_000})).code == 230025


async def test_an_event_whose_handler_fails_is_delivered_again_until_answered(fake: FakeFeishu) -> None:
    seen: list[str] = []

    def on_message(data: Any) -> None:
        seen.append(data.event["message"]["message_id"])
        if len(seen) == 1:
            raise RuntimeError("not durable yet")

    handler = lark.EventDispatcherHandler.builder("", "").register_p2_customized_event(
        "im.message.receive_v1", on_message).build()
    connection = LongConnection(APP_ID, APP_SECRET, fake.url, handler)
    running = asyncio.create_task(connection.run())
    try:
        await wait_until_async(fake.connected, "the long connection")
        user = fake.add_user("alice")
        event = await asyncio.to_thread(fake.write, user, fake.p2p_chat(user), "hi")
        await wait_until_async(lambda: fake.acknowledged(event), "the event answered with success")
        message_id = event["event"]["message"]["message_id"]
        assert seen == [message_id, message_id]  # refused once, delivered again, then taken
        assert fake.deliveries.count(event["header"]["event_id"]) == 2
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)


async def test_a_wrong_secret_is_refused_on_the_long_connections_endpoint(fake: FakeFeishu) -> None:
    handler = lark.EventDispatcherHandler.builder("", "").build()
    with pytest.raises(ConnectionRefused, match="1000040344"):
        await LongConnection(APP_ID, "wrong", fake.url, handler).run()
