"""`clawgate agents list|bindings|add|remove|bind|unbind`: the agents of this home and the bindings
routing chats to them (docs/agents.md).

list and bindings show what the running daemon routes by (its `agents.list`), else config.toml; a
config edited since the daemon started is pointed out. The edits change config.toml (comments and
layout kept, checked as the daemon would load it, refused in one line with nothing written); the
daemon reads them when it starts, so a running conversation is never moved mid-run.
"""

from __future__ import annotations

import argparse
from typing import Any

from clawgate.config.loader import ConfigError, roster_of

from .errors import EXIT_FAILED, CliError
from .output import command_group, print_json, print_table, subcommand
from .remote import gateway_or_offline, target

APPLY = "saved in config.toml; a running daemon applies it when it next starts (running conversations stay where they are)"
MATCH_KEYS = ("channel", "account", "peer", "guild", "team", "room")


def _views() -> tuple[dict[str, Any], bool, bool]:
    """(the rows routed by, whether a daemon answered, whether config.toml says something else)."""
    from clawgate.gateway.api.agents import roster_rows

    t = target()
    written = roster_rows(roster_of(t.paths, t.settings))
    reply = gateway_or_offline("agents.list", {}, lambda parts: written)
    return reply.payload, reply.live, reply.live and reply.payload != written


def _stale_note(live: bool, stale: bool) -> None:
    if stale:
        print("note: config.toml has changed since the daemon started; it routes as shown until restarted")
    elif not live:
        print("(daemon not running: as config.toml says)")


def cmd_list(args: argparse.Namespace) -> int:
    view, live, stale = _views()
    if args.json:
        print_json({**view, "daemon": live, "configChanged": stale})
        return 0
    rows: list[tuple[str, ...]] = [("AGENT", "DEFAULT", "HEARTBEAT", "WORKSPACE", "BINDINGS")]
    for agent in view["agents"]:
        rows.append((agent["id"], "yes" if agent["default"] else "", agent.get("heartbeatDeliver", "?"), agent["workspace"],
                     "; ".join(text.split(" <- ", 1)[1] for text in agent["bindings"]) or "-"))
    print_table(rows)
    _stale_note(live, stale)
    return 0


def cmd_bindings(args: argparse.Namespace) -> int:
    view, live, stale = _views()
    if args.json:
        print_json({"bindings": view["bindings"], "daemon": live, "configChanged": stale})
        return 0
    if not view["bindings"]:
        print("no bindings: every chat goes to the default agent")
    else:
        print_table([("#", "AGENT", "MATCH")] + [(str(b["index"]), b["agent"], b["text"].split(" <- ", 1)[1])
                                                 for b in view["bindings"]])
    _stale_note(live, stale)
    return 0


def _edit(change: Any) -> None:
    from clawgate.config.edit import edit

    try:
        edit(target().paths, change)
    except ConfigError as exc:  # the edit would make a config the daemon refuses: nothing was written
        raise CliError(f"not changed: {str(exc).removeprefix('config error: ')}", EXIT_FAILED) from None


def cmd_add(args: argparse.Namespace) -> int:
    from clawgate.config.agents import IMPLICIT_AGENT
    from clawgate.config.edit import agents_table

    ident: str = args.id
    first = not target().settings.agents

    def change(doc: Any) -> None:
        agents = agents_table(doc)
        if ident in agents:
            raise ConfigError(f"config error: agent {ident!r} already exists; `clawgate agents list` shows them")
        if first and ident != IMPLICIT_AGENT and not args.default:  # today's one agent becomes the default, by name
            agents[IMPLICIT_AGENT] = {"default": True}
        if args.default:
            for other in agents.values():
                other.pop("default", None)
        agents[ident] = {"default": True} if args.default or (first and ident == IMPLICIT_AGENT) else {}

    _edit(change)
    note = f" (this home's existing agent is now [agents.{IMPLICIT_AGENT}], the default)" \
        if first and ident != IMPLICIT_AGENT and not args.default else ""
    print(f"added agent {ident}{note}; {APPLY}")
    return 0


def cmd_remove(args: argparse.Namespace) -> int:
    from clawgate.config.edit import agents_table

    ident: str = args.id
    settings = target().settings
    if ident not in settings.agents:
        raise CliError(f"no agent {ident!r} in config.toml; `clawgate agents list` shows them", EXIT_FAILED)
    if settings.agents[ident].default:
        raise CliError(f"agent {ident!r} is the default; make another the default first "
                       "(`clawgate agents add ID --default`)", EXIT_FAILED)
    if named := [str(i) for i, b in enumerate(settings.bindings) if b.agent == ident]:
        raise CliError(f"agent {ident!r} is named by binding(s) {', '.join(named)}; remove them first "
                       f"(`clawgate agents unbind {named[-1]}`)", EXIT_FAILED)
    _edit(lambda doc: agents_table(doc).pop(ident))
    print(f"removed agent {ident} (its sessions stay on disk); {APPLY}")
    return 0


def cmd_bind(args: argparse.Namespace) -> int:
    from clawgate.config.edit import binding_table, bindings_array

    match: dict[str, Any] = {key: getattr(args, key) for key in MATCH_KEYS if getattr(args, key)}
    if args.role:
        match["roles"] = list(args.role)
    if not match:
        raise CliError("say what to match: --channel, --account, --peer, --guild, --role, --team or --room")
    _edit(lambda doc: bindings_array(doc).append(binding_table(args.id, match)))
    print(f"bound {args.id} <- {' '.join(f'{k}={v}' for k, v in match.items())}; {APPLY}")
    return 0


def cmd_unbind(args: argparse.Namespace) -> int:
    from clawgate.config.edit import bindings_array

    index: int = args.index
    count = len(target().settings.bindings)
    if not 0 <= index < count:
        raise CliError(f"no binding {index}; there are {count} (`clawgate agents bindings` numbers them)", EXIT_FAILED)
    _edit(lambda doc: bindings_array(doc).pop(index))
    print(f"removed binding {index}; {APPLY}")
    return 0


def add_commands(sub: Any) -> None:
    group = command_group(sub, "agents", "the agents of this home and the bindings routing chats to them")
    subcommand(group, "list", "each agent: id, whether it is the default, workspace, bindings", cmd_list, json=True)
    subcommand(group, "bindings", "the bindings, numbered (the most specific match wins)", cmd_bindings, json=True)
    add = subcommand(group, "add", "add an agent to config.toml", cmd_add, "id")
    add.add_argument("--default", action="store_true", help="make it the default agent (of chats no binding routes)")
    subcommand(group, "remove", "remove an agent from config.toml (not the default, not one a binding names)",
               cmd_remove, "id")
    bind = subcommand(group, "bind", "route matching chats to an agent", cmd_bind, "id")
    for key in MATCH_KEYS:
        bind.add_argument(f"--{key}", help=f"match the message's {key}")
    bind.add_argument("--role", action="append", help="a Discord role id the sender holds (repeatable; needs --guild)")
    unbind = subcommand(group, "unbind", "remove a binding by its number (`clawgate agents bindings`)", cmd_unbind)
    unbind.add_argument("index", type=int)
