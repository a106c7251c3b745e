"""`clawgate pairing list|approve|revoke`: admit people who asked for access, daemon running or not.

Pairing state lives in the daemon's SQLite file (WAL), which the daemon re-reads on every
message, so there is no gateway method: these commands write it directly, under the instance
lock when no daemon runs. A running daemon tells the approved user on its next check.
"""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING, Any, Callable

from .errors import EXIT_FAILED, EXIT_USAGE, CliError
from .output import command_group, print_rows, subcommand
from .remote import gateway_or_offline

if TYPE_CHECKING:
    from ..offline import Offline



def _channels() -> list[str]:
    """The installed channels (entry points of the `clawgate.channels` group)."""
    from clawgate.channels.kit.registry import installed

    return sorted(installed())


def _with_pairing(fn: Callable[[Any], dict[str, Any]], channel: str | None = None) -> dict[str, Any]:
    """Run `fn(PairingStore)` on the shared database; a PairingError is one line, exit 1."""
    def run(parts: "Offline") -> dict[str, Any]:
        from clawgate.channels.kit.pairing import PairingError

        try:
            return fn(parts.pairing(channel))
        except PairingError as exc:
            raise CliError(str(exc), EXIT_FAILED) from None
    return gateway_or_offline(None, {}, run).payload


def _check_channel(name: str | None) -> None:
    """An installed channel, or one of its accounts (`telegram.work`)."""
    from clawgate.config.access import ACCOUNT_NAME, DEFAULT_ACCOUNT, split_channel_name

    if name is None:
        return
    platform, account = split_channel_name(name)
    if platform not in (channels := _channels()):
        raise CliError(f"unknown channel {name!r}; pairing is available for: {', '.join(channels)} "
                       "(an account's as <channel>.<account>, e.g. telegram.work)", EXIT_USAGE)
    if account == DEFAULT_ACCOUNT and name != platform or not ACCOUNT_NAME.match(account):
        raise CliError(f"{name!r} names no account of {platform}; give {platform} or {platform}.<account> "
                       "as `clawgate channels` lists it", EXIT_USAGE)


def cmd_list(args: argparse.Namespace) -> int:
    _check_channel(args.channel)
    if args.allowed:
        def paired(row: dict[str, Any]) -> str:
            name = f"@{row['username']}" if row["username"] else "-"
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(float(row["approved_at"])))
            return f"{row['channel']:9} {row['user_id']:>14}  {name:20} approved {when}"
        return print_rows(_with_pairing(lambda p: {"rows": p.allowed(args.channel)})["rows"], as_json=False,
                          empty="no paired users", line=paired)

    def waiting(req: Any) -> str:
        left = max(0, int(req.expires_at - time.time()) // 60)
        name = f"@{req.username}" if req.username else "-"
        return f"{req.channel:9} {req.code}  user {req.user_id:>14}  {name:20} expires in {left} min"
    return print_rows(_with_pairing(lambda p: {"pending": p.pending(args.channel)})["pending"], as_json=False,
                      empty="no pending pairing requests", line=waiting)


def cmd_approve(args: argparse.Namespace) -> int:
    _check_channel(args.channel)
    req = _with_pairing(lambda p: {"request": p.approve(args.channel, args.code)}, args.channel)["request"]
    name = f" (@{req.username})" if req.username else ""
    print(f"approved {req.channel} user {req.user_id}{name}; they can chat now")
    return 0


def cmd_revoke(args: argparse.Namespace) -> int:
    _check_channel(args.channel)
    if not _with_pairing(lambda p: {"removed": p.revoke(args.channel, args.user)}, args.channel)["removed"]:
        raise CliError(f"{args.user!r} is not a paired {args.channel} user; `clawgate pairing list --allowed` shows them",
                       EXIT_FAILED)
    print(f"revoked {args.channel} user {args.user}")
    return 0


def add_commands(sub: Any) -> None:
    actions = command_group(sub, "pairing", "approve people who asked for access (pairing codes)")
    q = subcommand(actions, "list", "pending pairing codes (or --allowed: paired users)", cmd_list)
    q.add_argument("channel", nargs="?", help="only this channel (telegram, …: `clawgate channels`)")
    q.add_argument("--allowed", action="store_true", help="list paired users instead")
    q = subcommand(actions, "approve", "admit the user behind a pairing code", cmd_approve)
    q.add_argument("channel", help="the channel the code came from, e.g. telegram")
    q.add_argument("code", help="the 8-character code the user was given")
    q = subcommand(actions, "revoke", "remove a paired user", cmd_revoke)
    q.add_argument("channel", help="the user's channel, e.g. telegram")
    q.add_argument("user", help="user id or @username")
