"""JSON in CLAWGATE_* variables, malformed or of the wrong shape, is one config error line naming the
variable, for every list and table setting and for the untyped `[channels.<name>]` sections and their
accounts; a well-formed table from the environment reaches the channel registry as a table."""

from __future__ import annotations

from pathlib import Path

import pytest

from clawgate.channels.kit.registry import ChannelConfigError, accounts, installed, load
from clawgate.config.loader import ConfigError, _plain, load_settings
from clawgate.config.paths import Paths
from clawgate.config.schema import Settings
from tests.unit.config.test_env_layer import leaves, variable

WRONG = ["{bad", "[1,", "5", '"text"', "[1]", '{"a": 5}', '{"a": {"b": 5}}', '[["x"]]', "null", "{}"]
CHANNEL_VARIABLES = ["CLAWGATE_CHANNELS__SLACK", "CLAWGATE_CHANNELS__SLACK__ACCOUNTS",
                     "CLAWGATE_CHANNELS__SLACK__ACCOUNTS__WORK", "CLAWGATE_CHANNELS__DISCORD__ACCOUNTS",
                     "CLAWGATE_CHANNELS__TELEGRAM__ACCOUNTS", "CLAWGATE_CHANNELS__TELEGRAM__ACCOUNTS__WORK",
                     "CLAWGATE_CHANNELS__SLACK__ALLOW_FROM", "CLAWGATE_CHANNELS__SLACK__OWNER", "CLAWGATE_CHANNELS"]


def settle(tmp_path: Path, environ: dict[str, str]) -> None:
    """What the daemon does with the settings before its channels run: load them, then split and
    validate every channel section's accounts (gateway/chat_channels.py, channels/kit/registry.py)."""
    settings = load_settings(Paths(tmp_path), environ)
    found = installed()
    sections = {"telegram": settings.channels.telegram, **settings.channels.sections()}
    for name, table in sections.items():
        if name in found:
            try:
                accounts(load(name, found), name, table)
            except ChannelConfigError as exc:
                raise ConfigError(str(exc)) from None


def list_and_table_variables() -> list[str]:
    found = [variable(path) for path, annotation in leaves(Settings) if not _plain(annotation)]
    return sorted({*found, *CHANNEL_VARIABLES, "CLAWGATE_GATEWAY", "CLAWGATE_AGENTS", "CLAWGATE_HOOKS"})


def test_every_list_or_table_variable_with_bad_json_is_one_line(tmp_path: Path) -> None:
    names = list_and_table_variables()
    assert len(names) > 20 and "CLAWGATE_CHANNELS__TELEGRAM__ACCOUNTS" in names
    for name in names:
        for raw in WRONG:
            try:
                settle(tmp_path, {name: raw})
            except ConfigError as exc:
                line = str(exc)
                assert line.startswith("config error: ") and "\n" not in line, (name, raw, line)
            except Exception as exc:  # noqa: BLE001 - the defect itself: anything else is a traceback
                pytest.fail(f"{name}={raw!r} raised {type(exc).__name__}: {exc}")


@pytest.mark.parametrize(("name", "raw", "expected"), [
    ("CLAWGATE_CHANNELS__SLACK__ACCOUNTS", "{bad", "CLAWGATE_CHANNELS__SLACK__ACCOUNTS=<secret, not shown> is not valid JSON"),
    ("CLAWGATE_CHANNELS__SLACK__ACCOUNTS", '{"work": 5}', "CLAWGATE_CHANNELS__SLACK__ACCOUNTS must be a table of accounts"),
    ("CLAWGATE_CHANNELS__SLACK__ACCOUNTS", "[1]", "CLAWGATE_CHANNELS__SLACK__ACCOUNTS must be a table of accounts"),
    ("CLAWGATE_CHANNELS__SLACK", "5", "CLAWGATE_CHANNELS__SLACK must be a table"),
    ("CLAWGATE_CHANNELS__SLACK__ACCOUNTS__WORK", '"x"', "CLAWGATE_CHANNELS__SLACK__ACCOUNTS__WORK must be a table"),
    ("CLAWGATE_CHANNELS", '{"slack": 5}', "channels.slack must be a table"),
    ("CLAWGATE_CHANNELS__TELEGRAM__ACCOUNTS", '{"work": 5}',
     "channels.telegram.accounts.work must be a table ([channels.telegram.accounts.work]); fix config.toml or "
     "CLAWGATE_CHANNELS__TELEGRAM__ACCOUNTS__WORK"),
    ("CLAWGATE_CHANNELS__SLACK", '{"accounts": 5}', "fix config.toml or CLAWGATE_CHANNELS__SLACK__ACCOUNTS"),
    ("CLAWGATE_CHANNELS__SLACK__OWNER", "[bad", "channels.slack.owner is not valid JSON, which a list or table "
                                              "setting needs; fix CLAWGATE_CHANNELS__SLACK__OWNER"),
])
def test_the_line_names_the_variable_and_the_fix(tmp_path: Path, name: str, raw: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        settle(tmp_path, {name: raw})
    assert expected in str(info.value)


def test_a_channel_table_in_json_holding_a_token_is_not_echoed(tmp_path: Path) -> None:
    raw = '{"work": {"bot": "xoxb-1-very-private"'  # malformed, and no key word in it
    with pytest.raises(ConfigError) as info:
        settle(tmp_path, {"CLAWGATE_CHANNELS__SLACK__ACCOUNTS": raw})
    assert "xoxb-1-very-private" not in str(info.value)


def test_accounts_of_an_untyped_channel_in_json_are_accounts(tmp_path: Path) -> None:
    environ = {"CLAWGATE_CHANNELS__DISCORD__TOKEN": "first", "CLAWGATE_CHANNELS__DISCORD__ACCOUNTS":
               '{"second": {"token": "second", "owner": ["7"]}}'}
    settings = load_settings(Paths(tmp_path), environ)
    table = settings.channels.sections()["discord"]
    found = {a.channel: s for a, s in accounts(load("discord"), "discord", table)}
    assert set(found) == {"discord", "discord.second"}
    assert found["discord.second"].owner == ["7"]  # type: ignore[attr-defined]
    whole = load_settings(Paths(tmp_path), {"CLAWGATE_CHANNELS__DISCORD": '{"token": "t", "owner": ["8"]}'})
    assert whole.channels.sections()["discord"] == {"token": "t", "owner": ["8"]}


def test_a_channel_that_is_not_a_table_in_config_toml_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text("[channels]\nslack = 5\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_settings(Paths(tmp_path), {})
    assert "channels.slack must be a table" in str(info.value) and "\n" not in str(info.value)
