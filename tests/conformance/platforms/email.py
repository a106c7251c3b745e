"""The email channel's harness: a real Dovecot (its own instance, so it can be stopped) and aiosmtpd.

An event is one mail, named by its Message-ID; the platform's acknowledgement is the \\Seen flag the
channel sets on a mail once the kit took it (the saved UID cursor is the daemon's own). Approvals are
answered the way a person answers a mail: `approve ID` as the first line of a reply.

Mail has no groups, no chunking (one mail holds any length) and no server-side rate limit with a
retry time, so the cases about those do not apply (`not_applicable`).
"""

from __future__ import annotations

import html
import json
import re
from email.message import EmailMessage
from email.utils import make_msgid
from typing import Any

from tests.conformance.harness import PlatformHarness, Shown
from tests.email_servers import Dovecot, SmtpServer, send

BOT = "bot@example.test"
ANSWERS = ("Only the owner", "Approved.", "Denied.", "This request is no longer pending", "Say which request")


def _plain(msg: EmailMessage) -> str:
    part = msg.get_body(preferencelist=("plain",))
    return str(part.get_content()).strip() if part is not None else ""


def _html(msg: EmailMessage) -> str:
    part = msg.get_body(preferencelist=("html",))
    return str(part.get_content()).replace("\r\n", "\n") if part is not None else ""


class EmailHarness(PlatformHarness):
    name = "email"
    max_chars = 0
    buttons = False
    owner, friend, stranger = "owner@example.test", "friend@example.test", "stranger@example.test"
    ack_window = 2.0  # IDLE: the channel hears of a mail at once
    not_applicable = {
        "test_a_long_markdown_reply_arrives_chunked_with_its_formatting": "one mail holds any length: never chunked",
        "test_the_access_matrix": "mail has no groups; strangers are covered by tests/e2e/test_email_e2e.py",
        "test_a_rate_limit_is_waited_out_as_asked": "SMTP has no retry-after; a 4xx is retried with backoff",
        "test_the_model_is_told_who_speaks_in_a_shared_conversation": "mail has no groups: every thread is private "
                                                                     "to its sender (test_a_private_conversation_names_no_sender)",
        "test_a_status_line_quotes_arguments_readably_escaped_and_short": "mail cannot edit a message: no status line, only the answer",
        "test_a_guest_cannot_stop_or_reset_the_owners_shared_conversation": "mail has no groups: every thread is "
                                                                            "private to its sender",
    }

    def __init__(self) -> None:
        self.dovecot = Dovecot()
        for user in (BOT, self.owner, self.friend, self.stranger):
            self.dovecot.add_user(user, f"pw-{user.split('@')[0]}")
        self.password = self.dovecot.passwords[BOT]
        self.smtp = SmtpServer(self.dovecot, users={BOT: self.password})

    def start(self) -> None:
        self.dovecot.start()
        self.smtp.start()

    def close(self) -> None:
        self.smtp.stop()
        self.dovecot.stop()

    def env(self, **access: Any) -> dict[str, str]:
        values = {"address": BOT, "password": self.password, "imap_host": "127.0.0.1", "imap_port": self.dovecot.port,
                  "imap_tls": "none", "smtp_port": self.smtp.port, "smtp_tls": "none",
                  "pairing_check_seconds": 0.2, "idle_seconds": 5, **access}
        return {f"CLAWGATE_CHANNELS__EMAIL__{k.upper()}": v if isinstance(v, str) else json.dumps(v)
                for k, v in values.items()}

    # users writing --------------------------------------------------------------------------------------
    def send_dm(self, user: str, text: str) -> str:
        msg = EmailMessage()
        msg["From"], msg["To"], msg["Subject"] = user, BOT, "Hello"
        msg["Message-ID"] = make_msgid(domain="example.test")
        msg.set_content(text)
        send(self.smtp, msg, user, [BOT])
        return str(msg["Message-ID"])

    def send_group(self, user: str, text: str, *, mention: bool) -> str:
        raise NotImplementedError("mail has no groups (test_the_access_matrix is not applicable to email)")

    def redeliver(self, event: str) -> None:
        """The same mail delivered again (a second copy under a new UID, as after a server-side move back)."""
        raw = next(s.raw for s in self.smtp.sent if BOT in s.rcpt_tos and s.message["Message-ID"] == event)
        self.dovecot.append(BOT, raw)

    def acknowledged(self, event: str) -> bool:
        flags = self.dovecot.flags_of(BOT, event)
        return bool(flags) and all(b"\\Seen" in f for f in flags)

    # what the bot sent ------------------------------------------------------------------------------------
    def dm_chat(self, user: str) -> str:
        return user

    def group_chat(self) -> str:
        raise NotImplementedError("mail has no groups")

    def _mails(self, chat: str) -> list[EmailMessage]:
        return self.smtp.to(chat)

    def replies(self, chat: str) -> list[str]:
        return [t for t in (_plain(m) for m in self._mails(chat)) if not t.startswith(("🔐", "✅", "❌", "⌛"))]

    def formats(self, chat: str) -> list[set[str]]:
        tags = {"strong": "bold", "em": "italic", "code": "code", "pre": "pre"}
        return [{kind for tag, kind in tags.items() if f"<{tag}>" in _html(m) or f"<{tag} " in _html(m)}
                for m in self._mails(chat)]

    def prompts(self, chat: str) -> list[str]:
        return [m.group(1) for t in (_plain(x) for x in self._mails(chat)) if t.startswith("🔐")
                for m in [re.search(r"/approve (\S+)", t)] if m]

    def approval_view(self, chat: str) -> list[Shown]:
        """A prompt's mails start with 🔐; the code is what the HTML part shows in <pre>."""
        out = []
        for mail in self._mails(chat):
            text = _plain(mail)
            if text.startswith("🔐"):
                code = "".join(html.unescape(c).removesuffix("\n")
                               for c in re.findall(r"<pre><code[^>]*>(.*?)</code></pre>", _html(mail), re.S))
                out.append(Shown(text, code, "/approve " in text))
        return out

    def press_approval(self, user: str, approval_id: str, approve: bool) -> None:
        self.send_dm(user, f"{'approve' if approve else 'deny'} {approval_id}")

    def approval_answers(self, user: str) -> list[str]:
        return [t for t in (_plain(m) for m in self._mails(user)) if t.startswith(ANSWERS)]

    # failures ---------------------------------------------------------------------------------------------
    def send_attempts(self) -> list[float]:
        return list(self.smtp.attempts)

    def inject_429(self, seconds: int) -> None:
        self.smtp.fail_next.append(f"421 4.7.0 Too many messages, try again in {seconds} seconds")

    def inject_permanent_error(self) -> None:
        self.smtp.fail_next.append("550 5.1.1 Mailbox unavailable")

    def break_token(self) -> None:
        self.dovecot.add_user(BOT, "a-different-and-longer-password")  # the daemon keeps the old one

    def stop_server(self) -> None:
        self.dovecot.halt()


HARNESS = EmailHarness
