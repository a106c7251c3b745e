"""The Google Chat adapter's pure parts: Chat's formatting, events read as the kit's Incoming, the settings'
identities, the bearer check against the fake's certificates, and no Google library loaded by default."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest
from pydantic import ValidationError

from clawgate.channels.googlechat.adapter import MAX_CHARS, render_chunks, to_chat
from clawgate.channels.googlechat.auth import BearerVerifier, Refused
from clawgate.channels.googlechat.events import click, incoming
from clawgate.channels.googlechat.settings import GoogleChatSettings
from tests.fakes.googlechat import PROJECT_NUMBER, FakeGoogleChat, formats_of, plain_of
from tests.fakes.googlechat.keys import new_key_pair


def test_markdown_in_chats_markers_and_links() -> None:
    assert to_chat("**bold** _it_ ~~gone~~ `x = 1`") == "*bold* _it_ ~gone~ `x = 1`"
    assert to_chat("[the docs](https://example.org/a)") == "<https://example.org/a|the docs>"
    assert plain_of(to_chat("see [the docs](https://example.org/a)")) == "see the docs"
    assert formats_of(to_chat("**b** [l](https://x.org)")) == {"bold", "link"}


def test_a_mention_of_everyone_written_by_the_model_stays_text() -> None:
    assert "<users/" not in to_chat("ping <users/all> and <users/123>")


def test_long_answers_split_under_the_limit_with_code_blocks_whole() -> None:
    code = "```\n" + "\n".join(f"line {i}" for i in range(50)) + "\n```"
    chunks = render_chunks("\n\n".join(["**word** " * 300, code, "tail " * 900]))
    assert len(chunks) > 1 and all(len(c) <= MAX_CHARS for c in chunks)
    assert sum("line 0" in c and "line 49" in c for c in chunks) == 1


def _message(space: dict, text: str, **extra: object) -> dict:
    return {"type": "MESSAGE", "space": space, "user": {"name": "users/42", "displayName": "Ann"},
            "message": {"name": f"{space['name']}/messages/m1", "text": text,
                        "sender": {"name": "users/42", "displayName": "Ann", "type": "HUMAN"},
                        "thread": {"name": f"{space['name']}/threads/t1"}, **extra}}


def test_a_dm_is_private_and_a_space_message_is_addressed_only_by_a_mention_of_the_app() -> None:
    dm = incoming(_message({"name": "spaces/d", "spaceType": "DIRECT_MESSAGE"}, "hello"))
    assert dm is not None and dm.private and dm.addressed and dm.thread_id is None and dm.text == "hello"
    assert dm.sender.user_id == "42" and dm.sender.username == "Ann"
    room = {"name": "spaces/r", "spaceType": "SPACE"}
    assert incoming(_message(room, "chatting")).addressed is False  # type: ignore[union-attr]
    mention = [{"type": "USER_MENTION", "userMention": {"user": {"name": "users/app", "type": "BOT"}}}]
    asked = incoming(_message(room, "@Clawgate hi", argumentText=" hi", annotations=mention))
    assert asked is not None and asked.addressed and asked.text == "hi" and asked.thread_id == "spaces/r/threads/t1"
    person = [{"type": "USER_MENTION", "userMention": {"user": {"name": "users/7", "type": "HUMAN"}}}]
    assert incoming(_message(room, "@Bob hi", argumentText="@Bob hi", annotations=person)).addressed is False  # type: ignore[union-attr]


def test_a_display_name_made_of_digits_is_not_a_name() -> None:
    event = _message({"name": "spaces/d", "spaceType": "DIRECT_MESSAGE"}, "hi")
    event["message"]["sender"]["displayName"] = "1234567"
    found = incoming(event)
    assert found is not None and found.sender.username is None and found.sender.user_id == "42"


def test_a_click_carries_its_parameters_and_the_presser() -> None:
    event = {"type": "CARD_CLICKED", "space": {"name": "spaces/r"}, "user": {"name": "users/9"},
             "message": {"name": "spaces/r/messages/p"}, "common": {"invokedFunction": "clawgate_approval",
             "parameters": {"approval_id": "ab12", "approve": "true", "secret": "s3"}}}
    pressed = click(event)
    assert pressed is not None and (pressed.user.user_id, pressed.approval_id, pressed.approve, pressed.secret) == \
        ("9", "ab12", True, "s3")
    assert click({**event, "common": {"invokedFunction": "other"}}) is None


def test_owners_are_user_ids_never_emails_or_names() -> None:
    assert GoogleChatSettings(owner=["users/123", "456"]).owner == ["123", "456"]
    with pytest.raises(ValidationError, match="not a Google Chat user"):
        GoogleChatSettings(owner=["ann@example.com"])
    with pytest.raises(ValidationError, match="project number"):
        GoogleChatSettings(audience="my-project")


def test_the_bearer_check_takes_only_chats_tokens_for_this_audience() -> None:
    with FakeGoogleChat() as fake:
        settings = GoogleChatSettings(audience=PROJECT_NUMBER, certs_url=fake.certs_url)

        async def check(token: str) -> str:
            try:
                return str((await BearerVerifier(settings, timeout=10).verify(f"Bearer {token}"))["iss"])
            except Refused as e:
                return f"refused: {e}"

        assert asyncio.run(check(fake.bearer())) == "chat@system.gserviceaccount.com"
        for token in (fake.bearer(key=new_key_pair("x")), fake.bearer(expires_in=-600),
                      fake.bearer(audience="1"), fake.bearer(issuer="someone@example.com")):
            assert asyncio.run(check(token)).startswith("refused: ")


def test_an_endpoint_url_audience_takes_googles_id_token_for_chats_account() -> None:
    url = "https://bot.example.com/googlechat/events"
    with FakeGoogleChat() as fake:
        settings = GoogleChatSettings(audience=url, certs_url=fake.certs_url)
        assert settings.audience_kind() == "endpoint_url"

        def check(token: str) -> bool:
            try:
                asyncio.run(BearerVerifier(settings, timeout=10).verify(f"Bearer {token}"))
                return True
            except Refused:
                return False

        good = {"issuer": "https://accounts.google.com", "audience": url}
        assert check(fake.bearer(**good, email="chat@system.gserviceaccount.com", email_verified=True))
        assert not check(fake.bearer(**good, email="someone@example.com", email_verified=True))
        assert not check(fake.bearer(**good, email="chat@system.gserviceaccount.com"))  # not verified
        assert not check(fake.bearer(issuer="chat@system.gserviceaccount.com", audience=url))


def test_the_keys_token_uri_grant_is_refused_for_a_key_google_does_not_know() -> None:
    """google-auth's OAuth path (the key's token_uri, JWT-bearer grant), as used without self-signed JWTs."""
    from google.auth.exceptions import RefreshError
    from google.auth.transport.requests import Request
    from google.oauth2 import service_account

    with FakeGoogleChat() as fake:
        scope = ["https://www.googleapis.com/auth/chat.bot"]
        good = service_account.Credentials.from_service_account_info(fake.key(), scopes=scope)
        good.refresh(Request())
        assert good.token and good.token.startswith("ya29.")
        revoked = service_account.Credentials.from_service_account_info(fake.unknown_key(), scopes=scope)
        with pytest.raises(RefreshError, match="invalid_grant"):
            revoked.refresh(Request())


def test_a_default_start_loads_no_google_library() -> None:
    code = ("import sys, clawgate.channels.googlechat.adapter; "
            "print(sorted(m for m in sys.modules if m.startswith(('google.auth', 'google.apps', 'google.api_core'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr
