"""Several accounts of one channel: the section's keys overlaid by each account's table, names checked,
errors naming the account, two accounts of one bot refused, the single-account form unchanged."""

from __future__ import annotations

import pytest

from clawgate.channels.kit.registry import ChannelConfigError, accounts, load
from clawgate.config.access import channel_name, split_channel_name
from clawgate.config.loader import env_overrides
from clawgate.config.schema import ChannelSettings, TelegramSettings


def telegram() -> type:
    return load("telegram")


def test_the_single_account_form_is_the_default_account_unchanged() -> None:
    section = TelegramSettings(token="1:a", owner=["42"])
    [(account, settings)] = accounts(telegram(), "telegram", section)
    assert (account.channel, account.account) == ("telegram", "default") and settings is section


def test_an_account_is_the_sections_keys_overlaid_by_its_own() -> None:
    section = {"token": "1:a", "owner": ["42"], "dm_policy": "open",
               "accounts": {"work": {"token": "2:b", "dm_policy": "allowlist"}}}
    found = {a.channel: (a, s) for a, s in accounts(telegram(), "telegram", section)}
    assert set(found) == {"telegram", "telegram.work"}
    work, settings = found["telegram.work"]
    assert (work.platform, work.account, work.where) == ("telegram", "work", "channels.telegram.accounts.work")
    assert isinstance(settings, TelegramSettings)
    assert (settings.token, settings.owner, settings.dm_policy) == ("2:b", ["42"], "allowlist")  # owner shared
    assert settings.accounts == {} and found["telegram"][1].token == "1:a"


def test_a_section_without_a_bot_of_its_own_only_shares_its_keys() -> None:
    section = {"owner": ["42"], "accounts": {"a": {"token": "1:a"}, "b": {"token": "2:b"}}}
    assert [a.channel for a, _ in accounts(telegram(), "telegram", section)] == ["telegram.a", "telegram.b"]
    # an account called "default" is the section's own, under the channel's own name
    section = {"owner": ["42"], "accounts": {"default": {"token": "1:a"}}}
    [(account, settings)] = accounts(telegram(), "telegram", section)
    assert account.channel == "telegram" and settings.token == "1:a"  # type: ignore[attr-defined]


def test_the_typed_telegram_section_reads_accounts_from_the_environment() -> None:
    env = env_overrides({"CLAWGATE_CHANNELS__TELEGRAM__ACCOUNTS__WORK__TOKEN": "2:b",
                         "CLAWGATE_CHANNELS__TELEGRAM__ACCOUNTS__WORK__OWNER": '["7"]'})
    section = ChannelSettings.model_validate(env["channels"]).telegram
    [(work, settings)] = accounts(telegram(), "telegram", section)
    assert work.channel == "telegram.work" and settings.owner == ["7"]  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", ["Work", "1st", "a.b", "a:b", "x" * 33, ""])
def test_an_account_name_outside_the_safe_characters_is_one_line(name: str) -> None:
    with pytest.raises(ChannelConfigError) as info:
        accounts(telegram(), "telegram", {"accounts": {name: {"token": "1:a"}}})
    assert str(info.value).startswith(f"config error: channels.telegram.accounts.{name}: an account name is")
    assert "\n" not in str(info.value)


def test_a_bad_key_in_an_account_names_the_account_and_its_variable() -> None:
    with pytest.raises(ChannelConfigError) as info:
        accounts(telegram(), "telegram", {"accounts": {"work": {"token": "1:a", "dm_policy": "everyone"}}})
    assert "channels.telegram.accounts.work.dm_policy" in str(info.value)
    assert "CLAWGATE_CHANNELS__TELEGRAM__ACCOUNTS__WORK__DM_POLICY" in str(info.value)
    with pytest.raises(ChannelConfigError, match="unknown key 'channels.telegram.accounts.work.tokn'"):
        accounts(telegram(), "telegram", {"accounts": {"work": {"tokn": "1:a"}}})
    with pytest.raises(ChannelConfigError, match=r"channels.telegram.accounts.work must be a table"):
        accounts(telegram(), "telegram", {"accounts": {"work": "1:a"}})
    with pytest.raises(ChannelConfigError, match="an account has no accounts of its own"):
        accounts(telegram(), "telegram", {"accounts": {"work": {"accounts": {}}}})


def test_two_accounts_of_one_bot_are_refused_without_showing_the_token() -> None:
    with pytest.raises(ChannelConfigError) as info:
        accounts(telegram(), "telegram", {"token": "1:secret", "accounts": {"work": {"owner": ["9"]}}})
    message = str(info.value)
    assert "channels.telegram.accounts.work names the same telegram account as channels.telegram" in message
    assert "1:secret" not in message
    # an account switched off names nobody
    accounts(telegram(), "telegram", {"token": "1:a", "accounts": {"old": {"enabled": False}}})


def test_channel_names() -> None:
    assert channel_name("telegram", "default") == "telegram" and channel_name("telegram", "work") == "telegram.work"
    assert split_channel_name("telegram.work") == ("telegram", "work")
    assert split_channel_name("discord") == ("discord", "default")


def test_each_account_has_its_own_singleton_lease_in_a_fleet() -> None:
    """The lease name hashes the account's identity settings: one per bot, the same on every process."""
    discord = load("discord")
    section = {"token": "first-token", "owner": ["1"], "accounts": {"b": {"token": "second-token"}}}
    names = []
    for _ in range(2):  # two processes of a fleet compute the same names from the same config
        for _account, settings in accounts(discord, "discord", section):
            adapter = discord.__new__(discord)
            adapter.settings = settings
            names.append(adapter.singleton_name())
    assert names[:2] == names[2:] and len(set(names)) == 2
    assert all(name.startswith("discord:") and "token" not in name for name in names)


def test_delivery_targets_name_the_account() -> None:
    from clawgate.agent.triggers.jobs import CronError, parse_deliver, resolve_deliver
    from clawgate.config.schema import HeartbeatSettings

    assert parse_deliver("telegram.work:123") == "telegram.work:123"
    assert parse_deliver("Discord.Second:99") == "discord.second:99"
    assert resolve_deliver("telegram.work:123", "cron:x") == {"channel": "telegram.work", "chat_id": "123"}
    assert parse_deliver("telegram:123") == "telegram:123"  # the default account's, as always
    for bad in ("telegram.default:1", "telegram.:1", "gateway.x:main", "telegarm.work:1", "telegram.work:abc"):
        with pytest.raises(CronError):
            parse_deliver(bad)
    assert HeartbeatSettings(deliver="telegram.work:123").deliver == "telegram.work:123"
