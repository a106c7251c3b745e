"""The email end-to-end tests' world: the real daemon reading a real Dovecot mailbox and sending
through aiosmtpd, and people (owner, friend, stranger) who write to it with a mail client."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from email.message import EmailMessage
from email.utils import make_msgid
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from tests.email_servers import Dovecot, SmtpServer, dovecot, send, unique_address, wait_mail  # noqa: F401
from tests.fakes.anthropic_api import FakeAnthropic
from tests.harness import DaemonProcess
from tests.waiting import DEFAULT_TIMEOUT, wait_until

RETRY_BASE = 0.05
DELIVERY_RETRY = 0.2  # the dispatcher's first retry of an undelivered reply here (channels.delivery_retry_seconds)


@dataclass
class MailWorld:
    dovecot: Dovecot
    smtp: SmtpServer
    bot: str
    owner: str
    friend: str
    stranger: str
    daemon: DaemonProcess | None = None
    settings: dict[str, Any] = field(default_factory=dict)

    def section(self) -> str:
        """The `[channels.email]` section of config.toml (JSON strings, numbers, lists and booleans are TOML too)."""
        values: dict[str, Any] = {
            "address": self.bot, "password": self.dovecot.passwords[self.bot], "display_name": "Claw",
            "imap_host": "127.0.0.1", "imap_port": self.dovecot.port, "imap_tls": "none",
            "smtp_port": self.smtp.port, "smtp_tls": "none", "owner": [self.owner], "allow_from": [self.friend],
            "retry_base_seconds": RETRY_BASE, "progress": False, "idle_seconds": 5, **self.settings,
        }
        return "\n[channels.email]\n" + "".join(f"{key} = {json.dumps(value)}\n" for key, value in values.items())

    def mail(self, sender: str, text: str, *, subject: str = "Hello", answering: EmailMessage | None = None,
             headers: dict[str, str] | None = None) -> str:
        """`sender` writes to the bot (through SMTP, into the bot's Dovecot inbox); returns the Message-ID.
        `answering`: a mail of the bot's, quoted below the text the way a mail client replies."""
        msg = EmailMessage()
        msg["From"] = sender
        msg["To"] = self.bot
        msg["Message-ID"] = make_msgid(domain="example.test")
        body = text
        if answering is not None:
            msg["Subject"] = f"Re: {answering['Subject']}"
            msg["In-Reply-To"] = answering["Message-ID"]
            msg["References"] = f"{answering.get('References', '')} {answering['Message-ID']}".strip()
            quoted = "\n".join(f"> {line}" for line in plain(answering).splitlines())
            body = f"{text}\n\nOn Wed, 25 Nov 2026 at 09:00, Claw <{self.bot}> wrote:\n{quoted}\n"
        else:
            msg["Subject"] = subject
        for name, value in (headers or {}).items():
            msg[name] = value
        msg.set_content(body)
        send(self.smtp, msg, sender, [self.bot])
        return str(msg["Message-ID"])

    def replies(self, to: str) -> list[EmailMessage]:
        return self.smtp.to(to)

    def texts(self, to: str) -> list[str]:
        return [plain(m).strip() for m in self.smtp.to(to)]

    def wait_replies(self, to: str, count: int, timeout: float = DEFAULT_TIMEOUT) -> list[EmailMessage]:
        wait_until(lambda: len(self.smtp.to(to)) >= count, f"{count} mail(s) to {to}", timeout=timeout,
                   describe=self.describe)
        return self.smtp.to(to)

    def describe(self) -> str:
        sent = [(s.rcpt_tos, s.message["Subject"]) for s in self.smtp.sent]
        log = "\n".join(line for line in self.daemon.log_text().splitlines()[-200:]
                        if "email" in line or "channel" in line or "rror" in line)[-6000:] if self.daemon else ""
        return f"sent so far: {sent}\ndaemon output:\n{log}\ndovecot log:\n{self.dovecot.log()[-2500:]}"


def plain(msg: EmailMessage) -> str:
    part = msg.get_body(preferencelist=("plain",))
    return str(part.get_content()) if part is not None else ""


@pytest.fixture
def mail_world(dovecot: Dovecot) -> Iterator[MailWorld]:
    bot, owner, friend, stranger = (unique_address(n) for n in ("bot", "owner", "friend", "stranger"))
    for address in (bot, owner, friend, stranger):
        dovecot.add_user(address, f"pw-{address.split('@')[0]}")
    smtp = SmtpServer(dovecot, users={bot: dovecot.passwords[bot]}).start()
    yield MailWorld(dovecot, smtp, bot, owner, friend, stranger)
    smtp.stop()


@pytest.fixture
def mail_daemon(mail_world: MailWorld, fake_model: FakeAnthropic, tmp_path: Path) -> Iterator[Callable[..., DaemonProcess]]:
    """Start the daemon on the world's mailbox; keyword arguments become channels.email settings
    (written into config.toml, as a user configures it)."""
    started: list[DaemonProcess] = []

    def make(env: dict[str, str] | None = None, **settings: Any) -> DaemonProcess:
        mail_world.settings.update(settings)
        daemon = DaemonProcess(tmp_path / f"home{len(started)}", anthropic_url=fake_model.base_url,
                               env={"CLAWGATE_CHANNELS__DELIVERY_RETRY_SECONDS": str(DELIVERY_RETRY), **(env or {})})
        daemon.init()
        with (daemon.home / "config.toml").open("a") as config:
            config.write(mail_world.section())
        started.append(daemon)
        mail_world.daemon = daemon.start()
        # mail already in the inbox when the channel first starts is not answered: write only after that
        wait_until(lambda: "email: first start" in daemon.log_text(), "the email channel's first start",
                   describe=mail_world.describe)
        return daemon

    yield make
    for daemon in started:
        daemon.kill()
