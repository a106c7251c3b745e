"""`[channels.matrix]`: what is refused, with which line, and lists given through the environment."""

from __future__ import annotations

import pytest

from clawgate.channels.kit.registry import ChannelConfigError, validate
from clawgate.channels.matrix.adapter import MatrixAdapter

BASE = {"homeserver": "https://matrix.example.org/", "user_id": "@claw:example.org"}


def settings(**values: object):
    return validate(MatrixAdapter, "matrix", {**BASE, **values})


def test_a_password_or_a_token_and_a_clean_homeserver() -> None:
    s = settings(password="pw")
    assert s.homeserver == "https://matrix.example.org" and s.password.get_secret_value() == "pw"
    assert "pw" not in repr(s)  # a secret never shows in a log line or an error
    assert settings(access_token="syt_x").access_token.get_secret_value() == "syt_x"


def test_lists_from_the_environment_are_json() -> None:
    s = settings(password="pw", owner='["@me:example.org"]', allow_from='["@a:example.org", "@b:example.org"]')
    assert s.owner == ["@me:example.org"] and s.allow_from == ["@a:example.org", "@b:example.org"]


@pytest.mark.parametrize(("values", "says"), [
    ({}, "channels.matrix.access_token: value error, or password is required"),
    ({"password": "pw", "homeserver": None}, "channels.matrix.homeserver: value error, is required"),
    ({"password": "pw", "user_id": "claw"}, "must be a full Matrix user id"),
    ({"password": "pw", "homeserver": "matrix.example.org"}, "must be the homeserver's URL"),
    ({"password": "pw", "owner": "[broken"}, "channels.matrix.owner"),
    ({"password": "pw", "sync_timout_seconds": 5}, "unknown key 'channels.matrix.sync_timout_seconds'"),
])
def test_bad_sections_are_one_line_naming_the_key(values: dict[str, object], says: str) -> None:
    with pytest.raises(ChannelConfigError) as info:
        settings(**values)
    message = str(info.value)
    assert says.lower() in message.lower() and "\n" not in message


def test_a_disabled_section_needs_nothing_and_base_url_names_the_homeserver() -> None:
    assert validate(MatrixAdapter, "matrix", {"enabled": False}).enabled is False
    named = validate(MatrixAdapter, "matrix", {"base_url": "http://127.0.0.1:8008/", "user_id": "@c:x.org",
                                                "password": "pw"})
    assert named.homeserver == "http://127.0.0.1:8008"
