"""The example third-party channel's harness: tests/plugins/echochat installed with pip (its own distribution,
its `clawgate.channels` entry point) into a folder on the daemon's PYTHONPATH, against tests/fakes/echochat.py.

A platform without buttons, edits or typing, and with a 500-character limit: the suite checks the kit's
fallbacks (approvals by `/approve ID`, many chunks) on it."""

from __future__ import annotations

import fcntl
import hashlib
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pyromark

from clawgate.channels.kit.markdown import to_plain
from tests.conformance.harness import PlatformHarness, Shown
from tests.conformance.platforms.discord import _code
from tests.fakes.echochat import BOT, MAX_CHARS, EchoChatServer

PLUGIN = Path(__file__).resolve().parents[2] / "plugins" / "echochat"
# Where the plugin is installed, once per version of its files for every worker and run: build/ of this
# tree (ignored by git, removed by `make clean`). A pip install of a local project builds it in an isolated
# environment with setuptools fetched from the index: tens of seconds on a busy machine, once per worker
# before it was shared. Not under /tmp: another user could put code there that the daemons would import.
INSTALLS = PLUGIN.parents[2] / "build" / "echochat-plugin"
GROUP = "room-1"
ANSWERS = ("Only the owner", "Approved.", "Denied.", "This request is no longer pending", "Say which request")
_installed: list[str] = []


def _plugin_digest() -> str:
    """The plugin's source files (not what building it leaves beside them), hashed: a change installs again."""
    digest = hashlib.sha256()
    for path in sorted(PLUGIN.rglob("*")):
        parts = path.relative_to(PLUGIN).parts
        if path.is_file() and not any(p in ("build", "__pycache__") or p.endswith(".egg-info") for p in parts):
            digest.update("/".join(parts).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def install_plugin() -> str:
    """`pip install --no-deps --target DIR tests/plugins/echochat` unless DIR holds this version already;
    returns DIR. A lock makes the other workers wait for the one installing instead of installing too."""
    if not _installed:
        target = INSTALLS / _plugin_digest()
        INSTALLS.mkdir(parents=True, exist_ok=True)
        with open(INSTALLS / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not target.is_dir():  # renamed into place only once complete: an interrupted install is not used
                staging = Path(tempfile.mkdtemp(prefix=".installing-", dir=INSTALLS))
                subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-compile",
                                "--disable-pip-version-check", "--target", str(staging), str(PLUGIN)],
                               check=True, capture_output=True, text=True, timeout=300)
                staging.rename(target)
        _installed.append(str(target))
    return _installed[0]


class EchoChatHarness(PlatformHarness):
    name = "echochat"
    max_chars = MAX_CHARS
    buttons = False
    owner, friend, stranger = "u-owner", "u-friend", "u-stranger"
    ack_window = 2.0  # the adapter long-polls for 1 s
    not_applicable = {"test_a_status_line_quotes_arguments_readably_escaped_and_short": "EchoChat cannot edit a message: no status line, only the answer"}

    def __init__(self) -> None:
        self.fake = EchoChatServer()
        self._token = self.fake.token
        self._target = install_plugin()

    def start(self) -> None:
        self.fake.start()

    def close(self) -> None:
        self.fake.stop()

    def python_path(self) -> list[str]:
        return [self._target]

    def env(self, **access: Any) -> dict[str, str]:
        values = {"base_url": self.fake.base_url, "token": self._token, "pairing_check_seconds": 0.2, **access}
        return {f"CLAWGATE_CHANNELS__ECHOCHAT__{k.upper()}": v if isinstance(v, str) else json.dumps(v)
                for k, v in values.items()}

    def send_dm(self, user: str, text: str) -> int:
        return self.fake.inject(chat=self.dm_chat(user), user=user, text=text)

    def send_group(self, user: str, text: str, *, mention: bool) -> int:
        said = f"@{BOT} {text}" if mention else text
        return self.fake.inject(chat=GROUP, user=user, text=said, chat_type="group", mentions_bot=mention)

    def redeliver(self, event: int) -> None:
        self.fake.redeliver(event)

    def acknowledged(self, event: int) -> bool:
        return self.fake.acked >= event

    def dm_chat(self, user: str) -> str:
        return f"dm-{user}"

    def group_chat(self) -> str:
        return GROUP

    def _texts(self, chat: str) -> list[str]:
        return [m["text"] for m in list(self.fake.sent) if m["chat"] == chat]

    def replies(self, chat: str) -> list[str]:
        return [to_plain(t) for t in self._texts(chat) if not t.startswith(("🔐", "✅", "❌", "⌛"))]

    def formats(self, chat: str) -> list[set[str]]:
        kinds = {"Strong": "bold", "Emphasis": "italic", "Code": "code", "CodeBlock": "pre"}
        out = []
        for t in self._texts(chat):
            seen: set[str] = set()
            for event in pyromark.events(t):
                if isinstance(event, dict):
                    key = "Code" if "Code" in event else event.get("Start")
                    key = next(iter(key)) if isinstance(key, dict) else key
                    if key in kinds:
                        seen.add(kinds[key])
            out.append(seen)
        return out

    def prompts(self, chat: str) -> list[str]:
        return [m.group(1) for t in self._texts(chat) if t.startswith("🔐")
                for m in [re.search(r"/approve (\S+?)`", t)] if m]

    def approval_view(self, chat: str) -> list[Shown]:
        return [Shown(to_plain(t), _code(t), "/approve " in t) for t in self._texts(chat) if t.startswith("🔐")]

    def press_approval(self, user: str, approval_id: str, approve: bool) -> None:
        self.send_dm(user, f"/{'approve' if approve else 'deny'} {approval_id}")

    def approval_answers(self, user: str) -> list[str]:
        return [t for t in self._texts(self.dm_chat(user)) if t.startswith(ANSWERS)]

    def send_attempts(self) -> list[float]:
        return list(self.fake.attempts)

    def inject_429(self, seconds: int) -> None:
        self.fake.fail_next_send(429, retry_after=seconds)

    def inject_permanent_error(self) -> None:
        self.fake.fail_next_send(403, error="blocked by the user")

    def break_token(self) -> None:
        self._token = "not-the-token"

    def stop_server(self) -> None:
        self.fake.stop()


HARNESS = EchoChatHarness
