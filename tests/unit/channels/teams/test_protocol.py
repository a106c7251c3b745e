"""The Teams channel's protocol pieces against the fake Microsoft (tests/fakes/teams), with the real Agents SDK:
inbound tokens checked as the Bot Framework documents, the client-credentials token cached, the SDK's
ConnectorClient refused without our token, errors mapped for the kit, and the ids and text Teams sends read
right."""

from __future__ import annotations

import re
import time
from typing import AsyncIterator, Iterator

import aiohttp
import pytest
from microsoft_agents.activity import Activity
from microsoft_agents.hosting.core.connector.client import ConnectorClient
from pydantic import ValidationError

from clawgate.channels.kit import DeliveryError
from clawgate.channels.teams.adapter import TeamsAdapter
from clawgate.channels.teams.auth import InboundAuth, Refused, TokenClient, TokenRefused
from clawgate.channels.teams.connector import delivery_error
from clawgate.channels.teams.events import incoming_of, press_of, sender_of
from clawgate.channels.teams.render import MAX_CHARS, render_chunks, to_html
from clawgate.channels.teams.settings import TeamsSettings
from tests.fakes.teams import APP_ID, APP_PASSWORD, FakeTeams, plain_of
from tests.fakes.teams.server import SCOPE


@pytest.fixture
def fake() -> Iterator[FakeTeams]:
    server = FakeTeams().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as s:
        yield s


def _auth(fake: FakeTeams, session: aiohttp.ClientSession) -> InboundAuth:
    return InboundAuth(session, metadata_url=fake.openid_url, issuer="https://api.botframework.com", app_id=APP_ID)


async def test_a_connector_token_verifies_and_every_forgery_is_refused(fake: FakeTeams,
                                                                       session: aiohttp.ClientSession) -> None:
    auth = _auth(fake, session)
    assert await auth.refresh() == 1
    url = fake.service_url
    claims = await auth.verify(f"Bearer {fake.sign(url)}", url, "msteams")
    assert claims["serviceurl"] == url and claims["aud"] == APP_ID
    with pytest.raises(Refused, match="not endorsed for the activity's channel"):  # the key signs for Teams only
        await auth.verify(f"Bearer {fake.sign(url)}", url, "webchat")
    for why, header in {
        "no bearer token": None,
        "no bearer token ": "Basic abc",
        "not a JWT": "Bearer not-a-jwt",
        "signature or claims invalid": f"Bearer {fake.sign(url, key=fake.other_key)}",
        "expired": f"Bearer {fake.sign(url, expires_in=-400)}",  # past the 5 minutes of skew
        "issued for another bot (audience)": f"Bearer {fake.sign(url, audience='someone-else')}",
        "not issued by the Bot Framework (issuer)": f"Bearer {fake.sign(url, issuer='https://sts.example')}",
        "its serviceurl claim does not name the activity's serviceUrl": f"Bearer {fake.sign('http://127.0.0.1:9/')}",
    }.items():
        with pytest.raises(Refused) as refused:
            await auth.verify(header, url, "msteams")
        assert str(refused.value) == why.strip()
    # within the documented clock skew a token still counts
    assert await auth.verify(f"Bearer {fake.sign(url, expires_in=-60)}", url, "msteams")


async def test_rolled_signing_keys_are_fetched_again(fake: FakeTeams, session: aiohttp.ClientSession,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import clawgate.channels.teams.auth as auth_module

    auth = _auth(fake, session)
    await auth.refresh()
    fake.roll_key()
    token = fake.sign(fake.service_url)
    with pytest.raises(Refused, match="key the OpenID metadata does not name"):  # fetched at most every 30 s
        await auth.verify(f"Bearer {token}", fake.service_url, "msteams")
    monkeypatch.setattr(auth_module, "KEY_REFRESH_FLOOR", 0.0)
    assert await auth.verify(f"Bearer {token}", fake.service_url, "msteams")


async def test_the_client_credentials_token_is_cached_and_a_wrong_secret_refused(
        fake: FakeTeams, session: aiohttp.ClientSession) -> None:
    tokens = TokenClient(session, url=fake.token_url, app_id=APP_ID, secret=APP_PASSWORD, scope=SCOPE)
    first = await tokens.token()
    assert await tokens.token() == first and fake.token_requests == 1
    tokens.forget()
    assert await tokens.token() and fake.token_requests == 2
    wrong = TokenClient(session, url=fake.token_url, app_id=APP_ID, secret="wrong", scope=SCOPE)
    with pytest.raises(TokenRefused, match="invalid_client"):
        await wrong.token()
    other_scope = TokenClient(session, url=fake.token_url, app_id=APP_ID, secret=APP_PASSWORD, scope="https://x/.default")
    with pytest.raises(TokenRefused, match="invalid_scope"):
        await other_scope.token()


async def test_the_sdk_connector_client_sends_edits_and_is_refused_without_our_token(
        fake: FakeTeams, session: aiohttp.ClientSession) -> None:
    person = fake.add_person("owner")
    token = await TokenClient(session, url=fake.token_url, app_id=APP_ID, secret=APP_PASSWORD, scope=SCOPE).token()
    client = ConnectorClient(fake.service_url, token)
    stranger = ConnectorClient(fake.service_url, "forged-token")
    try:
        sent = await client.conversations.send_to_conversation(
            person.personal_chat, Activity(type="message", text="<p>hi</p>", text_format="xml"))
        await client.conversations.update_activity(
            person.personal_chat, sent.id, Activity(type="message", id=sent.id, text="<p>edited</p>", text_format="xml"))
        [posted] = fake.sent_to(person.personal_chat)
        assert [plain_of(v) for v in posted.versions] == ["hi", "edited"]
        with pytest.raises(aiohttp.ClientResponseError) as refused:
            await stranger.conversations.send_to_conversation(person.personal_chat, Activity(type="message", text="x"))
        assert refused.value.status == 401 and isinstance(delivery_error(refused.value, "x"), DeliveryError)
        assert delivery_error(refused.value, "x").channel_down  # type: ignore[union-attr]
        with pytest.raises(aiohttp.ClientResponseError) as missing:
            await client.conversations.send_to_conversation("19:nosuch@thread.v2", Activity(type="message", text="x"))
        assert missing.value.status == 404 and delivery_error(missing.value, "x").permanent  # type: ignore[union-attr]
        fake.fail_next(429, "TooManyRequests", retry_after=7)
        with pytest.raises(aiohttp.ClientResponseError) as limited:
            await client.conversations.send_to_conversation(person.personal_chat, Activity(type="message", text="x"))
        assert delivery_error(limited.value, "x").retry_after == 7.0  # type: ignore[union-attr]
        with pytest.raises(aiohttp.ClientResponseError) as large:
            await client.conversations.send_to_conversation(
                person.personal_chat, Activity(type="message", text="x" * 60_000, text_format="xml"))
        assert delivery_error(large.value, "x").too_large  # type: ignore[union-attr]
    finally:
        await client.close()
        await stranger.close()


def test_conversation_ids_with_colons_and_threads_read_back_from_session_keys() -> None:
    split = TeamsAdapter.split_chat
    assert split("a:1fakepersonalowner0001") == ("a:1fakepersonalowner0001", None)
    assert split("19:abc@thread.v2") == ("19:abc@thread.v2", None)
    assert split("19:abc@thread.tacv2:1700000000123") == ("19:abc@thread.tacv2", "1700000000123")
    assert split("") is None


def test_answers_render_as_escaped_html_in_pieces_under_the_limit() -> None:
    [one] = render_chunks("**bold** <script>alert(1)</script> & `a<b`")
    assert one == "<p><strong>bold</strong> &lt;script&gt;alert(1)&lt;/script&gt; &amp; <code>a&lt;b</code></p>"
    long = "\n\n".join(f"Paragraph {i} " + "<&> " * 300 for i in range(30))
    chunks = render_chunks(long)
    assert len(chunks) > 3 and all(len(c.encode("utf-16-le")) // 2 <= MAX_CHARS for c in chunks)
    assert all(to_html(c.source) == c for c in chunks)  # each carries its Markdown, which the kit may halve
    assert [int(n) for c in chunks for n in re.findall(r"Paragraph (\d+)", c)] == list(range(30))


def test_the_mention_is_stripped_the_identity_is_the_object_id_and_threads_split(fake: FakeTeams) -> None:
    person = fake.add_person("owner")
    channel = fake.add_conversation("channel")
    body = fake.activity(person, channel, "what is new?", mention=True)
    activity = Activity.model_validate(body)
    sender = sender_of(activity)
    assert sender is not None and sender.user_id == person.aad_object_id.lower() and sender.username is None
    incoming = incoming_of(activity, sender, f"28:{APP_ID}")
    assert incoming is not None and incoming.text == "what is new?" and incoming.addressed and not incoming.private
    assert incoming.chat_id == channel and incoming.thread_id == body["id"]
    unaddressed = incoming_of(Activity.model_validate(fake.activity(person, channel, "chat")), sender, f"28:{APP_ID}")
    assert unaddressed is not None and not unaddressed.addressed
    other_bot = incoming_of(activity, sender, "28:another-bot")  # mentioning someone else is not for this bot
    assert other_bot is not None and not other_bot.addressed and "<at>" not in other_bot.text
    assert press_of(activity, sender) is None
    press = press_of(Activity.model_validate(fake.activity(person, person.personal_chat, value={
        "kind": "clawgate-approval", "approval_id": "ab12", "approve": True, "secret": "s"})), sender)
    assert press is not None and press.approved and press.chat_id == person.personal_chat


def test_owners_are_object_ids_never_names() -> None:
    settings = TeamsSettings(owner=["5D0A1C3E-6F7B-4C2D-9E8F-0A1B2C3D4E5F"])
    assert settings.owner == ["5d0a1c3e-6f7b-4c2d-9e8f-0a1b2c3d4e5f"]
    with pytest.raises(ValidationError, match="Entra object id"):
        TeamsSettings(owner=["Ada Lovelace"])
    assert TeamsSettings(tenant_id="t1").token_endpoint() == "https://login.microsoftonline.com/t1/oauth2/v2.0/token"
    assert "botframework.com" in TeamsSettings().token_endpoint()


def test_expiry_is_in_seconds_since_the_epoch(fake: FakeTeams) -> None:
    import jwt

    claims = jwt.decode(fake.sign(fake.service_url), options={"verify_signature": False})
    assert abs(claims["exp"] - (time.time() + 3600)) < 60
