"""The Google Chat channel's conformance harness: the fake Google (tests/fakes/googlechat) — the Chat REST
API the real google-apps-chat client calls, the certificates of the events' bearer JWTs, and the event
sender posting to the daemon's HTTP endpoint.

An event is one interaction event, named by its message's resource name; the platform's acknowledgement
is the daemon's 200 to a delivery of it (the fake sends it again until it gets one). A mention in the
space starts a thread and the conversation there is the thread. Approvals are card buttons; someone who
cannot see the prompt (a guest asking about the owner's DM) writes `/approve ID` in their own DM. The
Chat API's 429 carries a Retry-After here (the adapter waits `rate_limit_retry_seconds` when not).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from tempfile import mkdtemp
from typing import Any

from tests.conformance.harness import PlatformHarness, Shown
from tests.fakes.googlechat import FakeGoogleChat, PROJECT_NUMBER, Sent, User, formats_of, plain_of
from tests.harness import free_port

STATUS = ("⚙️", "⏳")


def _buttons(sent: Sent) -> list[dict[str, Any]]:
    return [b for card in sent.cards for section in card["card"].get("sections") or []
            for widget in section.get("widgets") or [] for b in (widget.get("buttonList") or {}).get("buttons") or []]


def _param(button: dict[str, Any], key: str) -> str:
    return next((p.get("value", "") for p in button["onClick"]["action"]["parameters"] if p["key"] == key), "")


class GoogleChatHarness(PlatformHarness):
    name = "googlechat"
    max_chars = 4096
    buttons = True
    ack_window = 2.0

    def __init__(self) -> None:
        self.fake = FakeGoogleChat()
        self.people: dict[str, User] = {}
        self.space = ""
        self._thread = ""  # the last mention's thread: the conversation in the space
        self._folder = Path(mkdtemp(prefix="googlechat-key-"))
        self._key: dict[str, Any] = {}
        self._told: dict[str, list[tuple[str, int]]] = {}  # user -> (chat, messages before) per answer awaited

    def start(self) -> None:
        self.fake.start()
        for role in ("owner", "friend", "stranger"):
            user = self.fake.add_user(role)
            self.people[user.name.removeprefix("users/")] = user  # the kit's id: the name's digits
        self.owner, self.friend, self.stranger = list(self.people)
        self.space = self.fake.add_space("team")
        self._key = self.fake.key()

    def close(self) -> None:
        self.fake.stop()

    def env(self, **access: Any) -> dict[str, str]:
        port = free_port()
        self.fake.endpoint_url = f"http://127.0.0.1:{port}/googlechat/events"
        key = self._folder / "key.json"
        key.write_text(json.dumps(self._key))
        values = {"credentials_file": str(key), "audience": PROJECT_NUMBER, "base_url": self.fake.base_url,
                  "certs_url": self.fake.certs_url, "listen_port": port, "check_seconds": 1,
                  "pairing_check_seconds": 0.2, **access}
        return {f"CLAWGATE_CHANNELS__GOOGLECHAT__{k.upper()}": v if isinstance(v, str) else json.dumps(v)
                for k, v in values.items()}

    # users writing --------------------------------------------------------------------------------------
    def send_dm(self, user: str, text: str) -> str:
        person = self.people[user]
        return self.fake.write(person, person.dm, text)

    def send_group(self, user: str, text: str, *, mention: bool) -> str:
        event = self.fake.write(self.people[user], self.space, text, mention=mention)
        if mention:
            self._thread = self.fake.thread_of(event)
        return event

    def send_command(self, user: str, command: str, *, group: bool = False) -> str:
        if group:
            return self.fake.write(self.people[user], self.space, command, mention=True, thread=self._thread)
        return self.send_dm(user, command)

    def redeliver(self, event: str) -> None:
        self.fake.redeliver(event)

    def acknowledged(self, event: str) -> bool:
        return self.fake.acknowledged(event)

    # what the bot sent ------------------------------------------------------------------------------------
    def dm_chat(self, user: str) -> str:
        return self.people[user].dm

    def group_chat(self) -> str:
        return self.space

    def _said(self, chat: str) -> list[Sent]:
        return [s for s in self.fake.sent_to(chat) if not s.text.startswith(("🔐", *STATUS)) and not s.viewer]

    def replies(self, chat: str) -> list[str]:
        return [plain_of(s.text) for s in self._said(chat)]

    def formats(self, chat: str) -> list[set[str]]:
        return [formats_of(s.text) for s in self._said(chat)]

    def _prompts(self, chat: str | None = None) -> list[tuple[Sent, dict[str, Any]]]:
        with self.fake._cond:
            sent = [s for s in self.fake.sent if chat is None or s.space == chat]
        return [(s, b) for s in sent for b in _buttons(s)]

    def prompts(self, chat: str) -> list[str]:
        return list(dict.fromkeys(_param(b, "approval_id") for _, b in self._prompts(chat)))

    def press_approval(self, user: str, approval_id: str, approve: bool) -> None:
        """The button where `user` can see the prompt (their DM, the space); else `/approve ID` in their DM.
        The answer comes where they pressed or wrote."""
        person = self.people[user]
        for sent, button in self._prompts():
            if _param(button, "approval_id") != approval_id or _param(button, "approve") != str(approve).lower():
                continue
            where = sent.space if sent.space in (person.dm, self.space) else person.dm
            self._told.setdefault(user, []).append((where, len(self.fake.sent_to(where))))
            if where == sent.space:
                self.fake.click(person, sent, button)
            else:
                self.fake.write(person, where, f"/{'approve' if approve else 'deny'} {approval_id}")
            return
        raise AssertionError(f"no approval prompt {approval_id} was sent")

    def approval_answers(self, user: str) -> list[str]:
        out: list[str] = []
        for chat, before in self._told.get(user, []):
            out += [plain_of(s.text) for s in self.fake.sent_to(chat)[before:]
                    if not s.text.startswith(STATUS) and s.viewer in ("", f"users/{user}") and not s.cards][:1]
        return out

    def approval_view(self, chat: str) -> list[Shown]:
        out = []
        for s in self.fake.sent_to(chat):
            if not s.text.startswith("🔐"):
                continue
            code = "".join(c.removeprefix("\n").removesuffix("\n") for c in re.findall(r"```(.+?)```", s.text, re.S))
            out.append(Shown(plain_of(s.text), code, bool(_buttons(s))))
        return out

    def status_lines(self, chat: str) -> list[str]:
        return [plain_of(s.edits[0] if s.edits else s.text) for s in self.fake.sent_to(chat, deleted=True)
                if (s.edits[0] if s.edits else s.text).startswith(STATUS)]

    # failures ---------------------------------------------------------------------------------------------
    def send_attempts(self) -> list[float]:
        return list(self.fake.attempts_of(lambda text: not text.startswith(STATUS)))

    def inject_429(self, seconds: int) -> None:
        self.fake.fail_next(429, "Resource has been exhausted (e.g. check quota).", {"Retry-After": str(seconds)})

    def inject_permanent_error(self) -> None:
        self.fake.fail_next(400, "Invalid argument: the message cannot be created.")

    def break_token(self) -> None:
        self._key = self.fake.unknown_key()

    def stop_server(self) -> None:
        self.fake.stop()


HARNESS = GoogleChatHarness
