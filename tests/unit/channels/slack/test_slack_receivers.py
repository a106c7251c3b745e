"""The Slack receivers against the fake Slack server: Socket Mode envelopes acknowledged only once
handled, a disconnect frame survived, a lost connection reported; the HTTP Events API with its
signature check, url_verification and the 3-second answer."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, AsyncIterator, Iterator

import pytest
from slack_sdk.errors import SlackApiError

from clawgate.channels.slack.http import HttpReceiver
from clawgate.channels.slack.socket import SocketReceiver
from tests.fakes.slack_api import APP_TOKEN, SIGNING_SECRET, FakeSlack
from tests.fakes.slack_api import workspace as W

LOG = logging.getLogger("test.slack")


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeSlack]:
    for var in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"):
        monkeypatch.delenv(var, raising=False)
    with FakeSlack(ack_timeout=1.0, disconnect_grace=2.0) as f:
        yield f


class Handler:
    """Records what arrives; raises (no acknowledgement) while `fail` is set."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, Any], int]] = []
        self.fail = False
        self.answer: dict[str, Any] | None = None
        self.delay = 0.0

    async def __call__(self, kind: str, payload: dict[str, Any], retry: int) -> dict[str, Any] | None:
        self.seen.append((kind, payload, retry))
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.fail:
            raise RuntimeError("not durable")
        return self.answer


@pytest.fixture
async def socket(fake: FakeSlack) -> AsyncIterator[tuple[SocketReceiver, Handler]]:
    handler = Handler()
    receiver = SocketReceiver(app_token=APP_TOKEN, api_url=fake.api_url, handler=handler, log=LOG, ping_interval=1)
    await receiver.connect()
    yield receiver, handler
    await receiver.close()


async def test_envelope_acknowledged_only_after_the_handler_returned(fake: FakeSlack, socket: Any) -> None:
    receiver, handler = socket
    handler.fail = True
    env = fake.send_message("hello")
    await fake.wait_for_async(lambda f: len(f.envelopes_for(env.event_id)) >= 2, timeout=30)  # redelivered
    assert not env.acked and env.expired
    handler.fail = False
    deliveries = await fake.wait_for_async(lambda f: (e := f.envelopes_for(env.event_id)) and e[-1].acked and e,
                                           timeout=30)
    assert deliveries[-1].retry_attempt >= 1
    assert [r for _, _, r in handler.seen][:2] == [0, 1]
    assert all(p["event"]["text"] == "hello" for _, p, _ in handler.seen)


async def test_slash_command_ack_carries_the_handlers_payload(fake: FakeSlack, socket: Any) -> None:
    receiver, handler = socket
    handler.answer = {"response_type": "ephemeral", "text": "Usage: /clawgate new|stop"}
    env = fake.slash_command("/clawgate", "bogus")
    await fake.wait_for_async(lambda f: env.acked, timeout=30)
    assert env.ack_payload == handler.answer and handler.seen[0][0] == "slash_commands"


async def test_disconnect_frame_reconnects_and_loses_nothing(fake: FakeSlack, socket: Any) -> None:
    receiver, handler = socket
    # the client's connect() returns when its side is open; the server registers the connection a
    # moment later on its own thread
    (first,) = await fake.wait_for_async(lambda f: f.socket.open_connections(), timeout=30)
    fake.disconnect("refresh_requested")
    env = fake.send_message("after the refresh")
    await fake.wait_for_async(lambda f: env.acked, timeout=30)
    assert env.connection != first and not env.expired  # acknowledged in time, on the new connection
    opened = fake.calls_to("apps.connections.open")
    assert len(opened) >= 2 and all(c.ok for c in opened)


async def test_connection_lost_for_good_is_reported(fake: FakeSlack) -> None:
    receiver = SocketReceiver(app_token=APP_TOKEN, api_url=fake.api_url, handler=Handler(), log=LOG, ping_interval=1)
    await receiver.connect()
    try:
        fake.stop()
        await asyncio.wait_for(receiver.lost(after_seconds=2), 60)
        assert not await receiver.client.is_connected()
    finally:
        await receiver.close()


async def test_refused_app_token_is_one_error_not_a_retry_loop(fake: FakeSlack) -> None:
    receiver = SocketReceiver(app_token="xapp-1-wrong", api_url=fake.api_url, handler=Handler(), log=LOG)
    with pytest.raises(SlackApiError) as e:
        await receiver.connect()
    assert e.value.response["error"] == "invalid_auth"
    assert len(fake.calls_to("apps.connections.open")) == 1
    await receiver.close()


@pytest.fixture
async def http(fake: FakeSlack) -> AsyncIterator[tuple[HttpReceiver, Handler]]:
    handler = Handler()
    receiver = HttpReceiver(signing_secret=SIGNING_SECRET, host="127.0.0.1", port=0, path="/slack/events",
                            handler=handler, log=LOG, ack_seconds=1.0)
    await receiver.start()
    yield receiver, handler
    await receiver.close()


async def test_http_events_need_a_valid_signature(fake: FakeSlack, http: Any) -> None:
    receiver, handler = http
    body = fake.event_body({"type": "message", "channel_type": "im", "channel": W.OWNER_DM, "user": W.OWNER_ID,
                            "text": "hi", "ts": "1.000001"})
    assert (await fake.post_signed(receiver.url, body, tamper=True))[0] == 401
    assert (await fake.post_signed(receiver.url, body, secret="wrong"))[0] == 401
    assert (await fake.post_signed(receiver.url, body, timestamp=1))[0] == 401  # replayed long after
    assert handler.seen == []
    assert (await fake.post_signed(receiver.url, body, retry_num=2))[0] == 200
    assert [(k, p["event"]["text"], r) for k, p, r in handler.seen] == [("events_api", "hi", 2)]
    status, text = await fake.post_signed(receiver.url, fake.url_verification_body("c-42"))
    assert (status, json.loads(text)) == (200, {"challenge": "c-42"})


async def test_http_answers_within_three_seconds_and_forms_are_read(fake: FakeSlack, http: Any) -> None:
    receiver, handler = http
    handler.delay = 5.0  # not durable in time: Slack is told to send it again
    body = fake.event_body({"type": "app_mention", "channel": W.GENERAL, "user": W.OWNER_ID, "text": "x",
                            "ts": "1.000002"})
    assert (await fake.post_signed(receiver.url, body))[0] == 503
    handler.delay = 0.0
    handler.answer = {"text": "ok"}
    form = "command=%2Fclawgate&text=new&user_id=U1&channel_id=D1&trigger_id=t1"
    status, text = await fake.post_signed(receiver.url, form, content_type="application/x-www-form-urlencoded")
    assert (status, json.loads(text)) == (200, {"text": "ok"})
    press = "payload=" + json.dumps({"type": "block_actions", "actions": []})
    assert (await fake.post_signed(receiver.url, press, content_type="application/x-www-form-urlencoded"))[0] == 200
    assert [k for k, _, _ in handler.seen] == ["events_api", "slash_commands", "interactive"]
    assert handler.seen[1][1]["text"] == "new"


async def test_sdk_reconnect_errors_are_logged_as_one_line(fake: FakeSlack, caplog: pytest.LogCaptureFixture) -> None:
    receiver = SocketReceiver(app_token=APP_TOKEN, api_url=fake.api_url, handler=Handler(), log=LOG)
    await receiver.close()
    sdk_log = LOG.getChild("socket")
    with caplog.at_level(logging.ERROR, logger=sdk_log.name):
        try:
            raise ConnectionRefusedError("connect call failed")
        except ConnectionRefusedError:
            sdk_log.exception("Failed to connect (error: %s); Retrying...", "connect call failed")
    # (the SDK may still log its INFO about the closed session from a task finishing meanwhile)
    (record,) = [r for r in caplog.records if r.name == sdk_log.name and r.levelno >= logging.ERROR]
    assert record.exc_info is None and "Traceback" not in caplog.text
    assert record.getMessage() == "Failed to connect (error: connect call failed); Retrying... [ConnectionRefusedError]"
