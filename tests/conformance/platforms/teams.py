"""The Microsoft Teams channel's harness: the fake Microsoft endpoints and Bot Connector (tests/fakes/teams).

An event is one activity, named by its id; the platform's acknowledgement is the daemon's 2xx to a POST
of it (the fake sends again until it gets one). Each POST carries a JWT the fake signs, checked by the
daemon against the fake's OpenID metadata and keys. Users are Entra object ids; the group is a Teams
group chat where the bot answers when mentioned. Approvals are Adaptive Cards in the owner's personal
chat; someone who cannot see the card (a guest) writes `/approve ID` in their own chat with the bot.
Teams edits messages (PUT activity), so the status line is edited in place.
"""

from __future__ import annotations

import json
from typing import Any

from tests.conformance.harness import PlatformHarness, Shown
from tests.fakes.teams import APP_ID, APP_PASSWORD, FakeTeams, Person, Sent, code_of, formats_of, plain_of
from tests.harness import free_port

ANSWERS = ("Only the owner", "Approved.", "Denied.", "This request is no longer pending", "Say which request")
STATUS = ("⚙️", "⏳")


def _approval(sent: Sent) -> str | None:
    for card in sent.cards:
        for action in card.get("actions") or []:
            data = action.get("data") or {}
            if data.get("kind") == "clawgate-approval":
                return str(data["approval_id"])
    return None


class TeamsHarness(PlatformHarness):
    name = "teams"
    max_chars = 4000
    buttons = True
    ack_window = 2.0

    def __init__(self) -> None:
        self.fake = FakeTeams()
        self.persons: dict[str, Person] = {}
        self.group = ""
        self._password = APP_PASSWORD
        self._told: dict[str, list[tuple[str, int]]] = {}  # user -> (chat, messages there before) per answer

    def start(self) -> None:
        self.fake.start()
        for role in ("owner", "friend", "stranger"):
            person = self.fake.add_person(role)
            self.persons[person.aad_object_id] = person
        self.owner, self.friend, self.stranger = list(self.persons)
        self.group = self.fake.add_conversation("groupChat")

    def close(self) -> None:
        self.fake.stop()

    def env(self, **access: Any) -> dict[str, str]:
        port = free_port()
        self.fake.endpoint = f"http://127.0.0.1:{port}/api/messages"
        values = {"app_id": APP_ID, "app_password": self._password, "listen_port": port,
                  "openid_metadata_url": self.fake.openid_url, "token_url": self.fake.token_url,
                  "check_seconds": 1, "pairing_check_seconds": 0.2, **access}
        return {f"CLAWGATE_CHANNELS__TEAMS__{k.upper()}": v if isinstance(v, str) else json.dumps(v)
                for k, v in values.items()}

    # users writing --------------------------------------------------------------------------------------
    def send_dm(self, user: str, text: str) -> str:
        person = self.persons[user]
        return self.fake.say(person, person.personal_chat, text)

    def send_group(self, user: str, text: str, *, mention: bool) -> str:
        return self.fake.say(self.persons[user], self.group, text, mention=mention)

    def redeliver(self, event: str) -> None:
        self.fake.redeliver(event)

    def acknowledged(self, event: str) -> bool:
        return self.fake.acknowledged(event)

    # what the bot sent ------------------------------------------------------------------------------------
    def dm_chat(self, user: str) -> str:
        return self.persons[user].personal_chat

    def group_chat(self) -> str:
        return self.group

    def _said(self, chat: str) -> list[Sent]:
        return [s for s in self.fake.sent_to(chat)
                if not s.cards and not plain_of(s.versions[0]).startswith(("🔐", *STATUS))]

    def replies(self, chat: str) -> list[str]:
        return [p for p in (plain_of(s.text) for s in self._said(chat)) if not p.startswith(ANSWERS)]

    def command_answers(self, chat: str) -> list[str]:
        return [plain_of(s.text) for s in self._said(chat)]

    def formats(self, chat: str) -> list[set[str]]:
        return [formats_of(s.text) for s in self._said(chat) if not plain_of(s.text).startswith(ANSWERS)]

    def prompts(self, chat: str) -> list[str]:
        return [a for a in (_approval(s) for s in self.fake.sent_to(chat)) if a]

    def press_approval(self, user: str, approval_id: str, approve: bool) -> None:
        """The card's button when the card is in `user`'s chat; else `/approve ID` in their personal chat."""
        person = self.persons[user]
        for sent in list(self.fake.sent):
            if _approval(sent) != approval_id:
                continue
            if sent.chat in (person.personal_chat, self.group):
                card = sent.cards[0]
                data = next(a["data"] for a in card["actions"] if a["data"]["approve"] is approve)
                self._told.setdefault(user, []).append((sent.chat, len(self.fake.sent_to(sent.chat))))
                self.fake.say(person, sent.conversation, "", value=data, reply_to=sent.id)
            else:
                chat = person.personal_chat
                self._told.setdefault(user, []).append((chat, len(self.fake.sent_to(chat))))
                self.fake.say(person, chat, f"/{'approve' if approve else 'deny'} {approval_id}")
            return
        raise AssertionError(f"no approval prompt {approval_id} was sent")

    def approval_answers(self, user: str) -> list[str]:
        out: list[str] = []
        for chat, before in self._told.get(user, []):
            out += [p for p in (plain_of(s.text) for s in self.fake.sent_to(chat)[before:]) if p.startswith(ANSWERS)][:1]
        return out

    def approval_view(self, chat: str) -> list[Shown]:
        return [Shown(plain_of(s.text), code_of(s.text), bool(s.cards)) for s in self.fake.sent_to(chat)
                if plain_of(s.text).startswith("🔐")]

    def status_lines(self, chat: str) -> list[str]:
        return [plain_of(s.versions[0]) for s in self.fake.sent_to(chat) if plain_of(s.versions[0]).startswith(STATUS)]

    # failures ---------------------------------------------------------------------------------------------
    def send_attempts(self) -> list[float]:
        """Replies only: not status lines (edited in place) nor approval cards."""
        return [at for at, body in list(self.fake.attempts)
                if not body.get("attachments") and not plain_of(str(body.get("text") or "")).startswith(STATUS)]

    def inject_429(self, seconds: int) -> None:
        self.fake.fail_next(429, "TooManyRequests", retry_after=seconds)

    def inject_permanent_error(self) -> None:
        self.fake.fail_next(403, "ConversationBlockedByUser")

    def break_token(self) -> None:
        self._password = "not~the~secret~the~token~service~knows"

    def stop_server(self) -> None:
        self.fake.stop()


HARNESS = TeamsHarness
