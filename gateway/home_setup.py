"""`clawgate init`: a commented config with a fresh token, and the workspace templates.

It never overwrites a file that exists, so running it again is safe and a user's edits stay.
"""

from __future__ import annotations

import os
import secrets
import shutil
from importlib import resources
from pathlib import Path

from clawgate.config.paths import Paths

CONFIG_TEMPLATE = """\
# clawgate configuration. Every key can also be set from the environment:
# CLAWGATE_<SECTION>__<KEY>, e.g. CLAWGATE_GATEWAY__PORT=18790, lists as JSON.
# Secrets are best kept in the environment: ANTHROPIC_API_KEY, TELEGRAM_BOT_TOKEN.

[gateway]
host = "127.0.0.1"        # a non-loopback address requires the token below
port = 18789
token = "{token}"          # clients send it in their connect request; if removed, the daemon
                          # generates one in $CLAWGATE_HOME/state/gateway.token (local CLIs read it)
# allowed_origins = []    # browser pages allowed to connect, e.g. ["http://localhost:3000"];
                          # by default any request with an Origin header (a web page) is refused

[agent]
name = "Claw"
model = "claude-sonnet-4-5"
max_concurrent = 8        # sessions answered at the same time
max_iterations = 40       # model calls per message before the run stops and says so
# workspace = "~/clawgate-workspace"   # default: $CLAWGATE_HOME/workspace

[providers.anthropic]
# api_key = ""            # prefer ANTHROPIC_API_KEY
# base_url = ""           # prefer ANTHROPIC_BASE_URL
max_retries = 4
fallback_models = []      # tried in order when the main model is overloaded

[providers.breaker]
failure_threshold = 3     # calls in a row that failed after all retries before a provider is paused
cooldown_seconds = 60     # a paused provider is skipped this long, then one trial call decides

[tools]
approval_mode = "ask"     # ask | deny | allow: risky tool calls
approval_timeout_seconds = 300

[tools.exec]
timeout_seconds = 30
# Programs that run without asking, when every path argument stays inside the workspace
# (a path as argv[0], like ./x, always asks). The default is read-only tools; adding an
# interpreter (python3) or git lets the agent run anything through it without asking:
# allowlist = ["ls", "cat", "head", "tail", "wc", "grep", "pwd", "date", "echo",
#              "diff", "sort", "uniq", "stat", "du", "true", "file", "which"]

# Chat channels (docs/channels.md): one [channels.<name>] section per channel; `clawgate channels` lists them.
# [channels]
# owner_shared_session = false   # true: your private chats on every channel share one conversation

[channels.telegram]
# enabled = true          # default: on when a token is set
# token = ""              # prefer TELEGRAM_BOT_TOKEN
dm_policy = "pairing"     # pairing | allowlist | open | disabled
# group_policy = "allowlist"  # groups read only messages addressing the bot; mention | allowlist | open | disabled
owner = []                # your Telegram user id: you alone approve risky tool calls from Telegram
allow_from = []           # guests: Telegram user ids or usernames

[state]
fsync = true              # fsync durable writes (power-loss safe)
keep_days = 30            # how long answered messages are remembered for duplicate detection

# MCP tool servers (docs/mcp.md): their tools appear as mcp_<name>_<tool>. Every call of a tool
# not listed in read_only_tools waits for your approval; guests cannot use them unless guests = true.
# [mcp.servers.notes]
# command = "npx"
# args = ["-y", "@modelcontextprotocol/server-filesystem", "/home/me/notes"]
# read_only_tools = ["read_file", "list_directory"]
"""


def template_dir() -> Path:
    return Path(str(resources.files("clawgate.workspace") / "templates"))


def write_config(paths: Paths) -> tuple[Path, bool]:
    paths.home.mkdir(parents=True, exist_ok=True)
    os.chmod(paths.home, 0o700)
    if paths.config_file.exists():
        return paths.config_file, False
    paths.config_file.write_text(CONFIG_TEMPLATE.format(token=secrets.token_urlsafe(24)), encoding="utf-8")
    os.chmod(paths.config_file, 0o600)
    return paths.config_file, True


def write_workspace(workspace: Path) -> list[Path]:
    """Copy templates that are missing; return what was created."""
    created: list[Path] = []
    if not workspace.exists():
        workspace.mkdir(parents=True, mode=0o700)  # the owner's files: user-only when we create it
    source = template_dir()
    for item in sorted(source.rglob("*")):
        if item.is_dir():
            continue
        target = workspace / item.relative_to(source)
        if target.exists():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(item, target)
        created.append(target)
    (workspace / "memory").mkdir(parents=True, exist_ok=True)
    return created
