"""The Signal channel's conformance harness: a fake signal-cli daemon (tests/fakes/signal) in multi-account
HTTP mode, the people on Signal writing through it.

Approvals are a 👍 / 👎 reaction on the prompt, as a Signal user gives them; someone who cannot see the
prompt (a guest asking about the owner's) writes `/approve ID` in their own chat. signal-cli
acknowledges envelopes to Signal's servers itself and streams each once, so "acknowledged" here is the
adapter's cursor (the last envelope it handed to the kit) in the daemon's state.
"""

from __future__ import annotations

import json
import re
import sqlite3
from typing import Any

from tests.conformance.harness import PlatformHarness, Shown
from tests.fakes.signal import BOT_NUMBER, FakeSignalCli, Person, Sent
from tests.waiting import wait_until

APPROVE = re.compile(r"/approve (\S+?)\s")
STATUS = ("⚙️", "⏳")
KINDS = {"BOLD": "bold", "ITALIC": "italic"}


def _ranges(message: Sent) -> list[tuple[int, int, str]]:
    """(start, end, style) in Python indexes (the text here is BMP-only where styled, checked)."""
    units = message.message.encode("utf-16-le")
    out = []
    for style in message.styles:
        start, length, kind = style.split(":")
        begin = len(units[:2 * int(start)].decode("utf-16-le"))
        end = len(units[:2 * (int(start) + int(length))].decode("utf-16-le"))
        out.append((begin, end, kind))
    return out


def formats(message: Sent) -> set[str]:
    found = set()
    text = message.message
    for begin, end, kind in _ranges(message):
        if kind == "MONOSPACE":
            block = (begin == 0 or text[begin - 1] == "\n") and (end == len(text) or text[end] == "\n")
            found.add("pre" if block and "\n" in text[begin:end] or block and begin == 0 else "code")
        elif kind in KINDS:
            found.add(KINDS[kind])
    return found


def code_blocks(message: Sent) -> str:
    """The text of the message's code blocks (monospace ranges that are whole lines), joined."""
    text = message.message
    return "".join(text[b:e] for b, e, kind in _ranges(message) if kind == "MONOSPACE"
                   and (b == 0 or text[b - 1] == "\n") and (e == len(text) or text[e] == "\n"))


class SignalHarness(PlatformHarness):
    name = "signal"
    max_chars = 2000
    buttons = True
    ack_window = 1.0  # the adapter hands an event to the kit as it arrives
    not_applicable = {
        "test_a_crash_between_intake_and_acknowledgement_loses_nothing":
            "signal-cli acknowledges each envelope to Signal's servers itself and streams it once: there is no "
            "acknowledgement clawgate could hold back (docs/signal.md, \"What a crash can lose\")",
        "test_a_status_line_quotes_arguments_readably_escaped_and_short":
            "Signal caps a message's edits, so there is no edited status line: typing shows the work",
    }

    def __init__(self) -> None:
        self.fake = FakeSignalCli(keepalive_seconds=2.0)
        self.people: dict[str, Person] = {}
        self.account = BOT_NUMBER
        self.group = ""
        self._db: sqlite3.Connection | None = None
        self._told: dict[str, list[tuple[str, int]]] = {}  # user -> (chat, bot messages there before answering)

    def start(self) -> None:
        self.fake.start()
        for name in ("owner", "friend", "stranger"):
            person = self.fake.add_person(name, number=f"+1555010{len(self.people):04d}")
            self.people[person.uuid] = person
        self.owner, self.friend, self.stranger = list(self.people)
        self.group = self.fake.add_group(list(self.people.values()))

    def close(self) -> None:
        self.fake.stop()
        if self._db is not None:
            self._db.close()

    def env(self, **access: Any) -> dict[str, str]:
        values = {"enabled": True, "account": self.account, "base_url": self.fake.url, "lost_after_seconds": 5,
                  **access}
        return {f"CLAWGATE_CHANNELS__SIGNAL__{key.upper()}": value if isinstance(value, str) else json.dumps(value)
                for key, value in values.items()}

    def attach(self, daemon: Any) -> None:
        """With a good account, wait for the daemon's event stream (a message written while nobody listens
        is, with signal-cli, one nobody receives)."""
        if self.account == BOT_NUMBER:
            wait_until(self.fake.connected, "the daemon's signal-cli event stream", describe=daemon.log_text)
        if self._db is None:
            uri = f"file:{daemon.home / 'state/clawgate.db'}?mode=ro"
            self._db = sqlite3.connect(uri, uri=True, timeout=1, isolation_level=None, check_same_thread=False)

    # users writing ----------------------------------------------------------------------------------------
    def send_dm(self, user: str, text: str) -> dict[str, Any]:
        return self.fake.write(self.people[user], text)

    def send_group(self, user: str, text: str, *, mention: bool) -> dict[str, Any]:
        return self.fake.write(self.people[user], text, group=self.group, mention_bot=mention)

    def redeliver(self, event: dict[str, Any]) -> None:
        self.fake.redeliver(event)

    def acknowledged(self, event: dict[str, Any]) -> bool:
        if self._db is None:
            return False
        try:
            row = self._db.execute("SELECT value FROM channel_state WHERE channel='signal' AND key='cursor'").fetchone()
        except sqlite3.OperationalError:  # the state database is being created
            return False
        return bool(row) and int(row[0]) >= int(event["envelope"]["timestamp"])

    # what the bot sent ------------------------------------------------------------------------------------
    def dm_chat(self, user: str) -> str:
        return user

    def group_chat(self) -> str:
        return f"group:{self.group}"

    def _said(self, chat: str) -> list[Sent]:
        return [m for m in self.fake.sent_to(chat) if not m.message.startswith(("🔐", *STATUS))]

    def replies(self, chat: str) -> list[str]:
        return [m.message for m in self._said(chat)]

    def formats(self, chat: str) -> list[set[str]]:
        return [formats(m) for m in self._said(chat)]

    def _prompts(self, chat: str | None = None) -> list[tuple[Sent, str]]:
        return [(m, found.group(1)) for m in self.fake.sent_to(chat) if m.message.startswith("🔐")
                and (found := APPROVE.search(m.message.replace("`", "") + " "))]

    def prompts(self, chat: str) -> list[str]:
        return list(dict.fromkeys(approval for _, approval in self._prompts(chat)))

    def press_approval(self, user: str, approval_id: str, approve: bool) -> None:
        """A reaction on the prompt when it is in `user`'s own chat or the group; else `/approve ID` in theirs."""
        for prompt, found in self._prompts():
            if found != approval_id:
                continue
            mine = prompt.chat in (user, self.group_chat())
            chat = prompt.chat if mine else user
            self._told.setdefault(user, []).append((chat, len(self.fake.sent_to(chat))))
            if mine:
                self.fake.react(self.people[user], "👍" if approve else "👎", prompt)
            else:
                self.fake.write(self.people[user], f"/{'approve' if approve else 'deny'} {approval_id}")
            return
        raise AssertionError(f"no approval prompt {approval_id} was sent")

    def approval_answers(self, user: str) -> list[str]:
        out = []
        for chat, before in self._told.get(user, []):
            out += [m.message for m in self.fake.sent_to(chat)[before:] if not m.message.startswith(STATUS)][:1]
        return out

    def approval_view(self, chat: str) -> list[Shown]:
        return [Shown(m.message, code_blocks(m), "React 👍" in m.message)
                for m in self.fake.sent_to(chat) if m.message.startswith("🔐")]

    # failures ---------------------------------------------------------------------------------------------
    def send_attempts(self) -> list[float]:
        return [c.at for c in self.fake.calls_to("send") if not str(c.params.get("message", "")).startswith(STATUS)]

    def inject_429(self, seconds: int) -> None:
        self.fake.rate_limit(seconds)

    def inject_permanent_error(self) -> None:
        self.fake.fail("send", -1, "Failed to send message")

    def break_token(self) -> None:
        """signal-cli has no such account (never linked, or unlinked from the phone)."""
        self.account = "+15559999999"

    def stop_server(self) -> None:
        self.fake.stop()


HARNESS = SignalHarness
