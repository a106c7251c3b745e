"""The fake signal-cli answers as signal-cli's HTTP daemon does (HttpServerHandler, SignalJsonRpcCommandHandler):
these are the shapes the Signal adapter reads, checked here so the fake cannot drift from them."""

from __future__ import annotations

from typing import Any, Iterator

import httpx
import pytest

from tests.fakes.signal import BOT_NUMBER, FakeSignalCli


@pytest.fixture
def fake() -> Iterator[FakeSignalCli]:
    with FakeSignalCli() as server:
        yield server


def rpc(fake: FakeSignalCli, body: Any, content_type: str = "application/json") -> httpx.Response:
    import json

    return httpx.post(f"{fake.url}/api/v1/rpc", content=json.dumps(body), headers={"Content-Type": content_type},
                      trust_env=False)


def test_json_rpc_errors_are_signal_clis(fake: FakeSignalCli) -> None:
    assert rpc(fake, {"jsonrpc": "2.0"}).json() == {
        "jsonrpc": "2.0", "error": {"code": -32600, "message": "method field must be set", "data": None}, "id": None}
    assert rpc(fake, {"jsonrpc": "2.0", "method": "nope", "id": 1}).json()["error"]["code"] == -32601
    unknown = rpc(fake, {"jsonrpc": "2.0", "method": "send", "id": 2,
                         "params": {"account": "+1999", "recipient": ["x"], "message": "m"}}).json()
    assert unknown["error"] == {"code": -32602, "message": "Specified account does not exist", "data": None}
    assert rpc(fake, {"jsonrpc": "2.0", "method": "version", "id": 3}, content_type="text/plain").status_code == 415
    assert httpx.get(f"{fake.url}/api/v1/events", params={"account": "+1999"}, trust_env=False).status_code == 400
    assert httpx.get(f"{fake.url}/api/v1/check", trust_env=False).status_code == 200


def test_a_rate_limited_send_carries_retry_after_per_recipient(fake: FakeSignalCli) -> None:
    person = fake.add_person("someone", number="+15550100001")
    fake.rate_limit(7, person.uuid)
    body = {"jsonrpc": "2.0", "method": "send", "id": 4,
            "params": {"account": BOT_NUMBER, "recipient": [person.uuid], "message": "hi"}}
    error = rpc(fake, body).json()["error"]
    assert error["code"] == -5 and error["data"]["response"]["results"][0]["retryAfterSeconds"] == 7
    sent = rpc(fake, body).json()["result"]
    assert isinstance(sent["timestamp"], int) and sent["results"][0]["type"] == "SUCCESS"


def test_unregistered_recipients_and_bad_styles_are_refused(fake: FakeSignalCli) -> None:
    send = {"jsonrpc": "2.0", "method": "send", "id": 5, "params": {"account": BOT_NUMBER, "recipient": ["nobody"],
                                                                    "message": "hi"}}
    error = rpc(fake, send).json()["error"]
    assert (error["code"], error["message"]) == (-1, "Failed to send message")
    assert error["data"]["response"]["results"][0]["type"] == "UNREGISTERED_FAILURE"
    person = fake.add_person("someone", number="+15550100001")
    styled = {**send, "params": {**send["params"], "recipient": [person.uuid], "textStyle": ["0:9:BOLD"]}}
    assert rpc(fake, styled).json()["error"]["code"] == -32602  # past the end of "hi"
