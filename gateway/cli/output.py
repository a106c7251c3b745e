"""What commands print, and how a command is declared: `--json` in one key style (camelCase, like the
gateway's payloads) for every command, listings and tables, the subcommand scaffold.

Some payloads still carry snake_case keys (a task's stored fields, the status queue counts);
converting at the one printing point keeps every `--json` consistent whether the data came
from the daemon or from the files.
"""

from __future__ import annotations

import argparse
import json
import re
from typing import Any, Callable

# What every `--json` option says, word for word (gateway/cli/__init__.py checks each command has it).
JSON_HELP = "print the result as JSON (camelCase keys) instead of text, for scripts"

# Values under these keys are user data (a task's free-form context; MCP servers keyed by the names the
# owner gave them), not field names: kept as is.
_VERBATIM = frozenset({"context", "mcp"})
_SNAKE = re.compile(r"_([a-z0-9])")


def camel(key: str) -> str:
    """`updated_at` -> `updatedAt`; keys without an inner underscore are unchanged."""
    head, rest = key[:1], key[1:]
    return head + _SNAKE.sub(lambda m: m.group(1).upper(), rest)


def camel_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {camel(k) if isinstance(k, str) else k: (v if k in _VERBATIM else camel_keys(v))
                for k, v in value.items()}
    if isinstance(value, list):
        return [camel_keys(v) for v in value]
    return value


def print_json(value: Any) -> None:
    print(json.dumps(camel_keys(value), indent=2, ensure_ascii=False))


def print_rows(items: list[Any], *, as_json: bool, empty: str, line: Callable[[Any], str]) -> int:
    """The one shape of every listing command: JSON when asked, a line saying there is nothing, or a line per item."""
    if as_json:
        print_json(items)
        return 0
    if not items:
        print(empty)
    for item in items:
        print(line(item))
    return 0


def print_table(rows: list[tuple[Any, ...]]) -> None:
    """Rows in columns as wide as their widest cell (the first row is the header)."""
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(str(value).ljust(width) for value, width in zip(row, widths, strict=True)).rstrip())


def subcommand(group: Any, name: str, text: str, fn: Callable[[argparse.Namespace], int], *positionals: str,
               json: bool = False, **parser: Any) -> argparse.ArgumentParser:
    """One `clawgate <group> <name>`: its help, positional arguments, `--json` when it prints data, its function."""
    p: argparse.ArgumentParser = group.add_parser(name, help=text, **parser)
    for positional in positionals:
        p.add_argument(positional)
    if json:
        p.add_argument("--json", action="store_true", help=JSON_HELP)
    p.set_defaults(fn=fn)
    return p


def command_group(sub: Any, name: str, text: str) -> Any:
    """`clawgate <name> …`: a group whose subcommands are declared with `subcommand`."""
    return sub.add_parser(name, help=text).add_subparsers(dest=f"{name}_command", required=True)


def finish_help(parser: argparse.ArgumentParser) -> None:
    """Every command's own `--help` opens with what it does: a subcommand declared with only `help=` (the
    line its parent lists) gets that line as its description too; a `--json` declared without help
    gets JSON_HELP. Walks the whole tree."""
    for action in parser._actions:
        if "--json" in action.option_strings and not action.help:
            action.help = JSON_HELP
        if not isinstance(action, argparse._SubParsersAction):
            continue
        listed = {choice.dest: choice.help for choice in action._choices_actions}
        for name, child in action.choices.items():
            if not child.description and listed.get(name):
                child.description = str(listed[name])[:1].upper() + str(listed[name])[1:] + "."
            finish_help(child)
