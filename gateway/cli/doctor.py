"""`clawgate doctor [--json] [--offline]`: what is wrong with this setup, one line per check with its fix.

Works without a running daemon. Exit 0 when nothing failed (warnings allowed), 1 when a check
failed, so scripts and service managers can gate on it.
"""

from __future__ import annotations

import argparse
import json
import logging
from typing import Any

from .output import JSON_HELP


def cmd_doctor(args: argparse.Namespace) -> int:
    from clawgate.config.paths import Paths

    # The channels' client libraries log what they meet (matrix-nio: "Error validating response"); doctor's
    # output is its own lines, each with its fix, so their records go nowhere (not to stderr by default).
    logging.getLogger().addHandler(logging.NullHandler())

    from ..doctor import exit_code, line, run_checks

    checks = run_checks(Paths.from_env(), offline=args.offline)
    if args.json:
        print(json.dumps({"ok": exit_code(checks) == 0, "checks": [c.to_dict() for c in checks]}, indent=2))
    else:
        for check in checks:
            print(line(check))
    return exit_code(checks)


def add_commands(sub: Any) -> None:
    p = sub.add_parser("doctor", help="check the setup: config, model key, port, workspace, sandbox, state, disk, and a real log-in to each chat channel")
    p.add_argument("--json", action="store_true", help=JSON_HELP)
    p.add_argument("--offline", action="store_true", help="skip the checks that call the model API and log in to the chat channels")
    p.set_defaults(fn=cmd_doctor)
