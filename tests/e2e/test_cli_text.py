"""The command line reads as finished: every command's own `--help` says what it does, `--json` is
described the same way everywhere, `status` is text a person reads (no Python reprs, uptime with a
unit) and `channels` is a table with a header — through the real CLI against the real daemon."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys

from clawgate.gateway.cli import build_parser
from clawgate.gateway.cli.output import JSON_HELP
from clawgate.gateway.cli.status_view import duration, status_lines
from tests.harness import ROOT, DaemonProcess

REPR = re.compile(r"\[['\"]|\{['\"]|\bNone\b|\bTrue\b|\bFalse\b")


def commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every (sub)command of the tree, the root included."""
    out = [(path, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                out += commands(child, (*path, name))
    return out


def test_every_command_has_a_description_and_one_json_wording() -> None:
    tree = commands(build_parser())
    assert len(tree) > 30  # the whole tree was walked, groups and their subcommands
    missing = [" ".join(path) or "clawgate" for path, parser in tree if not (parser.description or "").strip()]
    assert missing == [], f"commands whose --help has no description: {missing}"
    json_helps = {" ".join(path): action.help for path, parser in tree for action in parser._actions
                  if "--json" in action.option_strings}
    assert len(json_helps) >= 10 and all(str(h).startswith(JSON_HELP) for h in json_helps.values()), json_helps


def test_the_real_help_of_nested_commands_shows_it() -> None:
    for path in (("cron", "add"), ("tasks", "list"), ("status",), ("doctor",)):
        out = subprocess.run([sys.executable, "-m", "clawgate.gateway.cli", *path, "--help"], cwd=ROOT,
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        usage, _, rest = out.stdout.partition("\n\n")
        description = rest.split("\n\n")[0].strip()
        assert description and not description.startswith(("positional", "options")), (path, out.stdout)
        if "--json" in out.stdout:
            assert " ".join(JSON_HELP.split()[:4]) in " ".join(out.stdout.split()), out.stdout


def test_durations_carry_a_unit() -> None:
    assert [duration(s) for s in (0.5, 42, 192, 7500, 3 * 86400 + 4000)] == \
        ["0.5 s", "42 s", "3 min 12 s", "2 h 5 min", "3 d 1 h"]


def test_status_values_of_every_shape_are_text() -> None:
    lines = status_lines({"uptime": 61.2, "channels": ["gateway", "telegram"], "activeSessions": [],
                          "queues": {"inboxOpen": 2, "outboxPending": 1}, "fleet_like": {"a": None, "b": True},
                          "clients": 3, "backgroundJobs": []})
    text = "\n".join(lines)
    assert not REPR.search(text), text
    assert "1 min 1 s" in text and "gateway, telegram" in text and "2 message(s)" in text and "3 connected" in text


def test_status_and_channels_against_the_running_daemon(daemon: DaemonProcess) -> None:
    status = daemon.cli("status")
    assert status.returncode == 0, status.stderr
    assert not REPR.search(status.stdout), status.stdout
    labels = [line[:16].strip() for line in status.stdout.splitlines() if line[:16].strip()]
    assert {"uptime", "channels", "active sessions", "queues", "clients", "event loop"} <= set(labels), labels
    uptime = next(line for line in status.stdout.splitlines() if line.startswith("uptime"))
    assert re.fullmatch(r"uptime\s+\d+(\.\d)? (s|min \d+ s)", uptime), uptime

    table = daemon.cli("channels").stdout.splitlines()
    assert table[0].split() == ["CHANNEL", "ENABLED", "ADAPTER", "STATE"], table
    starts = [line.index(table[0].split()[2]) for line in table[:1]]
    for line in table[1:]:  # every row's adapter column starts where the header's does
        assert line[starts[0]:].startswith("clawgate.channels."), table
    assert {line.split()[0] for line in table[1:]} >= {"telegram", "discord", "slack", "matrix", "email"}
