"""The Matrix channel's conformance harness: the real Synapse of the test session, reached by the daemon
through a loopback proxy (tests/servers/matrix_proxy.py) that can refuse a send, rewind a /sync or go away;
the people are real matrix-nio clients (tests/matrix_support.py).

Approvals are reactions on the prompt (👍 / 👎), as a Matrix user gives them; someone who is not in the
prompt's room (a guest asking about the owner's prompt) answers with `/approve ID` in their own DM.
"""

from __future__ import annotations

import html
import json
import re
from typing import Any

from tests.conformance.harness import PlatformHarness, Shown
from tests.matrix_support import Human, Seen
from tests.servers.matrix_proxy import MatrixProxy
from tests.servers.synapse import MatrixUser, Synapse, shared_synapse
from tests.waiting import wait_until

MESSAGE_BYTES = 4000  # channels.matrix.max_message_bytes here: the long-reply case needs several chunks
STATUS = ("⚙️", "⏳")
APPROVE = re.compile(r"/approve (\S+?)`?\s")


def _formats(html: str) -> set[str]:
    found = set()
    if "<pre" in html:
        found.add("pre")
    outside = re.sub(r"<pre.*?</pre>", "", html, flags=re.S)
    if "<code>" in outside:
        found.add("code")
    if "<strong>" in html or "<b>" in html:
        found.add("bold")
    if "<em>" in html or "<i>" in html:
        found.add("italic")
    return found


class MatrixHarness(PlatformHarness):
    name = "matrix"
    max_chars = MESSAGE_BYTES  # bytes bound the characters too
    buttons = True
    ack_window = 1.5  # a daemon done with a batch asks for the next one at once (its /sync waits 1 s at most)

    def __init__(self) -> None:
        self.server: Synapse | None = None
        self.proxy: MatrixProxy | None = None
        self.bot: MatrixUser | None = None
        self.people: dict[str, Human] = {}
        self.dms: dict[str, str] = {}
        self.group: str | None = None
        self.broken_token = False
        self._pressed: dict[str, list[tuple[str, int]]] = {}  # user -> (room, bot messages there before the press)

    # --- the platform ---------------------------------------------------------------------------------
    def start(self) -> None:
        self.server = shared_synapse()
        self.bot = self.server.register("bot")
        port = int(self.server.base_url.rsplit(":", 1)[1])
        self.proxy = MatrixProxy(port).start()
        for role in ("owner", "friend", "stranger"):
            person = Human(self.server, self.server.register(role))
            self.people[person.user_id] = person
            setattr(self, role, person.user_id)

    def close(self) -> None:
        for person in self.people.values():
            person.close()
        if self.proxy is not None:
            self.proxy.stop()

    def env(self, **access: Any) -> dict[str, str]:
        assert self.bot is not None and self.proxy is not None
        login = ({"access_token": "syt_not_a_valid_token_for_the_test"} if self.broken_token
                 else {"password": self.bot.password})
        values = {"enabled": True, "homeserver": self.proxy.base_url, "user_id": self.bot.user_id,
                  "sync_timeout_seconds": 1, "max_message_bytes": MESSAGE_BYTES, **login, **access}
        return {f"CLAWGATE_CHANNELS__MATRIX__{k.upper()}": v if isinstance(v, str) else json.dumps(v)
                for k, v in values.items()}

    # --- people writing --------------------------------------------------------------------------------
    def send_dm(self, user: str, text: str) -> str:
        return self.people[user].send(self.dm_chat(user), text)

    def send_group(self, user: str, text: str, *, mention: bool) -> str:
        assert self.bot is not None
        return self.people[user].send(self.group_chat(), text, mention=self.bot.user_id if mention else None)

    def redeliver(self, event: str) -> None:
        assert self.proxy is not None
        self.proxy.redeliver(event)

    def acknowledged(self, event: str) -> bool:
        assert self.proxy is not None
        return self.proxy.acknowledged(event)

    # --- what the bot sent ----------------------------------------------------------------------------
    def dm_chat(self, user: str) -> str:
        assert self.bot is not None
        if user not in self.dms:
            self.dms[user] = self.people[user].dm(self.bot.user_id)
        return self.dms[user]

    def group_chat(self) -> str:
        assert self.bot is not None
        if self.group is None:
            owner = self.people[self.owner]
            self.group = owner.room(self.bot.user_id, self.friend, name="conformance")
            wait_until(lambda: self.friend in owner.members(self.group or ""), "the friend to join the group")
        return self.group

    def _reader(self, chat: str) -> Human:
        for user, room in self.dms.items():
            if room == chat:
                return self.people[user]
        return self.people[self.owner]

    def _bot_messages(self, chat: str) -> list[Seen]:
        assert self.bot is not None
        return [e for e in self._reader(chat).seen(chat, self.bot.user_id)
                if e.content.get("msgtype") == "m.notice"
                and (e.content.get("m.relates_to") or {}).get("rel_type") != "m.replace"]

    def _answers(self, chat: str) -> list[Seen]:
        return [e for e in self._bot_messages(chat) if not e.body.startswith(STATUS + ("🔐",))
                and not APPROVE.search(e.body + " ")]

    def replies(self, chat: str) -> list[str]:
        return [e.body for e in self._answers(chat)]

    def formats(self, chat: str) -> list[set[str]]:
        return [_formats(str(e.content.get("formatted_body", ""))) for e in self._answers(chat)]

    def prompts(self, chat: str) -> list[str]:
        return [m.group(1) for e in self._bot_messages(chat) if (m := APPROVE.search(e.body + " "))]

    def approval_view(self, chat: str) -> list[Shown]:
        """A prompt's notices start with 🔐; the code is what their HTML shows in <pre>; the last one asks
        for the reactions."""
        out = []
        for e in self._bot_messages(chat):
            if e.body.startswith("🔐"):
                body = str(e.content.get("formatted_body", ""))
                code = "".join(html.unescape(c).removesuffix("\n")
                               for c in re.findall(r"<pre><code[^>]*>(.*?)</code></pre>", body, re.S))
                out.append(Shown(e.body, code, "React 👍" in e.body))
        return out

    def status_lines(self, chat: str) -> list[str]:
        return [e.body for e in self._bot_messages(chat) if e.body.startswith(STATUS)]

    def press_approval(self, user: str, approval_id: str, approve: bool) -> None:
        """A reaction on the prompt when `user` is in its room; `/approve ID` in their own DM otherwise."""
        for room in [*self.dms.values(), *([self.group] if self.group else [])]:
            prompt = next((e for e in self._bot_messages(room) if (m := APPROVE.search(e.body + " "))
                           and m.group(1) == approval_id), None)
            if prompt is None:
                continue
            person = self.people[user]
            if user in person.members(room) or self.dms.get(user) == room:
                self._pressed.setdefault(user, []).append((room, len(self._bot_messages(room))))
                person.react(room, prompt.event_id, "👍" if approve else "👎")
            else:
                own = self.dm_chat(user)
                self._pressed.setdefault(user, []).append((own, len(self._bot_messages(own))))
                person.send(own, f"/{'approve' if approve else 'deny'} {approval_id}")
            return
        raise AssertionError(f"no approval prompt {approval_id} was sent")

    def approval_answers(self, user: str) -> list[str]:
        out = []
        for room, before in self._pressed.get(user, []):
            after = [e.body for e in self._bot_messages(room)[before:] if not e.body.startswith(STATUS)]
            out += after[:1]
        return out

    # --- failures ---------------------------------------------------------------------------------------
    def send_attempts(self) -> list[float]:
        assert self.proxy is not None
        return list(self.proxy.send_times)

    def inject_429(self, seconds: int) -> None:
        assert self.proxy is not None
        self.proxy.fail_next_send(429, {"errcode": "M_LIMIT_EXCEEDED", "error": "Too Many Requests",
                                        "retry_after_ms": seconds * 1000})

    def inject_permanent_error(self) -> None:
        assert self.proxy is not None
        self.proxy.fail_next_send(403, {"errcode": "M_FORBIDDEN", "error": "You are not allowed to send here"})

    def break_token(self) -> None:
        self.broken_token = True

    def stop_server(self) -> None:
        assert self.proxy is not None
        self.proxy.stop()


HARNESS = MatrixHarness
