"""The fake Mattermost server answers as Mattermost's API v4 does: these are the shapes the adapter reads
(error JSON, rate-limit headers, the WebSocket's challenge and events), checked so the fake cannot drift."""

from __future__ import annotations

import asyncio
import json
from typing import Iterator

import aiohttp
import httpx
import pytest

from tests.fakes.mattermost import BOT_TOKEN, FakeMattermost

AUTH = {"Authorization": f"Bearer {BOT_TOKEN}"}


@pytest.fixture
def fake() -> Iterator[FakeMattermost]:
    with FakeMattermost() as server:
        yield server


def test_a_wrong_token_is_a_401_with_mattermosts_error_json(fake: FakeMattermost) -> None:
    answer = httpx.get(f"{fake.url}/api/v4/users/me", headers={"Authorization": "Bearer nope"}, trust_env=False)
    assert answer.status_code == 401
    assert {"id", "message", "status_code"} <= set(answer.json()) and answer.json()["status_code"] == 401
    me = httpx.get(f"{fake.url}/api/v4/users/me", headers=AUTH, trust_env=False).json()
    assert me["id"] == fake.bot.id and me["is_bot"] is True


def test_a_rate_limited_post_carries_retry_after_and_the_limit_headers(fake: FakeMattermost) -> None:
    channel = fake.add_channel("town-square")
    fake.rate_limit(7)
    answer = httpx.post(f"{fake.url}/api/v4/posts", json={"channel_id": channel, "message": "hi"}, headers=AUTH,
                        trust_env=False)
    assert answer.status_code == 429 and answer.headers["Retry-After"] == "7"
    assert answer.headers["X-Ratelimit-Remaining"] == "0" and answer.headers["X-Ratelimit-Reset"] == "7"
    created = httpx.post(f"{fake.url}/api/v4/posts", json={"channel_id": channel, "message": "hi"}, headers=AUTH,
                         trust_env=False)
    assert created.status_code == 201 and created.json()["props"]["from_bot"] == "true"
    too_long = httpx.post(f"{fake.url}/api/v4/posts", json={"channel_id": channel, "message": "x" * 16384},
                          headers=AUTH, trust_env=False)
    assert too_long.status_code == 400 and too_long.json()["id"] == "model.post.is_valid.msg.app_error"


def test_the_websocket_challenges_then_streams_posted_events_with_seq(fake: FakeMattermost) -> None:
    alice = fake.add_user("alice")
    dm = fake.dm_channel(alice)

    async def session(token: str) -> list[dict]:
        async with aiohttp.ClientSession() as client:
            async with client.ws_connect(f"ws://127.0.0.1:{fake.port}/api/v4/websocket") as ws:
                await ws.send_json({"seq": 1, "action": "authentication_challenge", "data": {"token": token}})
                frames = [json.loads((await ws.receive(timeout=10)).data)]
                if frames[0].get("status") != "OK":
                    return frames
                frames.append(json.loads((await ws.receive(timeout=10)).data))
                await asyncio.get_running_loop().run_in_executor(None, fake.write, alice, dm, "hello")
                frames.append(json.loads((await ws.receive(timeout=10)).data))
                return frames

    refused = asyncio.run(session("nope"))
    assert refused[0]["status"] == "FAIL" and refused[0]["seq_reply"] == 1
    ok, hello, event = asyncio.run(session(BOT_TOKEN))
    assert ok == {"status": "OK", "seq_reply": 1} and hello["event"] == "hello"
    assert event["event"] == "posted" and event["seq"] == 1 and event["data"]["channel_type"] == "D"
    post = json.loads(event["data"]["post"])  # a JSON string inside the event, as Mattermost sends it
    assert post["message"] == "hello" and post["user_id"] == alice.id and post["channel_id"] == dm
