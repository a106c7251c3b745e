"""Several bot accounts of one channel: `[channels.<name>.accounts.<account>]` beside the section's own keys.

Each account runs as its own adapter, kit and runner under its own channel name (`telegram.work`; the
section's own account is `default` and keeps the name `telegram`, so existing homes keep their state,
session keys and pairing). An account's settings are the section's keys overlaid by its table, so owners
and policies can be written once; the result is validated by the adapter's settings model, and an error
names the account's table.

The section itself is an account when it has no `accounts`, or when it names a whole bot account itself
(every one of the adapter's `account_fields`, or its `token`): two Telegram bots are the old section plus
one account table. Two accounts naming the same bot (the same identity settings) are refused: they would
take turns on one connection and answer each message twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from pydantic import BaseModel

from clawgate.config.access import ACCOUNT_NAME, ACCOUNT_NAME_RULE, DEFAULT_ACCOUNT, AccessSettings, channel_name

from .adapter import PlatformAdapter


class AccountConfigError(Exception):
    """An accounts table that cannot be used, as one line naming the fix (the registry's ChannelConfigError)."""


@dataclass(frozen=True)
class Account:
    """One bot account of a channel, before its settings are validated."""

    channel: str  # the name it runs under: "telegram", "telegram.work"
    platform: str  # the adapter's name: "telegram"
    account: str  # "default", "work"
    table: Any  # the settings to validate: the section's model (the default account) or a merged table
    where: str  # where its keys are written, for error lines: "channels.telegram.accounts.work"


def identity_fields(cls: type[PlatformAdapter]) -> tuple[str, ...]:
    """The settings that say which bot an account is: the adapter's account_fields, else its token."""
    if cls.account_fields:
        return cls.account_fields
    own = [f for f in cls.settings_model.model_fields if f not in AccessSettings.model_fields]
    return ("token",) if "token" in own else tuple(own)


def _value(table: Any, key: str) -> Any:
    value = getattr(table, key, None) if isinstance(table, BaseModel) else table.get(key)
    return value.get_secret_value() if hasattr(value, "get_secret_value") else value


def _shared(table: Any) -> dict[str, Any]:
    """The section's own keys, as written (defaults are left to each account's validation)."""
    if isinstance(table, BaseModel):
        return table.model_dump(exclude={"accounts"}, exclude_unset=True)
    return {key: value for key, value in table.items() if key != "accounts"}


def _variable(where: str) -> str:
    """The environment variable that writes a dotted key, for error lines: the value may come from either."""
    return "CLAWGATE_" + "__".join(part.upper() for part in where.split("."))


def names_accounts(table: Any) -> bool:
    """Whether a `[channels.<name>]` section (a model or a table) has accounts of its own; without, it is the
    one default account, and splitting it needs nothing of the adapter."""
    return bool(_value(table, "accounts")) if isinstance(table, (BaseModel, Mapping)) else False


def split_accounts(cls: type[PlatformAdapter], name: str, table: Any) -> list[Account]:
    """The accounts of `[channels.<name>]` (a model or a table), the section's own first when it is one."""
    tables = _value(table, "accounts") if isinstance(table, (BaseModel, Mapping)) else None
    if not tables:
        return [Account(name, name, DEFAULT_ACCOUNT, table, f"channels.{name}")]
    if not isinstance(tables, Mapping):
        raise AccountConfigError(f"config error: channels.{name}.accounts must be tables "
                                 f"([channels.{name}.accounts.<name>]); fix config.toml or {_variable(f'channels.{name}.accounts')}")
    identity = identity_fields(cls)
    out: list[Account] = []
    if "default" not in tables and identity and all(_value(table, key) for key in identity):
        out.append(Account(name, name, DEFAULT_ACCOUNT, table, f"channels.{name}"))
    shared = _shared(table)
    for account, own in tables.items():
        where = f"channels.{name}.accounts.{account}"
        if not ACCOUNT_NAME.match(str(account)):
            raise AccountConfigError(f"config error: {where}: an account name is {ACCOUNT_NAME_RULE}; rename it")
        if not isinstance(own, Mapping):
            raise AccountConfigError(f"config error: {where} must be a table ([{where}]); fix config.toml or "
                                     f"{_variable(where)}")
        if "accounts" in own:
            raise AccountConfigError(f"config error: {where}.accounts: an account has no accounts of its own; "
                                     f"move them to [channels.{name}.accounts.<name>]")
        out.append(Account(channel_name(name, account), name, account, {**shared, **own}, where))
    return out


def check_distinct(cls: type[PlatformAdapter], accounts: list[tuple[Account, BaseModel]]) -> None:
    """Refuse two enabled accounts of one channel naming the same bot (one line naming both)."""
    identity = identity_fields(cls)
    if not identity:
        return
    seen: dict[tuple[Any, ...], str] = {}
    own_session = getattr(cls, "session_per_account", None)  # the account's own state names the bot (a linked device)
    for account, settings in accounts:
        if own_session is not None and own_session(settings):
            continue
        key = tuple(_value(settings, field) for field in identity)
        if key in seen:
            raise AccountConfigError(
                f"config error: {account.where} names the same {account.platform} account as {seen[key]} "
                f"(the same {', '.join(identity)}); give each account its own, or remove one")
        seen[key] = account.where


__all__ = ["Account", "AccountConfigError", "check_distinct", "identity_fields", "names_accounts", "split_accounts"]
