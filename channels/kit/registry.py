"""Which channels are installed, and building the enabled ones from the config.

Adapters are found through the entry-point group `clawgate.channels` (name = the channel's name
and config section, value = its PlatformAdapter class); the built-in ones register the same way
in clawgate's own pyproject.toml, so a third-party channel is `pip install` plus a
`[channels.<name>]` section. Each section is validated by its adapter's settings model; a
section naming no installed channel is one line naming the installed ones.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Mapping

from pydantic import BaseModel, ValidationError

from .accounts import Account, AccountConfigError, check_distinct, split_accounts
from .adapter import PlatformAdapter
from .kit import ChannelKit, ChannelServices
from .pairing import PairingStore
from .runner import ChannelRunner
from .store import ChannelStore

GROUP = "clawgate.channels"
log = logging.getLogger("clawgate.channels")


class ChannelConfigError(Exception):
    """A `[channels.<name>]` section that cannot be used, as one line naming the fix."""


def installed() -> dict[str, EntryPoint]:
    """name -> entry point of every installed channel."""
    return {ep.name: ep for ep in entry_points(group=GROUP)}


def load(name: str, found: Mapping[str, EntryPoint] | None = None) -> type[PlatformAdapter]:
    """The adapter class of an installed channel; ChannelConfigError (one line) when it cannot be loaded."""
    found = installed() if found is None else found
    if name not in found:
        raise ChannelConfigError(unknown_section(name, found))
    try:
        cls = found[name].load()
    except Exception as exc:  # a broken plugin: one line, the others keep working
        raise ChannelConfigError(f"channel {name!r} ({found[name].value}) cannot be loaded: "
                                 f"{type(exc).__name__}: {exc}; reinstall its package") from None
    if not (isinstance(cls, type) and issubclass(cls, PlatformAdapter)):
        raise ChannelConfigError(f"channel {name!r} ({found[name].value}) is not a PlatformAdapter; "
                                 "fix its clawgate.channels entry point")
    return cls


def unknown_section(name: str, found: Mapping[str, EntryPoint]) -> str:
    names = ", ".join(sorted(found)) or "none"
    return (f"config error: [channels.{name}] names no installed channel (installed: {names}); "
            "check its spelling or install the channel's package")


def validate(cls: type[PlatformAdapter], name: str, table: Any, where: str | None = None) -> BaseModel:
    """`[channels.<name>]` (or one of its accounts, written at `where`) as the adapter's settings;
    ChannelConfigError naming the key otherwise."""
    if isinstance(table, BaseModel):
        return table
    where = where or f"channels.{name}"
    if not isinstance(table, Mapping):
        raise ChannelConfigError(f"config error: {where} must be a table ([{where}]); fix config.toml")
    try:
        return cls.settings_model.model_validate(_decoded(cls.settings_model, where, dict(table)))
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        env = "CLAWGATE_" + "__".join(part.upper() for part in [*where.split("."), *map(str, first["loc"])])
        if first["type"] == "extra_forbidden":
            raise ChannelConfigError(f"config error: unknown key '{where}.{loc}'; remove it from config.toml "
                                     f"(or unset {env}) or check its spelling") from None
        raise ChannelConfigError(f"config error: {where}.{loc}: {first['msg'].lower()}; fix it in "
                                 f"config.toml or {env}") from None


def accounts(cls: type[PlatformAdapter], name: str, table: Any) -> list[tuple[Account, BaseModel]]:
    """Every account of `[channels.<name>]` with its validated settings (the section alone: one, `default`);
    ChannelConfigError (one line naming the account's table) for a bad one or two naming the same bot."""
    try:
        found = [(account, validate(cls, name, account.table, account.where))
                 for account in split_accounts(cls, name, table)]
        check_distinct(cls, [(a, s) for a, s in found if cls.enabled(s)])
    except AccountConfigError as exc:
        raise ChannelConfigError(str(exc)) from None
    return found


def _decoded(model: type[BaseModel], where: str, table: dict[str, Any]) -> dict[str, Any]:
    """Environment values of list and table settings arrive as JSON text (CLAWGATE_CHANNELS__X__OWNER='["1"]'),
    as for the built-in sections: decode them for fields that are not text."""
    out = dict(table)
    for key, value in table.items():
        field_info = model.model_fields.get(key)
        if field_info is None or not isinstance(value, str) or not value.strip().startswith(("[", "{")):
            continue
        if field_info.annotation in (str, str | None):
            continue
        try:
            out[key] = json.loads(value)
        except ValueError:
            variable = "CLAWGATE_" + "__".join(part.upper() for part in [*where.split("."), key])
            raise ChannelConfigError(f"config error: {where}.{key} is not valid JSON, which a list or table setting "
                                     f"needs; fix {variable}: write lists as '[\"a\",\"b\"]'") from None
    return out


@dataclass
class Built:
    """The channels the config enables, and the ones that could not be built (name -> one line)."""

    runners: dict[str, ChannelRunner] = field(default_factory=dict)
    broken: dict[str, str] = field(default_factory=dict)

    def states(self) -> dict[str, dict[str, Any]]:
        """name -> {state, reason?, since, ...} of every channel the config enables, for status and doctor."""
        out = {name: runner.status() for name, runner in self.runners.items()}
        out.update({name: {"name": name, "state": "failed", "reason": reason} for name, reason in self.broken.items()})
        return dict(sorted(out.items()))


def check_sections(sections: Mapping[str, Any], found: Mapping[str, EntryPoint] | None = None) -> None:
    """Every `[channels.<name>]` names an installed channel; else ChannelConfigError (one line)."""
    found = installed() if found is None else found
    for name in sections:
        if name not in found:
            raise ChannelConfigError(unknown_section(name, found))


def build_channels(sections: Mapping[str, Any], services: ChannelServices, db: sqlite3.Connection, *,
                   runner_options: Mapping[str, Any] | None = None) -> Built:
    """A runner per enabled channel. `sections`: name -> settings (a model, or a table to validate).
    ChannelConfigError for a section naming no installed channel or with a bad key (the daemon
    refuses to start: a typo must not silently leave a channel off); a plugin that fails to load is
    reported in `broken` and the others run."""
    found = installed()
    check_sections(sections, found)
    built = Built()
    for name, table in sections.items():
        try:
            cls = load(name, found)
        except ChannelConfigError as exc:
            log.error("%s", exc)
            built.broken[name] = str(exc)
            continue
        for account, settings in accounts(cls, name, table):
            if cls.enabled(settings):
                _build_one(built, cls, account, settings, services, db, runner_options)
    return built


def _build_one(built: Built, cls: type[PlatformAdapter], account: Account, settings: BaseModel,
               services: ChannelServices, db: sqlite3.Connection, runner_options: Mapping[str, Any] | None) -> None:
    """One account's adapter, kit and runner, with its own state (the store and pairing of its channel name)."""
    name = account.channel
    store = ChannelStore(db, name)
    pairing = PairingStore(db, ttl_seconds=settings.pairing_ttl_seconds,  # type: ignore[attr-defined]
                           max_pending=settings.pairing_max_pending,  # type: ignore[attr-defined]
                           interval_seconds=settings.pairing_request_interval_seconds)  # type: ignore[attr-defined]
    kit = ChannelKit(name, settings, services, store, pairing, account=account.account)  # type: ignore[arg-type]
    try:
        adapter = cls(settings, kit)
    except Exception as exc:
        log.error("channel %s cannot be set up: %s", name, exc)
        built.broken[name] = f"cannot be set up: {exc}"
        return
    kit.attach(adapter)
    built.runners[name] = ChannelRunner(adapter, kit, **dict(runner_options or {}))


__all__ = ["Built", "ChannelConfigError", "GROUP", "accounts", "build_channels", "check_sections", "installed",
           "load", "validate"]
