"""The fake DingTalk refuses what DingTalk refuses: wrong credentials, sends without the access token, a
malformed template, a webhook past its expiry, a download code it never gave out."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any, Iterator

import pytest

from tests.fakes.dingtalk import CLIENT_SECRET, FakeDingTalk


@pytest.fixture
def fake() -> Iterator[FakeDingTalk]:
    with FakeDingTalk(webhook_seconds=3600) as server:
        yield server


def post(url: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json",
                                                                       **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 (loopback)
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def token(fake: FakeDingTalk) -> str:
    status, answer = post(f"{fake.url}/v1.0/oauth2/accessToken", {"appKey": fake.client_id, "appSecret": CLIENT_SECRET})
    assert status == 200 and answer["expireIn"] == 7200
    return str(answer["accessToken"])


def test_wrong_credentials_are_refused_at_the_gateway_and_the_token_endpoint(fake: FakeDingTalk) -> None:
    status, answer = post(f"{fake.url}/v1.0/gateway/connections/open",
                          {"clientId": fake.client_id, "clientSecret": "wrong", "subscriptions": []})
    assert status == 401 and answer["code"] == "InvalidAuthentication"
    status, _ = post(f"{fake.url}/v1.0/gateway/connections/open",
                     {"clientId": fake.client_id, "clientSecret": CLIENT_SECRET, "subscriptions": ["*"]})
    assert status == 400  # subscriptions are {type, topic} objects
    status, answer = post(f"{fake.url}/v1.0/oauth2/accessToken", {"appKey": fake.client_id, "appSecret": "wrong"})
    assert status == 400 and answer["code"] == "invalidClientIdOrSecret"


def test_robot_sends_need_the_token_and_a_well_formed_template(fake: FakeDingTalk) -> None:
    person = fake.add_person("alice")
    body = {"robotCode": fake.client_id, "userIds": [person.staff_id], "msgKey": "sampleMarkdown",
            "msgParam": json.dumps({"title": "t", "text": "hello"})}
    url = f"{fake.url}/v1.0/robot/oToMessages/batchSend"
    assert post(url, body)[0] == 401
    assert post(url, body, {"x-acs-dingtalk-access-token": "forged"})[0] == 401
    good = {"x-acs-dingtalk-access-token": token(fake)}
    assert post(url, {**body, "msgParam": json.dumps({"text": "no title"})}, good)[0] == 400
    assert post(url, {**body, "robotCode": "someone-else"}, good)[0] == 400
    status, answer = post(url, {**body, "userIds": [person.staff_id, "nobody"]}, good)
    assert status == 200 and answer["invalidStaffIdList"] == ["nobody"] and answer["processQueryKey"]
    group = f"{fake.url}/v1.0/robot/groupMessages/send"
    assert post(group, {**body, "openConversationId": "cidUnknown"}, good)[0] == 400
    assert [s.text for s in fake.sent_to(person.staff_id)] == ["hello"]


def test_a_session_webhook_works_until_it_expires(fake: FakeDingTalk) -> None:
    person = fake.add_person("alice")
    envelope = fake.write(person, "hi")
    hook = json.loads(envelope["data"])["sessionWebhook"]
    message = {"msgtype": "markdown", "markdown": {"title": "t", "text": "**hi**"}}
    assert post(hook, message) == (200, {"errcode": 0, "errmsg": "ok"})
    assert post(hook, {"msgtype": "markdown", "markdown": {"text": "no title"}})[1]["errcode"] == 40035
    fake.expire_webhooks()
    assert post(hook, message)[1]["errcode"] == 300001
    assert [s.via for s in fake.sent_to(person.staff_id)] == ["webhook"]


def test_a_download_code_is_good_only_as_given_and_its_link_once(fake: FakeDingTalk) -> None:
    person = fake.add_person("alice")
    envelope = fake.write(person, "", file=("a.txt", b"data"))
    code = json.loads(envelope["data"])["content"]["downloadCode"]
    good = {"x-acs-dingtalk-access-token": token(fake)}
    url = f"{fake.url}/v1.0/robot/messageFiles/download"
    assert post(url, {"downloadCode": "made-up", "robotCode": fake.client_id}, good)[0] == 400
    assert post(url, {"downloadCode": code, "robotCode": fake.client_id})[0] == 401
    status, answer = post(url, {"downloadCode": code, "robotCode": fake.client_id}, good)
    assert status == 200
    with urllib.request.urlopen(answer["downloadUrl"], timeout=30) as response:  # noqa: S310 (loopback)
        assert response.read() == b"data"
    with pytest.raises(urllib.error.HTTPError):
        urllib.request.urlopen(answer["downloadUrl"], timeout=30)  # noqa: S310
