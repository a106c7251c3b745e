"""`clawgate init`: write config.toml and the workspace templates (the writing is in gateway/home_setup.py)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any


def cmd_init(args: argparse.Namespace) -> int:
    from clawgate.config.loader import load
    from clawgate.config.paths import Paths

    from ..home_setup import write_config, write_workspace

    paths = Paths.from_env()
    interactive = sys.stdin.isatty() and not args.yes
    config_file, created = write_config(paths)
    print(f"{'wrote' if created else 'kept existing'} {config_file}")
    _, settings = load()  # ConfigError: one line from main, exit 2
    workspace = os.path.expanduser(settings.agent.workspace) if settings.agent.workspace else str(paths.default_workspace)
    made = write_workspace(Path(workspace))
    print(f"workspace {workspace}: {len(made)} template file(s) added, existing files kept")
    paths.ensure()
    if interactive:
        print("Next: export ANTHROPIC_API_KEY=… (and TELEGRAM_BOT_TOKEN=… for Telegram), then `clawgate gateway`.")
    return 0


def add_commands(sub: Any) -> None:
    p = sub.add_parser("init", help="write config.toml (with a gateway token) and the workspace templates")
    p.add_argument("--yes", "-y", action="store_true", help="ask nothing")
    p.set_defaults(fn=cmd_init)
