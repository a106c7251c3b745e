"""The Feishu channel's conformance harness: the fake Open Platform (tests/fakes/feishu), the bot's long
connection driven by the real lark-oapi SDK, people writing through it.

Answers are rich text whose `md` element Feishu renders as Markdown; a person reads it rendered (here with
markdown-it, as for Mattermost). Approvals are interactive cards: a press is Feishu's `card.action.trigger`
callback over the long connection; someone who cannot see the prompt (a guest asked about the owner's)
writes `/approve ID` in their own chat with the bot. An event is acknowledged when the daemon answered
its frame with 200 (the fake redelivers anything else).
"""

from __future__ import annotations

import html
import json
import re
from typing import Any

from markdown_it import MarkdownIt

from tests.conformance.harness import PlatformHarness, Shown
from tests.fakes.feishu import APP_ID, APP_SECRET, FakeFeishu, Message, User
from tests.waiting import wait_until

STATUS = ("⚙️", "⏳")
MAX_CHARS = 4000
_MD = MarkdownIt("commonmark", {"html": False})


def markdown_of(message: Message, content: str | None = None) -> str:
    """The Markdown a message carries: a post's `md` elements, a card's markdown elements."""
    data = json.loads(content if content is not None else message.content)
    if message.msg_type == "interactive":
        return "\n".join(el.get("content", "") for el in data.get("elements") or [] if el.get("tag") == "markdown")
    if message.msg_type == "post":
        body = data.get("zh_cn") or {}
        return "\n".join(el.get("text", "") for para in body.get("content") or [] for el in para)
    return str(data.get("text") or "")


def plain(markdown: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", _MD.render(markdown))).strip()


def formats(markdown: str) -> set[str]:
    kinds: set[str] = set()
    for token in _MD.parse(markdown):
        if token.type in ("fence", "code_block"):
            kinds.add("pre")
        for child in token.children or []:
            kinds |= {"strong_open": {"bold"}, "em_open": {"italic"}, "code_inline": {"code"}}.get(child.type, set())
    return kinds


def code_blocks(markdown: str) -> str:
    return "".join(html.unescape(t.content).removesuffix("\n") for t in _MD.parse(markdown)
                   if t.type in ("fence", "code_block"))


def _buttons(message: Message) -> list[dict[str, Any]]:
    if message.msg_type != "interactive":
        return []
    card = json.loads(message.content)
    return [b for el in card.get("elements") or [] if el.get("tag") == "action" for b in el.get("actions") or []]


class FeishuHarness(PlatformHarness):
    name = "feishu"
    max_chars = MAX_CHARS
    buttons = True

    def __init__(self) -> None:
        self.fake = FakeFeishu()
        self.people: dict[str, User] = {}
        self.chats: dict[str, str] = {}
        self.group = ""
        self._secret = APP_SECRET
        self._told: dict[str, list[Any]] = {}

    def start(self) -> None:
        self.fake.start()
        for role in ("owner", "friend", "stranger"):
            user = self.fake.add_user(role)
            self.people[user.open_id] = user
            self.chats[user.open_id] = self.fake.p2p_chat(user)
        self.owner, self.friend, self.stranger = list(self.people)
        self.group = self.fake.add_group("team")

    def close(self) -> None:
        self.fake.stop()

    def env(self, **access: Any) -> dict[str, str]:
        values = {"enabled": True, "domain": self.fake.url, "app_id": APP_ID, "app_secret": self._secret, **access}
        return {f"CLAWGATE_CHANNELS__FEISHU__{key.upper()}": value if isinstance(value, str) else json.dumps(value)
                for key, value in values.items()}

    def attach(self, daemon: Any) -> None:
        """With good credentials, wait for the long connection (events wait for it anyway, as on Feishu)."""
        if self._secret == APP_SECRET:
            wait_until(self.fake.connected, "the daemon's Feishu long connection", describe=daemon.log_text)

    # users writing ----------------------------------------------------------------------------------------
    def send_dm(self, user: str, text: str) -> dict[str, Any]:
        return self.fake.write(self.people[user], self.chats[user], text)

    def send_group(self, user: str, text: str, *, mention: bool) -> dict[str, Any]:
        return self.fake.write(self.people[user], self.group, text, mention=mention)

    def redeliver(self, event: dict[str, Any]) -> None:
        self.fake.redeliver(event)

    def acknowledged(self, event: dict[str, Any]) -> bool:
        return self.fake.acknowledged(event)

    # what the bot sent ------------------------------------------------------------------------------------
    def dm_chat(self, user: str) -> str:
        return self.chats[user]

    def group_chat(self) -> str:
        return self.group

    def _said(self, chat: str) -> list[Message]:
        return [m for m in self.fake.sent_to(chat) if m.msg_type != "interactive"
                and not plain(markdown_of(m)).startswith(STATUS)]

    def replies(self, chat: str) -> list[str]:
        return [plain(markdown_of(m)) for m in self._said(chat)]

    def formats(self, chat: str) -> list[set[str]]:
        return [formats(markdown_of(m)) for m in self._said(chat)]

    def _prompts(self, chat: str | None = None) -> list[tuple[Message, dict[str, Any]]]:
        return [(m, b) for m in self.fake.sent_to(chat) for b in _buttons(m)]

    def prompts(self, chat: str) -> list[str]:
        return list(dict.fromkeys(b["value"]["clawgate_approval"] for _, b in self._prompts(chat)))

    def press_approval(self, user: str, approval_id: str, approve: bool) -> None:
        """The card's button when the prompt is in `user`'s chat or the group; else `/approve ID`."""
        for message, button in self._prompts():
            if button["value"]["clawgate_approval"] != approval_id or bool(button["value"]["approve"]) != approve:
                continue
            if message.chat_id in (self.chats[user], self.group):
                answer = self.fake.press(self.people[user], message, approve)
                assert answer.get("code") == 200, answer
                self._told.setdefault(user, []).append(str(((answer.get("data") or {}).get("toast") or {})
                                                           .get("content") or ""))
            else:
                chat = self.chats[user]
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
            out += [plain(markdown_of(m)) for m in self.fake.sent_to(chat)[before:]
                    if not plain(markdown_of(m)).startswith(STATUS)][:1]
        return out

    def approval_view(self, chat: str) -> list[Shown]:
        shown = []
        for m in self.fake.sent_to(chat):
            markdown = markdown_of(m)
            if plain(markdown).startswith("🔐"):
                shown.append(Shown(plain(markdown), code_blocks(markdown), bool(_buttons(m))))
        return shown

    def status_lines(self, chat: str) -> list[str]:
        out = []
        for m in self.fake.all_sent_to(chat):
            first = plain(markdown_of(m, m.edits[0] if m.edits else None))
            if first.startswith(STATUS):
                out.append(first)
        return out

    # failures ---------------------------------------------------------------------------------------------
    def send_attempts(self) -> list[float]:
        calls = [c for c in self.fake.calls_to("POST", "/im/v1/messages") if isinstance(c.body, dict)]
        return [c.at for c in calls if c.body.get("msg_type") == "post"
                and not plain(markdown_of(Message("", "", "", "post", str(c.body.get("content"))))).startswith(STATUS)]

    def inject_429(self, seconds: int) -> None:
        self.fake.rate_limit(seconds)

    def inject_permanent_error(self) -> None:
        self.fake.fail_next_send()

    def break_token(self) -> None:
        self._secret = "wrong" + "x" * 27

    def stop_server(self) -> None:
        self.fake.stop()


HARNESS = FeishuHarness
