"""`clawgate pairing list|approve|revoke`: admit people who asked for access, daemon running or not.

Pairing state lives in the daemon's SQLite file (WAL), which the daemon re-reads on every
message, so there is no gateway method: these commands write it directly, under the instance
lock when no daemon runs. A running daemon tells the approved user on its next check.
"""

from __future__ import annotations

import argparse
import time
from typing import Any, Callable

from .errors import EXIT_FAILED, EXIT_USAGE, CliError
from .remote import Target, gateway_or_offline



def _channels() -> list[str]:
    """The installed channels (entry points of the `clawgate.channels` group)."""
    from clawgate.channels.kit.registry import installed

    return sorted(installed())


def _access(settings: Any, channel: str | None) -> Any:
    """The pairing limits of `channel`'s section (the defaults for a channel without one)."""
    from clawgate.config.access import AccessSettings

    if channel in (None, "telegram"):
        return settings.channels.telegram
    table = settings.channels.sections().get(channel) or {}
    return AccessSettings(**{k: v for k, v in table.items() if k.startswith("pairing_")})


def _with_pairing(fn: Callable[[Any], dict[str, Any]], channel: str | None = None) -> dict[str, Any]:
    """Run `fn(PairingStore)` on the shared database; a PairingError is one line, exit 1."""
    def run(t: Target) -> dict[str, Any]:
        from clawgate.agent.core.statedb import open_state_db
        from clawgate.channels.kit.pairing import PairingError, PairingStore

        t.paths.ensure()
        db = open_state_db(t.paths.database, fsync=t.settings.state.fsync, repair=False)
        access = _access(t.settings, channel)
        try:
            return fn(PairingStore(db, ttl_seconds=access.pairing_ttl_seconds,
                                   max_pending=access.pairing_max_pending,
                                   interval_seconds=access.pairing_request_interval_seconds))
        except PairingError as exc:
            raise CliError(str(exc), EXIT_FAILED) from None
        finally:
            db.close()
    return gateway_or_offline(None, {}, run).payload


def _check_channel(name: str | None) -> None:
    if name is not None and name not in (channels := _channels()):
        raise CliError(f"unknown channel {name!r}; pairing is available for: {', '.join(channels)}", EXIT_USAGE)


def cmd_list(args: argparse.Namespace) -> int:
    _check_channel(args.channel)
    if args.allowed:
        rows = _with_pairing(lambda p: {"rows": p.allowed(args.channel)})["rows"]
        if not rows:
            print("no paired users")
        for row in rows:
            name = f"@{row['username']}" if row["username"] else "-"
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(float(row["approved_at"])))
            print(f"{row['channel']:9} {row['user_id']:>14}  {name:20} approved {when}")
        return 0
    pending = _with_pairing(lambda p: {"pending": p.pending(args.channel)})["pending"]
    if not pending:
        print("no pending pairing requests")
    for req in pending:
        left = max(0, int(req.expires_at - time.time()) // 60)
        name = f"@{req.username}" if req.username else "-"
        print(f"{req.channel:9} {req.code}  user {req.user_id:>14}  {name:20} expires in {left} min")
    return 0


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
    p = sub.add_parser("pairing", help="approve people who asked for access (pairing codes)")
    actions = p.add_subparsers(dest="pairing_command", required=True)

    q = actions.add_parser("list", help="pending pairing codes (or --allowed: paired users)")
    q.add_argument("channel", nargs="?", help="only this channel (telegram, …: `clawgate channels`)")
    q.add_argument("--allowed", action="store_true", help="list paired users instead")
    q.set_defaults(fn=cmd_list)

    q = actions.add_parser("approve", help="admit the user behind a pairing code")
    q.add_argument("channel", help="the channel the code came from, e.g. telegram")
    q.add_argument("code", help="the 8-character code the user was given")
    q.set_defaults(fn=cmd_approve)

    q = actions.add_parser("revoke", help="remove a paired user")
    q.add_argument("channel", help="the user's channel, e.g. telegram")
    q.add_argument("user", help="user id or @username")
    q.set_defaults(fn=cmd_revoke)
