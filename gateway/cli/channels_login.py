"""`clawgate channels login <channel>`: pair clawgate with a platform that links devices (Signal's and
WhatsApp's QR codes; WhatsApp's `--phone` pairing code; `--account` for an account of the channel).

The adapter does the platform's part (a `login(settings, show)` classmethod, like `probe`): here only
its settings are read from the config and its lines printed. A channel without one says how it is
set up instead.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect

from .errors import EXIT_FAILED, CliError
from .remote import target


def cmd_login(args: argparse.Namespace) -> int:
    from clawgate.channels.kit import ChannelAuthError, ChannelUnavailable
    from clawgate.channels.kit.registry import ChannelConfigError, accounts, load, validate

    settings = target().settings
    account = getattr(args, "account", None) or "default"
    try:
        cls = load(args.channel)
        table = settings.channels.sections().get(args.channel) or {}
        found = {a.account: model for a, model in accounts(cls, args.channel, table)} if table else {}
        model = found.get(account) or (validate(cls, args.channel, table) if account == "default" else None)
    except ChannelConfigError as exc:
        raise CliError(str(exc)) from None
    if model is None:
        raise CliError(f"channel {args.channel} has no account {account}: add [channels.{args.channel}.accounts."
                       f"{account}] to config.toml")
    login = getattr(cls, "login", None)
    if login is None:
        raise CliError(f"channel {args.channel} links no device: set its credentials in [channels.{args.channel}] "
                       f"(docs/{args.channel}.md)")
    accepted = inspect.signature(login).parameters  # what this login takes beyond the settings (WhatsApp's)
    extra: dict[str, str] = {"account": account} if "account" in accepted else {}
    phone = getattr(args, "phone", None)
    for flag, given in (("account", account != "default"), ("phone", phone is not None)):
        if given and flag not in accepted:
            raise CliError(f"channel {args.channel} takes no --{flag} when linking")
    if phone is not None:
        extra["phone"] = phone
    try:
        line = asyncio.run(login(model, lambda text: print(text, flush=True), **extra))
    except (ChannelAuthError, ChannelUnavailable) as exc:
        raise CliError(str(exc), EXIT_FAILED) from None
    print(line)
    return 0


def add_login(parent: argparse.ArgumentParser) -> None:
    sub = parent.add_subparsers(dest="channels_command", metavar="login")
    p = sub.add_parser("login", help="link clawgate as a device of a platform account (Signal, WhatsApp: a QR code)")
    p.add_argument("channel", help="the channel to link (signal, whatsapp)")
    p.add_argument("--account", help="the account to link ([channels.<channel>.accounts.<name>]; default: the section's)")
    p.add_argument("--phone", help="WhatsApp: show a pairing code for this number (+15551234567) instead of a QR code")
    p.set_defaults(fn=cmd_login)
