"""`clawgate channels login <channel>`: pair clawgate with a platform that links devices (Signal's QR code).

The adapter does the platform's part (a `login(settings, show)` classmethod, like `probe`): here only
its settings are read from the config and its lines printed. A channel without one says how it is
set up instead.
"""

from __future__ import annotations

import argparse
import asyncio

from .errors import EXIT_FAILED, CliError
from .remote import target


def cmd_login(args: argparse.Namespace) -> int:
    from clawgate.channels.kit import ChannelAuthError, ChannelUnavailable
    from clawgate.channels.kit.registry import ChannelConfigError, load, validate

    settings = target().settings
    try:
        cls = load(args.channel)
        table = settings.channels.sections().get(args.channel) or {}
        model = validate(cls, args.channel, table)
    except ChannelConfigError as exc:
        raise CliError(str(exc)) from None
    login = getattr(cls, "login", None)
    if login is None:
        raise CliError(f"channel {args.channel} links no device: set its credentials in [channels.{args.channel}] "
                       f"(docs/{args.channel}.md)")
    try:
        line = asyncio.run(login(model, lambda text: print(text, flush=True)))
    except (ChannelAuthError, ChannelUnavailable) as exc:
        raise CliError(str(exc), EXIT_FAILED) from None
    print(line)
    return 0


def add_login(parent: argparse.ArgumentParser) -> None:
    sub = parent.add_subparsers(dest="channels_command", metavar="login")
    p = sub.add_parser("login", help="link clawgate as a device of a platform account (Signal: a QR code)")
    p.add_argument("channel", help="the channel to link (signal)")
    p.set_defaults(fn=cmd_login)
