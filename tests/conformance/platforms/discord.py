"""The Discord channel's conformance harness: the fake Discord (tests/fakes/discord) and real discord.py.

Discord has no acknowledgement a bot sends: the adapter's equivalent is its per-channel cursor (the
last message handled durably; a restart reads back from it), which this harness reads from the
daemon's state database.
"""

from __future__ import annotations

import json
import re
import sqlite3
from typing import Any

import pyromark

from clawgate.channels.kit.markdown import to_plain
from tests.conformance.harness import PlatformHarness, Shown
from tests.fakes.discord import payloads as P
from tests.fakes.discord_api import FakeDiscord
from tests.harness import DaemonProcess
from tests.waiting import wait_until

APPROVE = "clawgate:approve:"
TRANSIENT = ("⚙️", "⏳", "🔐")  # status lines, and approval prompts (their own list: prompts())
FORMATS = {"Strong": "bold", "Emphasis": "italic", "Code": "code", "CodeBlock": "pre"}
MESSAGES = re.compile(r"/channels/\d+/messages")


class DiscordHarness(PlatformHarness):
    name = "discord"
    max_chars = 2000
    buttons = True
    ack_window = 2.0

    def __init__(self) -> None:
        self.fake = FakeDiscord()
        stranger = P.user(P.snowflake(), "carol")
        self.fake.users[stranger["id"]] = stranger
        self.owner, self.friend = self.fake.owner_user["id"], self.fake.other_user["id"]
        self.stranger = stranger["id"]
        self._token = self.fake.token
        self._presses: dict[str, list[str]] = {}  # user -> interaction ids of their presses
        self._db: sqlite3.Connection | None = None

    def start(self) -> None:
        self.fake.start()

    def close(self) -> None:
        self.fake.stop()
        if self._db is not None:
            self._db.close()

    def env(self, **access: Any) -> dict[str, str]:
        # an outage (stop_server) shows as retrying after 2 s instead of the default 10; the fake sends
        # every GUILD_CREATE right after READY, so a 0.5 s wait for more is plenty (discord.py's default: 2 s)
        values = {"base_url": self.fake.base_url, "offline_grace_seconds": 2, "guild_ready_timeout_seconds": 0.5,
                  **access}
        out = {"CLAWGATE_CHANNELS__DISCORD__TOKEN": self._token}
        for key, value in values.items():
            out[f"CLAWGATE_CHANNELS__DISCORD__{key.upper()}"] = value if isinstance(value, str) else json.dumps(value)
        return out

    def attach(self, daemon: DaemonProcess) -> None:
        """Read the cursor from this daemon's state; with a good token, wait for its Gateway session (a
        message written before the bot is online is, on Discord, one it never sees)."""
        if self._token == self.fake.token:
            wait_until(self.fake.connected, "the daemon's Discord Gateway session", describe=daemon.log_text)
        if self._db is None:
            uri = f"file:{daemon.home / 'state/clawgate.db'}?mode=ro"
            self._db = sqlite3.connect(uri, uri=True, timeout=1, isolation_level=None, check_same_thread=False)

    # users writing ----------------------------------------------------------------------------------
    def send_dm(self, user: str, text: str) -> dict[str, Any]:
        return self.fake.inject_dm(text, user_id=user)

    def send_group(self, user: str, text: str, *, mention: bool) -> dict[str, Any]:
        return self.fake.inject_guild_message(text, user_id=user, mention_bot=mention)

    def send_command(self, user: str, command: str, *, group: bool = False) -> dict[str, Any]:
        """The application command's interaction where the command is registered (`/approve` and `/deny`
        are not: approvals are buttons here, and a typed `/approve ID` reaches the bot as a message); typed otherwise.
        The interaction's answer replaces its "thinking…" placeholder: a message in the chat (replies())."""
        name, _, args = command.removeprefix("/").partition(" ")
        wait_until(lambda: {"help", "stop", "new"} <= self._registered(), "the application commands registered")
        if name not in self._registered():
            return self.send_group(user, command, mention=True) if group else self.send_dm(user, command)
        chat = self.group_chat() if group else self.dm_chat(user)
        options = [{"type": 3, "name": "args", "value": args}] if args else None
        return self.fake.run_command(name, channel_id=chat, user_id=user, options=options)

    def _registered(self) -> set[str]:
        with self.fake._cond:
            return {c["name"] for c in self.fake.commands.get(None, [])}

    def redeliver(self, event: dict[str, Any]) -> None:
        self.fake.redeliver(event)

    def acknowledged(self, event: dict[str, Any]) -> bool:
        """The adapter's cursor for the event's channel is at or past it."""
        if self._db is None:
            return False
        try:
            row = self._db.execute("SELECT value FROM channel_state WHERE channel='discord' AND key='kv:cursors'"
                                   ).fetchone()
        except sqlite3.OperationalError:  # the state database is being created
            return False
        cursor = json.loads(row[0]).get(event["channel_id"]) if row else None
        return cursor is not None and int(cursor) >= int(event["id"])

    # what the bot sent --------------------------------------------------------------------------------
    def dm_chat(self, user: str) -> str:
        return str(self.fake.dm_channel_for(user)["id"])

    def group_chat(self) -> str:
        return self.fake.channel_id

    def _said(self, chat: str) -> list[dict[str, Any]]:
        return [m for m in self.fake.sent_messages(chat)
                if not m["content"].startswith(TRANSIENT) and not m["components"] and not m["flags"] & 64]

    def replies(self, chat: str) -> list[str]:
        """What a reader sees: Discord renders the Markdown the bot sends."""
        return [to_plain(m["content"]) for m in self._said(chat)]

    def formats(self, chat: str) -> list[set[str]]:
        """The formatting Discord renders in each message, read with a CommonMark parser."""
        return [{FORMATS[kind] for kind in map(_kind, pyromark.events(m["content"])) if kind in FORMATS}
                for m in self._said(chat)]

    def _buttons(self) -> list[tuple[dict[str, Any], str]]:
        with self.fake._cond:
            messages = [m for ms in self.fake.messages.values() for m in ms]
        return [(m, c["custom_id"]) for m in messages for row in m.get("components") or []
                for c in row.get("components") or [] if str(c.get("custom_id", "")).startswith(APPROVE)]

    def prompts(self, chat: str) -> list[str]:
        return [custom_id[len(APPROVE):] for m, custom_id in self._buttons() if m["channel_id"] == chat]

    def press_approval(self, user: str, approval_id: str, approve: bool) -> None:
        for message, custom_id in self._buttons():
            if custom_id == APPROVE + approval_id:
                pressed = custom_id if approve else f"clawgate:deny:{approval_id}"
                interaction = self.fake.press_button(message["id"], pressed, user_id=user)
                self._presses.setdefault(user, []).append(interaction["id"])
                return
        raise AssertionError(f"no approval prompt {approval_id} was sent")

    def approval_answers(self, user: str) -> list[str]:
        """The ephemeral follow-up each of `user`'s presses got, in press order."""
        out = []
        for interaction_id in self._presses.get(user, []):
            token = self.fake.interaction(interaction_id).payload["token"]
            calls = self.fake.requests("POST", f"/webhooks/{self.fake.application_id}/{token}")
            out += [c.json["content"] for c in calls if c.status == 200][:1]
        return out

    def approval_view(self, chat: str) -> list[Shown]:
        """A prompt's messages start with 🔐; their code blocks read with a CommonMark parser, as Discord does."""
        return [Shown(to_plain(m["content"]), _code(m["content"]), bool(m["components"]))
                for m in self.fake.sent_messages(chat) if m["content"].startswith("🔐")]

    def status_lines(self, chat: str) -> list[str]:
        """Every status line posted (they are deleted when the run ends: read from the requests)."""
        return [to_plain(c.json["content"]) for c in self.fake.requests("POST", f"/channels/{chat}/messages")
                if c.status == 200 and str((c.json or {}).get("content") or "").startswith(("⚙️", "⏳"))]

    # failures -------------------------------------------------------------------------------------------
    def send_attempts(self) -> list[float]:
        return [c.at for c in self.fake.requests("POST") if MESSAGES.fullmatch(c.path)]

    def inject_429(self, seconds: int) -> None:
        self.fake.rate_limit(MESSAGES.pattern, method="POST", retry_after=seconds)

    def inject_permanent_error(self) -> None:
        self.fake.fail(MESSAGES.pattern, method="POST", status=403, code=50007,
                       message="Cannot send messages to this user")

    def break_token(self) -> None:
        self._token = "MTAx.revoked.token-for-the-test"

    def stop_server(self) -> None:
        self.fake.stop()


def _kind(event: Any) -> str | None:
    """The element a parser event opens ("Strong", "CodeBlock", ...), or the inline one it is ("Code")."""
    if not isinstance(event, dict):
        return None
    if "Start" in event:
        start = event["Start"]
        return start if isinstance(start, str) else next(iter(start))
    return next(iter(event))


def _code(markdown: str) -> str:
    """The text of the code blocks in `markdown` (each without the newline before its closing fence)."""
    out: list[str] = []
    inside = False
    for event in pyromark.events(markdown):
        if isinstance(event, dict) and isinstance(event.get("Start"), dict) and "CodeBlock" in event["Start"]:
            inside, out = True, [*out, ""]
        elif isinstance(event, dict) and event.get("End") == "CodeBlock":
            inside, out[-1] = False, out[-1].removesuffix("\n")
        elif inside and isinstance(event, dict) and "Text" in event:
            out[-1] += str(event["Text"])
    return "".join(out)


HARNESS = DiscordHarness
