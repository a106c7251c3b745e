"""`clawgate channels [--json]`: the installed chat channels, which ones the config enables, and their state.

Installed: the entry points of the `clawgate.channels` group (built-in and third-party alike).
Enabled: a `[channels.<name>]` section without `enabled = false` (Telegram: a bot token). State:
the running daemon's (starting, running, retrying, failed, stopped), or "daemon not running".
"""

from __future__ import annotations

import argparse
from typing import Any

from .output import JSON_HELP, print_json, print_table
from .remote import Target, gateway_or_offline


def _configured(t: Target) -> dict[str, bool]:
    """channel name -> enabled, for every channel and account the config mentions (`telegram`,
    `telegram.work`: each account of a channel is a line of its own)."""
    telegram = t.settings.channels.telegram
    sections: dict[str, Any] = {"telegram": telegram, **t.settings.channels.sections()}
    out: dict[str, bool] = {}
    for name, table in sections.items():
        for channel, own in _accounts(name, table):
            if not isinstance(own, dict):  # Telegram's own section: on with a token
                out[channel] = own.enabled is not False and bool(own.token)
            else:
                out[channel] = own.get("enabled") is not False and (name != "telegram" or bool(own.get("token")))
    return out


def _accounts(name: str, table: Any) -> list[tuple[str, Any]]:
    """(channel name, its table) of each account of a section; the section alone when its channel is not
    installed (the line then says so)."""
    from clawgate.channels.kit.accounts import AccountConfigError, names_accounts, split_accounts
    from clawgate.channels.kit.registry import ChannelConfigError, load

    if not names_accounts(table):  # the section is its one account: its adapter (and library) is not loaded
        return [(name, table)]
    try:
        return [(a.channel, a.table) for a in split_accounts(load(name), name, table)]
    except (ChannelConfigError, AccountConfigError):
        return [(name, table)]


def rows() -> list[dict[str, Any]]:
    from clawgate.channels.kit.registry import installed
    from clawgate.config.access import split_channel_name

    found = installed()
    seen: dict[str, Any] = {}

    def offline(t: Target) -> dict[str, Any]:
        seen["configured"] = _configured(t)
        return {}

    reply = gateway_or_offline("status", {}, offline)
    states: dict[str, Any] = reply.payload.get("channelStates") or {} if reply.live else {}
    if "configured" not in seen:  # the daemon answered: read the config here too, for the enabled column
        from .remote import target

        seen["configured"] = _configured(target())
    configured: dict[str, bool] = seen["configured"]
    out = []
    for name in sorted(set(found) | set(configured)):
        state = states.get(name)
        platform = split_channel_name(name)[0]
        out.append({
            "name": name,
            "installed": found[platform].value if platform in found else None,
            "enabled": bool(configured.get(name)) and platform in found,
            "state": (state or {}).get("state") if reply.live else None,
            "reason": (state or {}).get("reason"),
            "bot": (state or {}).get("bot"),
            "notice": (state or {}).get("notice"),  # something the owner should know (WhatsApp's 24-hour window)
            "daemon": reply.live,
        })
    return out


def cmd_channels(args: argparse.Namespace) -> int:
    table = rows()
    if args.json:
        print_json(table)
        return 0
    lines: list[tuple[str, ...]] = [("CHANNEL", "ENABLED", "ADAPTER", "STATE")]
    for row in table:
        installed = row["installed"] or "not installed (a [channels] section names it)"
        if not row["daemon"]:
            state = "daemon not running"
        elif row["state"] is None:
            state = "-" if not row["enabled"] else "not started"
        else:
            state = row["state"] + (f" as {row['bot']}" if row["bot"] else "") + \
                (f" ({row['reason']})" if row["reason"] and row["state"] != "running" else "")
        if row.get("notice"):
            state += f"; {row['notice']}"
        lines.append((row["name"], "yes" if row["enabled"] else "no", installed, state))
    print_table(lines)
    return 0


def add_commands(sub: Any) -> None:
    p = sub.add_parser("channels", help="installed chat channels, the enabled ones and their state")
    p.add_argument("--json", action="store_true", help=JSON_HELP)
    p.set_defaults(fn=cmd_channels)
    from .channels_login import add_login  # `clawgate channels login <channel>`

    add_login(p)
