"""The fake Microsoft endpoints refuse what Microsoft documents as refused, and the fake Connector's sender
signs what it sends and sends again until the bot answers 2xx."""

from __future__ import annotations

import asyncio
import json
import threading
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Iterator

import jwt
import pytest
from aiohttp import web

from tests.fakes.teams import APP_ID, APP_PASSWORD, FakeTeams
from tests.fakes.teams.server import SCOPE
from tests.harness import free_port
from tests.waiting import wait_until


@pytest.fixture
def fake() -> Iterator[FakeTeams]:
    server = FakeTeams().start()
    try:
        yield server
    finally:
        server.stop()


def _form(url: str, fields: dict[str, str]) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(url, data=urllib.parse.urlencode(fields).encode())
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_the_token_service_grants_client_credentials_only_with_the_secret(fake: FakeTeams) -> None:
    good = {"grant_type": "client_credentials", "client_id": APP_ID, "client_secret": APP_PASSWORD, "scope": SCOPE}
    status, body = _form(fake.token_url, good)
    assert status == 200 and body["token_type"] == "Bearer" and body["expires_in"] > 0
    assert jwt.decode(body["access_token"], options={"verify_signature": False})["appid"] == APP_ID
    assert _form(fake.token_url, {**good, "client_secret": "wrong"})[1]["error"] == "invalid_client"
    assert _form(fake.token_url, {**good, "grant_type": "password"})[1]["error"] == "unsupported_grant_type"
    assert _form(fake.token_url, {**good, "scope": "https://graph.microsoft.com/.default"})[0] == 400


class Endpoint:
    """A bot's messaging endpoint answering from a script of statuses, recording what it got."""

    def __init__(self, statuses: list[int]) -> None:
        self.statuses = statuses
        self.got: list[tuple[str, dict[str, Any]]] = []
        self.port = free_port()
        loop = asyncio.new_event_loop()
        ready = threading.Event()

        async def take(request: web.Request) -> web.Response:
            self.got.append((request.headers.get("Authorization", ""), await request.json()))
            return web.Response(status=self.statuses.pop(0) if self.statuses else 200)

        async def serve() -> None:
            app = web.Application()
            app.router.add_post("/api/messages", take)
            self.runner = web.AppRunner(app)
            await self.runner.setup()
            await web.TCPSite(self.runner, "127.0.0.1", self.port).start()
            ready.set()

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.run_until_complete(serve())
            loop.run_forever()

        self.loop = loop
        threading.Thread(target=run, daemon=True).start()
        assert ready.wait(10)

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)


def test_the_sender_signs_each_activity_and_sends_again_until_acknowledged(fake: FakeTeams) -> None:
    endpoint = Endpoint([503, 500])
    try:
        fake.endpoint = f"http://127.0.0.1:{endpoint.port}/api/messages"
        person = fake.add_person("owner")
        event = fake.say(person, person.personal_chat, "hello")
        wait_until(lambda: fake.acknowledged(event), "the activity acknowledged")
        assert fake.deliveries[event].statuses == [503, 500, 200]
        header, body = endpoint.got[-1]
        token = header.removeprefix("Bearer ")
        public = fake.key.public_key()
        claims = jwt.decode(token, public, algorithms=["RS256"], audience=APP_ID, issuer="https://api.botframework.com")
        assert claims["serviceurl"] == body["serviceUrl"] == fake.service_url
        assert body["from"]["aadObjectId"] == person.aad_object_id and body["channelId"] == "msteams"
    finally:
        endpoint.stop()
