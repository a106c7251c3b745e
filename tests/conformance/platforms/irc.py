"""The IRC channel's harness: a real network (InspIRCd + Anope, tests/irc_server.py), its own for each test,
and one socket client per person, each logged in to its own services account by SASL (`owner`, `friend`,
`stranger`: the account names are the ids), all three in the test channel.

What the bot sent is read from those clients: IRC has no messages of several lines, so a message the bot
sends arrives as several PRIVMSG lines, in order (`lines_not_messages`), and `replies` gives the lines.
IRC has no acknowledgement and no redelivery, so the cases about those do not apply; a channel line counts
as handed over once the server relayed it to another member.
"""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tests.conformance.harness import PlatformHarness, Shown
from tests.irc_server import IrcNetwork, IrcUser
from tests.waiting import wait_until

BOT, BOT_PASSWORD, CHANNEL = "confbot", "bot-password-1", "#conformance"
APPROVE = re.compile(r"/approve (\S+?)`? or")
STATUS = ("⚙️",)


class IrcHarness(PlatformHarness):
    name = "irc"
    max_chars = 1_200
    buttons = False
    lines_not_messages = True  # a message of several lines arrives as that many PRIVMSGs, in order
    owner, friend, stranger = "owner", "friend", "stranger"
    not_applicable = {
        "test_a_duplicate_event_is_answered_once": "an IRC server never delivers a line twice: there is no "
                                                   "redelivery to answer once (the msgid is the kit's key all the same)",
        "test_a_crash_between_intake_and_acknowledgement_loses_nothing": "IRC has no acknowledgement to hold back: "
                                                                        "a line lost in a crash is lost (docs/irc.md)",
        "test_a_long_markdown_reply_arrives_chunked_with_its_formatting": "IRC shows no formatting: plain lines "
                                                                          "(the byte split is in tests/e2e/test_irc_e2e.py)",
        "test_a_rate_limit_is_waited_out_as_asked": "IRC has no retry-after: the bot paces itself (token bucket)",
        "test_a_permanent_error_is_not_retried": "an IRC server refuses no PRIVMSG synchronously (a 401 comes "
                                                 "later, tied to no line)",
        "test_a_status_line_quotes_arguments_readably_escaped_and_short": "IRC cannot edit a message: no status line",
    }

    def __init__(self) -> None:
        self.network = IrcNetwork()
        self.password = BOT_PASSWORD
        self.people: dict[str, IrcUser] = {}
        self._told: dict[str, list[int]] = {}

    def start(self) -> None:
        """The accounts registered and the people connected at once: InspIRCd completes each connection on its
        once-a-second tick, so one after the other they took a second each. They join the channel in order
        (the owner first, as before)."""
        self.network.start()
        people = (self.owner, self.friend, self.stranger)
        with ThreadPoolExecutor(len(people) + 1) as pool:
            list(pool.map(lambda nick_password: self.network.register(*nick_password),
                          [(BOT, BOT_PASSWORD), *((account, f"pw-{account}") for account in people)]))
            users = list(pool.map(lambda person: IrcUser(self.network, person, f"pw-{person}").__enter__(), people))
        for person, user in zip(people, users):
            user.join(CHANNEL)
            self.people[person] = user

    def close(self) -> None:
        for user in self.people.values():
            try:
                user.__exit__()
            except OSError:
                pass
        self.network.stop()

    def env(self, **access: Any) -> dict[str, str]:
        values = {"enabled": True, "host": "127.0.0.1", "port": self.network.port, "tls": False, "nick": BOT,
                  "sasl_password": self.password, "channels": [CHANNEL], "flood_burst": 10,
                  "flood_lines_per_second": 50, **access}
        return {f"CLAWGATE_CHANNELS__IRC__{k.upper()}": v if isinstance(v, str) else json.dumps(v)
                for k, v in values.items()}

    def attach(self, daemon: Any) -> None:
        """With the right password, wait until the bot is in the channel (a line written before is not for it)."""
        if self.password == BOT_PASSWORD:
            owner = self.people[self.owner]
            wait_until(lambda: any(f":{BOT}!" in ln and " JOIN " in ln for ln in owner.lines), "the bot in the channel",
                       timeout=120, describe=daemon.log_text)

    # users writing ----------------------------------------------------------------------------------------
    def send_dm(self, user: str, text: str) -> str:
        self.people[user].say(BOT, text)
        return text

    def send_group(self, user: str, text: str, *, mention: bool) -> str:
        self.people[user].say(CHANNEL, f"{BOT}: {text}" if mention else text)
        return text

    def redeliver(self, event: Any) -> None:
        raise AssertionError("IRC never redelivers a line (not_applicable)")

    def acknowledged(self, event: Any) -> bool:
        """IRC acknowledges nothing: a channel line (`event` is its text) counts once the server relayed it to
        another member (`friend`), so to the bot as well. The server relays one sender's lines in order, so a
        later line the bot answers was read after this one."""
        friend = self.people[self.friend]
        return any(f" PRIVMSG {CHANNEL} :{event}" in ln and f":{self.owner}!" in ln for ln in list(friend.lines))

    # what the bot sent ------------------------------------------------------------------------------------
    def dm_chat(self, user: str) -> str:
        return user

    def group_chat(self) -> str:
        return CHANNEL

    def _lines(self, chat: str) -> list[str]:
        if chat.startswith("#"):
            return self.people[self.owner].received(BOT, chat)
        return self.people[chat].received(BOT)

    def replies(self, chat: str) -> list[str]:
        return [ln for ln in self._lines(chat) if not ln.startswith(STATUS)]

    def formats(self, chat: str) -> list[set[str]]:
        return [set() for _ in self.replies(chat)]  # IRC shows no formatting

    def prompts(self, chat: str) -> list[str]:
        found = [m.group(1) for ln in self._lines(chat) if (m := APPROVE.search(ln))]
        return list(dict.fromkeys(found))

    def press_approval(self, user: str, approval_id: str, approve: bool) -> None:
        self._told.setdefault(user, []).append(len(self._lines(user)))
        self.people[user].say(BOT, f"/{'approve' if approve else 'deny'} {approval_id}")

    def approval_answers(self, user: str) -> list[str]:
        return [line for before in self._told.get(user, []) for line in self._lines(user)[before:before + 1]]

    def approval_view(self, chat: str) -> list[Shown]:
        """The prompt's lines as a person reads them: a message starts at a line with 🔐; the command is the lines
        under each `The command…:` label up to the next label or `Why`, each part's lines joined by line breaks and
        the parts without a break, as the labels say."""
        view: list[list[str]] = []
        for text in self._lines(chat):
            if text.startswith("🔐"):
                view.append([])
            if view:
                view[-1].append(text)
        out = []
        for lines in view:
            parts: list[list[str]] = []
            in_command = False
            for text in lines:
                if text.startswith("The command"):
                    parts.append([])
                    in_command = True
                elif text.startswith(("Why", "No answer", "Answer", "🔐")):
                    in_command = False
                elif in_command:
                    parts[-1].append(text)
            code = "".join("\n".join(part) for part in parts)
            out.append(Shown("\n".join(lines), code, any("/approve " in text for text in lines)))
        return out

    # failures ---------------------------------------------------------------------------------------------
    def send_attempts(self) -> list[float]:
        raise AssertionError("IRC has no refused sends to count (not_applicable)")

    def inject_429(self, seconds: int) -> None:
        raise AssertionError("IRC has no retry-after (not_applicable)")

    def inject_permanent_error(self) -> None:
        raise AssertionError("IRC refuses no PRIVMSG synchronously (not_applicable)")

    def break_token(self) -> None:
        """The bot's SASL password is wrong from now on."""
        self.password = "not-the-password"

    def stop_server(self) -> None:
        self.network.halt()


HARNESS = IrcHarness
