"""`clawgate gateway` is parsed by its own command's parser; anything it refuses gets the whole parser's error."""

from __future__ import annotations

import subprocess
import sys

from clawgate.gateway.cli import parse
from clawgate.gateway.cli.serve import cmd_gateway

PROBE = ("import sys; from clawgate.gateway.cli import parse; args = parse(sys.argv[1:]); "
         "print(args.command, getattr(args, 'port', '-'), 'clawgate.gateway.cli.chat' in sys.modules)")


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=120)


def test_a_daemon_start_imports_no_other_command() -> None:
    done = run("gateway", "--port", "18999")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["gateway", "18999", "False"]
    args = parse(["gateway", "--port", "18999"])
    assert (args.fn, args.port, args.action) == (cmd_gateway, 18999, None)


def test_a_bad_daemon_argument_gets_the_whole_parsers_usage_and_exit_code() -> None:
    done = run("gateway", "--bogus")
    assert done.returncode == 2
    assert "unrecognized arguments: --bogus" in done.stderr
    assert "{init,gateway,chat," in done.stderr  # the usage lists every command, as without the shortcut
    done = run("gateway", "--port", "x")
    assert done.returncode == 2 and "usage: clawgate gateway" in done.stderr and "invalid int value: 'x'" in done.stderr


def test_other_commands_use_the_whole_parser() -> None:
    done = run("status", "--json")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[0] == "status" and done.stdout.split()[-1] == "True"
