"""`clawgate pairing list|approve|revoke`: admit people who asked for access, daemon running or not.

Pairing state lives in the daemon's SQLite file (WAL), so these commands write it directly; a
running daemon sees the change on the next message and tells the approved user.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from channels.telegram.pairing import PairingError, PairingStore
from config.loader import ConfigError, load

CHANNELS = ("telegram",)


def _fail(message: str, code: int = 2) -> int:
    print(f"clawgate: {message}", file=sys.stderr)
    return code


def _open() -> tuple[Any, PairingStore]:
    from agent.statedb import open_state_db

    paths, settings = load()
    paths.ensure()
    db = open_state_db(paths.database, fsync=settings.state.fsync, repair=False)
    telegram = settings.channels.telegram
    return db, PairingStore(db, ttl_seconds=telegram.pairing_ttl_seconds, max_pending=telegram.pairing_max_pending,
                            interval_seconds=telegram.pairing_request_interval_seconds)


def _check_channel(name: str | None) -> str | None:
    if name is not None and name not in CHANNELS:
        return f"unknown channel {name!r}; pairing is available for: {', '.join(CHANNELS)}"
    return None


def cmd_list(args: argparse.Namespace) -> int:
    if problem := _check_channel(args.channel):
        return _fail(problem)
    try:
        store, pairing = _open()
    except ConfigError as exc:
        return _fail(str(exc))
    try:
        if args.allowed:
            rows = pairing.allowed(args.channel)
            if not rows:
                print("no paired users")
            for row in rows:
                name = f"@{row['username']}" if row["username"] else "-"
                when = time.strftime("%Y-%m-%d %H:%M", time.localtime(float(row["approved_at"])))  # type: ignore[arg-type]
                print(f"{row['channel']:9} {row['user_id']:>14}  {name:20} approved {when}")
            return 0
        pending = pairing.pending(args.channel)
        if not pending:
            print("no pending pairing requests")
        for req in pending:
            left = max(0, int(req.expires_at - time.time()) // 60)
            name = f"@{req.username}" if req.username else "-"
            print(f"{req.channel:9} {req.code}  user {req.user_id:>14}  {name:20} expires in {left} min")
        return 0
    finally:
        store.close()


def cmd_approve(args: argparse.Namespace) -> int:
    if problem := _check_channel(args.channel):
        return _fail(problem)
    try:
        store, pairing = _open()
    except ConfigError as exc:
        return _fail(str(exc))
    try:
        req = pairing.approve(args.channel, args.code)
    except PairingError as exc:
        return _fail(str(exc), 1)
    finally:
        store.close()
    name = f" (@{req.username})" if req.username else ""
    print(f"approved {req.channel} user {req.user_id}{name}; they can chat now")
    return 0


def cmd_revoke(args: argparse.Namespace) -> int:
    if problem := _check_channel(args.channel):
        return _fail(problem)
    try:
        store, pairing = _open()
    except ConfigError as exc:
        return _fail(str(exc))
    try:
        removed = pairing.revoke(args.channel, args.user)
    finally:
        store.close()
    if not removed:
        return _fail(f"{args.user!r} is not a paired {args.channel} user; `clawgate pairing list --allowed` shows them", 1)
    print(f"revoked {args.channel} user {args.user}")
    return 0


def add_commands(sub: Any) -> None:
    p = sub.add_parser("pairing", help="approve people who asked for access (pairing codes)")
    actions = p.add_subparsers(dest="pairing_command", required=True)

    q = actions.add_parser("list", help="pending pairing codes (or --allowed: paired users)")
    q.add_argument("channel", nargs="?", help="only this channel (telegram)")
    q.add_argument("--allowed", action="store_true", help="list paired users instead")
    q.set_defaults(fn=cmd_list)

    q = actions.add_parser("approve", help="admit the user behind a pairing code")
    q.add_argument("channel", help="the channel the code came from: telegram")
    q.add_argument("code", help="the 8-character code the user was given")
    q.set_defaults(fn=cmd_approve)

    q = actions.add_parser("revoke", help="remove a paired user")
    q.add_argument("channel", help="telegram")
    q.add_argument("user", help="user id or @username")
    q.set_defaults(fn=cmd_revoke)
