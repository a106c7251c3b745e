"""The Mattermost channel's conformance harness: the fake Mattermost server (tests/fakes/mattermost), the
bot's WebSocket and REST v4, people posting through it.

The server here is one whose database keeps the pre-5.0 post column (MaxPostSize 4,000 runes, which the
adapter reads from the client config), so long answers and prompts split as on any chat platform.
Approvals are interactive buttons posted to the daemon's listener; someone who cannot see the prompt
(a guest asking about the owner's) writes `/approve ID` in their own DM. Mattermost pushes each event
once with nothing to acknowledge, so "acknowledged" is the adapter's cursor (the newest post it handed
to the kit) in the daemon's state, from which it reads back what was posted while it was away.
"""

from __future__ import annotations

import html
import json
import re
import sqlite3
from typing import Any

from markdown_it import MarkdownIt

from tests.conformance.harness import PlatformHarness, Shown
from tests.fakes.mattermost import BOT_TOKEN, FakeMattermost, Post, User
from tests.harness import free_port
from tests.waiting import wait_until

STATUS = ("⚙️", "⏳")
MAX_POST = 4000
_MD = MarkdownIt("commonmark", {"html": False})  # Mattermost shows raw HTML as text


def plain(markdown: str) -> str:
    """What a person reads in a Mattermost post: the Markdown rendered, markup gone."""
    rendered = _MD.render(markdown)
    return html.unescape(re.sub(r"<[^>]+>", "", rendered)).strip()


def formats(markdown: str) -> set[str]:
    kinds: set[str] = set()
    for token in _MD.parse(markdown):
        if token.type in ("fence", "code_block"):
            kinds.add("pre")
        for child in token.children or []:
            kinds |= {"strong_open": {"bold"}, "em_open": {"italic"}, "code_inline": {"code"}}.get(child.type, set())
    return kinds


def code_blocks(markdown: str) -> str:
    return "".join(t.content.removesuffix("\n") for t in _MD.parse(markdown) if t.type in ("fence", "code_block"))


def _actions(post: Post) -> list[dict[str, Any]]:
    return [a for att in post.props.get("attachments") or [] for a in att.get("actions") or []]


class MattermostHarness(PlatformHarness):
    name = "mattermost"
    max_chars = MAX_POST
    buttons = True
    ack_window = 1.0  # each post is handed to the kit as it arrives

    def __init__(self) -> None:
        self.fake = FakeMattermost(max_post_size=MAX_POST)
        self.people: dict[str, User] = {}
        self.dms: dict[str, str] = {}
        self.town = ""
        self._token = BOT_TOKEN
        self._thread = ""  # the last mention in the channel: the conversation there
        self._told: dict[str, list[Any]] = {}  # user -> a press's answer, or (chat, posts before) for a command
        self._db: sqlite3.Connection | None = None
        self.listen = f"127.0.0.1:{free_port()}"

    def start(self) -> None:
        self.fake.start()
        for role in ("owner", "friend", "stranger"):
            user = self.fake.add_user(role)
            self.people[user.id] = user
            self.dms[user.id] = self.fake.dm_channel(user)
        self.owner, self.friend, self.stranger = list(self.people)
        self.town = self.fake.add_channel("town-square")

    def close(self) -> None:
        self.fake.stop()
        if self._db is not None:
            self._db.close()

    def env(self, **access: Any) -> dict[str, str]:
        values = {"enabled": True, "base_url": self.fake.url, "token": self._token, "heartbeat_seconds": 2,
                  "actions_listen": self.listen, **access}
        return {f"CLAWGATE_CHANNELS__MATTERMOST__{key.upper()}": value if isinstance(value, str) else json.dumps(value)
                for key, value in values.items()}

    def attach(self, daemon: Any) -> None:
        """With a good token, wait for the daemon's WebSocket (a post made while nobody listens is one the
        bot never hears of)."""
        if self._token == BOT_TOKEN:
            wait_until(self.fake.connected, "the daemon's Mattermost WebSocket", describe=daemon.log_text)
        if self._db is None:
            uri = f"file:{daemon.home / 'state/clawgate.db'}?mode=ro"
            self._db = sqlite3.connect(uri, uri=True, timeout=1, isolation_level=None, check_same_thread=False)

    # users writing ----------------------------------------------------------------------------------------
    def send_dm(self, user: str, text: str) -> dict[str, Any]:
        return self.fake.write(self.people[user], self.dms[user], text)

    def send_group(self, user: str, text: str, *, mention: bool) -> dict[str, Any]:
        event = self.fake.write(self.people[user], self.town, text, mention=mention)
        if mention:
            self._thread = json.loads(event["data"]["post"])["id"]
        return event

    def send_command(self, user: str, command: str, *, group: bool = False) -> dict[str, Any]:
        """In the channel, a mention in the thread of the last one (the conversation there is the thread)."""
        if group:
            return self.fake.write(self.people[user], self.town, command, mention=True, root_id=self._thread)
        return self.send_dm(user, command)

    def redeliver(self, event: dict[str, Any]) -> None:
        self.fake.redeliver(event)

    def acknowledged(self, event: dict[str, Any]) -> bool:
        if self._db is None:
            return False
        try:
            row = self._db.execute("SELECT value FROM channel_state WHERE channel='mattermost' AND key='cursor'"
                                   ).fetchone()
        except sqlite3.OperationalError:  # the state database is being created
            return False
        return bool(row) and int(row[0]) >= int(json.loads(event["data"]["post"])["create_at"])

    # what the bot sent ------------------------------------------------------------------------------------
    def dm_chat(self, user: str) -> str:
        return self.dms[user]

    def group_chat(self) -> str:
        return self.town

    def _said(self, chat: str) -> list[Post]:
        return [p for p in self.fake.sent_to(chat) if not p.message.startswith(("🔐", *STATUS))]

    def replies(self, chat: str) -> list[str]:
        return [plain(p.message) for p in self._said(chat)]

    def formats(self, chat: str) -> list[set[str]]:
        return [formats(p.message) for p in self._said(chat)]

    def _prompts(self, chat: str | None = None) -> list[tuple[Post, dict[str, Any]]]:
        return [(p, a) for p in self.fake.sent_to(chat) for a in _actions(p)]

    def prompts(self, chat: str) -> list[str]:
        return list(dict.fromkeys(a["integration"]["context"]["approval_id"] for _, a in self._prompts(chat)))

    def press_approval(self, user: str, approval_id: str, approve: bool) -> None:
        """The button when the prompt is in `user`'s DM or the channel; else `/approve ID` in their DM."""
        wanted = "clawgateapprove" if approve else "clawgatedeny"
        for post, action in self._prompts():
            if action["integration"]["context"]["approval_id"] != approval_id or action["id"] != wanted:
                continue
            if post.channel_id in (self.dms[user], self.town):
                answer = self.fake.press(self.people[user], post, wanted)
                assert answer["status"] == 200, answer
                self._told.setdefault(user, []).append(str(answer.get("ephemeral_text") or ""))
            else:
                chat = self.dms[user]
                self._told.setdefault(user, []).append((chat, len(self.fake.sent_to(chat))))
                self.fake.write(self.people[user], chat, f"/{'approve' if approve else 'deny'} {approval_id}")
            return
        raise AssertionError(f"no approval prompt {approval_id} was sent")

    def approval_answers(self, user: str) -> list[str]:
        out: list[str] = []
        for told in self._told.get(user, []):
            if isinstance(told, str):
                out.append(told)
                continue
            chat, before = told
            out += [plain(p.message) for p in self.fake.sent_to(chat)[before:] if not p.message.startswith(STATUS)][:1]
        return out

    def approval_view(self, chat: str) -> list[Shown]:
        return [Shown(plain(p.message), code_blocks(p.message), bool(_actions(p)))
                for p in self.fake.sent_to(chat) if p.message.startswith("🔐")]

    def status_lines(self, chat: str) -> list[str]:
        return [plain(p.edits[0] if p.edits else p.message) for p in self.fake.all_sent_to(chat)
                if (p.edits[0] if p.edits else p.message).startswith(STATUS)]

    # failures ---------------------------------------------------------------------------------------------
    def send_attempts(self) -> list[float]:
        return [c.at for c in self.fake.calls_to("POST", "/posts") if isinstance(c.body, dict)
                and not str(c.body.get("message", "")).startswith(STATUS)
                and not (c.body.get("props") or {}).get("attachments")]

    def inject_429(self, seconds: int) -> None:
        self.fake.rate_limit(seconds)

    def inject_permanent_error(self) -> None:
        self.fake.fail_next_post()

    def break_token(self) -> None:
        self._token = "revoked" + "x" * 19

    def stop_server(self) -> None:
        self.fake.stop()


HARNESS = MattermostHarness
