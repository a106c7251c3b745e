"""The `clawgate` command: the parser, and `main`, the one place errors become one line and an exit code.

Commands live one group per module (chat/status, cron, tasks, checkpoints, pairing, init, gateway) and
raise `CliError`; `remote.py` decides between the running gateway and the files. Exit codes
are listed in errors.py and in README.md (section Commands).
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
from typing import Any, NoReturn, Sequence

from clawgate.config.entry_point_scan import one_entry_point_scan

from .. import __version__
from .errors import EXIT_BROKEN_PIPE, EXIT_INTERRUPTED, EXIT_USAGE, CliError, report
from .output import finish_help

__all__ = ["build_parser", "main"]


class _NotTheDaemonStart(Exception):
    """The arguments are not a plain daemon start: parse them with the whole parser."""


class _DaemonStartParser(argparse.ArgumentParser):
    """The parser of `clawgate gateway` alone: a bad argument falls back to the whole parser, which prints
    the usual usage and error, so a start only pays for the command it runs."""

    def error(self, message: str) -> NoReturn:
        raise _NotTheDaemonStart(message)


def build_parser(parser_class: type[argparse.ArgumentParser] = argparse.ArgumentParser) -> argparse.ArgumentParser:
    from . import serve

    parser = parser_class(prog="clawgate", description="Self-hosted chat agent daemon.",
                          epilog="exit codes: 0 ok, 1 refused (not found, conflict), 2 usage or config, "
                                 "3 no gateway running, 4 cannot talk to the gateway, 5 a gateway already "
                                 "runs on this home, 130 interrupted, 141 output pipe closed")
    parser.add_argument("--version", action="version", version=f"clawgate {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    if parser_class is _DaemonStartParser:
        groups: tuple[Any, ...] = (serve,)
    else:  # every command module: importing them all (the chat client, websockets' client side ...) costs a start ~15 ms
        from . import (agents, approvals, channels, chat, checkpoints, cron, doctor, home, hooks, logs, pairing, tasks,
                       usage, web)

        groups = (home, serve, chat, approvals, tasks, checkpoints, cron, hooks, pairing, channels, agents, doctor, logs,
                  usage, web)
    for group in groups:
        group.add_commands(sub)
    finish_help(parser)
    return parser


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """`clawgate gateway` (how a supervisor starts the daemon) is parsed by its own command's parser;
    anything else, `--help` anywhere, or arguments that parser refuses, by the whole one."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["gateway"] and not {"-h", "--help"} & set(args):
        try:
            return build_parser(_DaemonStartParser).parse_args(args)
        except _NotTheDaemonStart:
            pass
    return build_parser().parse_args(args)  # usage errors: argparse prints them and exits 2


def main(argv: Sequence[str] | None = None) -> int:
    """The process's entry: `clawgate …` and `python -m clawgate.gateway.cli …`."""
    # No cyclic collection while the modules load: the imports create ~50,000 long-lived objects and
    # almost no cyclic garbage, and the ~100 collections they would trigger walk the same new objects
    # again and again (about 4 % of a daemon's start). Every command but the daemon turns it back on
    # once parsed; the daemon at its ready line, freezing what it built first (gateway/runtime.py).
    gc.disable()
    try:
        with one_entry_point_scan():  # pydantic's plugin lookup at its first model
            from clawgate.config.loader import ConfigError
        args = parse(argv)
        if args.command != "gateway" or args.action is not None:
            gc.enable()
        code = _run(args, ConfigError)
    finally:
        gc.enable()
    if (warm_up := sys.modules.get("clawgate.gateway.warm_up")) is not None:  # loaded by a daemon only
        warm_up.exit_if_left_running(code)  # a thread in OpenSSL must not meet its exit handlers
    return code


def _run(args: argparse.Namespace, config_error: type[Exception]) -> int:
    """The command, its errors as one line and an exit code."""
    # Everything clawgate creates (state, logs, SQLite's -wal/-shm, the workspace templates, files
    # the agent's commands write) holds conversations or secrets: user-only whatever umask the
    # shell or service manager passed down. Files with explicit modes keep them as well.
    os.umask(0o077)
    try:
        try:
            code = args.fn(args)
        except CliError as exc:
            return report(exc.message, exc.exit_code)
        except config_error as exc:
            return report(str(exc), EXIT_USAGE)
        sys.stdout.flush()  # a closed pipe shows here, inside the try, not at interpreter exit
        return code
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`… | head -1`). As the Python docs advise: point stdout at
        # devnull so the flush at exit cannot raise again, and exit quietly.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_BROKEN_PIPE

