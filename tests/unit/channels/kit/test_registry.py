"""Finding channels: entry points, one-line errors for what cannot be used, settings validated by the adapter."""

from __future__ import annotations

from importlib.metadata import EntryPoint

import pytest

from clawgate.channels.kit.registry import GROUP, ChannelConfigError, check_sections, installed, load, validate
from clawgate.config.schema import TelegramSettings

FOUND = {"telegram": EntryPoint(name="telegram", value="clawgate.channels.telegram:TelegramAdapter", group=GROUP)}


def test_telegram_is_registered_like_any_plugin() -> None:
    assert installed()["telegram"].value == "clawgate.channels.telegram:TelegramAdapter"
    adapter = load("telegram", FOUND)
    assert adapter.name == "telegram" and adapter.settings_model is TelegramSettings


def test_a_section_naming_no_installed_channel_is_one_line_listing_the_installed_ones() -> None:
    with pytest.raises(ChannelConfigError) as info:
        check_sections({"telegram": {}, "discrod": {"token": "x"}}, FOUND)
    assert str(info.value) == ("config error: [channels.discrod] names no installed channel (installed: telegram); "
                               "check its spelling or install the channel's package")


def test_a_plugin_that_cannot_be_loaded_is_one_line() -> None:
    broken = {"ghost": EntryPoint(name="ghost", value="no_such_module_anywhere:Adapter", group=GROUP),
              "odd": EntryPoint(name="odd", value="clawgate.channels.kit.markdown:to_plain", group=GROUP)}
    with pytest.raises(ChannelConfigError, match=r"^channel 'ghost' \(no_such_module_anywhere:Adapter\) cannot be "
                                                 r"loaded: ModuleNotFoundError"):
        load("ghost", broken)
    with pytest.raises(ChannelConfigError, match="is not a PlatformAdapter"):
        load("odd", broken)


def test_settings_are_validated_by_the_adapter_with_environment_json_decoded() -> None:
    adapter = load("telegram", FOUND)
    settings = validate(adapter, "telegram", {"token": "1:x", "owner": '["42", "@boss"]', "dm_policy": "open"})
    assert isinstance(settings, TelegramSettings) and settings.owner == ["42", "@boss"]
    with pytest.raises(ChannelConfigError) as info:
        validate(adapter, "telegram", {"dm_policy": "everyone"})
    assert "channels.telegram.dm_policy" in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(ChannelConfigError, match="unknown key 'channels.telegram.tokn'"):
        validate(adapter, "telegram", {"tokn": "1:x"})
    with pytest.raises(ChannelConfigError, match="must be a table"):
        validate(adapter, "telegram", "just a string")
