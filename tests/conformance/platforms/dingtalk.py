"""The DingTalk channel's conformance harness: the fake DingTalk (tests/fakes/dingtalk) — its Stream gateway,
OpenAPI and session webhooks — with the official SDK in the daemon, people writing to the robot through it.

DingTalk ACKs each envelope: "acknowledged" is the fake having the daemon's ACK for that messageId, and an
unacknowledged one is delivered again on the next connection. Approvals are interactive cards whose buttons
call back over the Stream connection; someone who cannot see the card (a guest asking about the owner's)
writes `/approve ID` in their own 1:1 chat with the robot. A group message that does not @mention the robot is sent
with `isInAtList` false (DingTalk itself does not deliver those; the adapter must not answer one either way).
"""

from __future__ import annotations

import html
import json
import re
from typing import Any

from markdown_it import MarkdownIt

from tests.conformance.harness import PlatformHarness, Shown
from tests.fakes.dingtalk import CLIENT_ID, CLIENT_SECRET, FakeDingTalk, Person, Sent
from tests.waiting import wait_until

STATUS = ("⚙️", "⏳")
_MD = MarkdownIt("commonmark", {"html": False})


def plain(markdown: str) -> str:
    """What a person reads in a DingTalk Markdown message: rendered, markup gone."""
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
    return "".join(t.content.removesuffix("\n") for t in _MD.parse(markdown) if t.type in ("fence", "code_block"))


class DingTalkHarness(PlatformHarness):
    name = "dingtalk"
    max_chars = 4000
    buttons = True
    ack_window = 1.0
    not_applicable = {
        "test_a_status_line_quotes_arguments_readably_escaped_and_short": "a DingTalk robot cannot edit its "
                                                                          "messages: no status line, only the answer",
        "test_a_rate_limit_is_waited_out_as_asked": "DingTalk's throttling answer (errcode 130101, send too fast) "
                                                    "names no time to wait: it is retried with backoff",
    }

    def __init__(self) -> None:
        self.fake = FakeDingTalk()
        self.people: dict[str, Person] = {}
        self.town = ""
        self._secret = CLIENT_SECRET
        self._told: dict[str, list[Any]] = {}  # user -> a press's answer, or (chat, messages before) for a command

    def start(self) -> None:
        self.fake.start()
        for role in ("owner", "friend", "stranger"):
            person = self.fake.add_person(role)
            self.people[person.staff_id] = person
        self.owner, self.friend, self.stranger = list(self.people)
        self.town = self.fake.add_group("Team room")

    def close(self) -> None:
        self.fake.stop()

    def env(self, **access: Any) -> dict[str, str]:
        values = {"enabled": True, "base_url": self.fake.url, "client_id": CLIENT_ID, "client_secret": self._secret,
                  **access}
        return {f"CLAWGATE_CHANNELS__DINGTALK__{key.upper()}": value if isinstance(value, str) else json.dumps(value)
                for key, value in values.items()}

    def attach(self, daemon: Any) -> None:
        """With good credentials, wait for the daemon's Stream connection (DingTalk holds nothing for a robot
        that never connected)."""
        if self._secret == CLIENT_SECRET:
            wait_until(self.fake.connected, "the daemon's DingTalk Stream connection", describe=daemon.log_text)

    # users writing ----------------------------------------------------------------------------------------
    def send_dm(self, user: str, text: str) -> dict[str, Any]:
        return self.fake.write(self.people[user], text)

    def send_group(self, user: str, text: str, *, mention: bool) -> dict[str, Any]:
        return self.fake.write(self.people[user], text, group=self.town, mention=mention)

    def redeliver(self, event: dict[str, Any]) -> None:
        self.fake.redeliver(event)

    def acknowledged(self, event: dict[str, Any]) -> bool:
        return self.fake.acknowledged(event)

    # what the bot sent ------------------------------------------------------------------------------------
    def dm_chat(self, user: str) -> str:
        return user

    def group_chat(self) -> str:
        return self.town

    def _said(self, chat: str) -> list[Sent]:
        return [s for s in self.fake.sent_to(chat) if s.via != "card" and not s.text.startswith(("🔐", *STATUS))]

    def replies(self, chat: str) -> list[str]:
        return [plain(s.text) for s in self._said(chat)]

    def formats(self, chat: str) -> list[set[str]]:
        return [formats(s.text) for s in self._said(chat)]

    def prompts(self, chat: str) -> list[str]:
        return list(dict.fromkeys(str(card.params.get("approvalId")) for card in self.fake.cards(chat)))

    def press_approval(self, user: str, approval_id: str, approve: bool) -> None:
        """The card's button when the card is in `user`'s 1:1 chat or the group; else `/approve ID` in theirs."""
        for card in self.fake.cards():
            if card.params.get("approvalId") != approval_id:
                continue
            if card.chat in (user, self.town):
                answer = self.fake.press(self.people[user], card, "clawgate_approve" if approve else "clawgate_deny")
                tips = ((answer.get("userPrivateData") or {}).get("cardParamMap") or {}).get("tips")
                self._told.setdefault(user, []).append(str(tips or ""))
            else:
                self._told.setdefault(user, []).append((user, len(self.fake.sent_to(user))))
                self.send_dm(user, f"/{'approve' if approve else 'deny'} {approval_id}")
            return
        raise AssertionError(f"no approval card {approval_id} was sent")

    def approval_answers(self, user: str) -> list[str]:
        out: list[str] = []
        for told in self._told.get(user, []):
            if isinstance(told, str):
                out.append(told)
                continue
            chat, before = told
            out += [plain(s.text) for s in self.fake.sent_to(chat)[before:] if not s.text.startswith(STATUS)][:1]
        return out

    def approval_view(self, chat: str) -> list[Shown]:
        return [Shown(plain(s.text), code_blocks(s.text), s.via == "card" and bool(s.buttons))
                for s in self.fake.sent_to(chat) if s.text.startswith("🔐")]

    # failures ---------------------------------------------------------------------------------------------
    def send_attempts(self) -> list[float]:
        return self.fake.send_attempts()

    def inject_429(self, seconds: int) -> None:
        raise AssertionError("DingTalk names no retry-after (not_applicable)")

    def inject_permanent_error(self) -> None:
        self.fake.refuse_next_send()

    def break_token(self) -> None:
        self._secret = "not-the-secret-" + "y" * 30

    def stop_server(self) -> None:
        self.fake.stop()


HARNESS = DingTalkHarness
