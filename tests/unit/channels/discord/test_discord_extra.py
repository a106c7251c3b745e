"""Without the `discord` extra, configuring the channel says how to install it, in one line."""

from __future__ import annotations

import subprocess
import sys

from tests.harness import ROOT


def test_missing_discord_py_names_the_extra() -> None:
    script = ("import sys; sys.modules['discord'] = None\n"  # as if discord.py were not installed
              "from clawgate.channels.kit.registry import ChannelConfigError, load\n"
              "try:\n    load('discord')\nexcept ChannelConfigError as exc:\n    print(exc)\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 0, result.stderr
    line = result.stdout.strip()
    assert "pip install 'clawgate[discord]'" in line and "\n" not in line
