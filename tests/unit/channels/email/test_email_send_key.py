"""A mail that answers no mail (a cron result sent to an address) is recorded under its part's send_key, as
an answer is under what it answers: sent again after a crash it is not mailed twice, and one interrupted
before the SMTP server's OK goes out again with the same Message-ID (which mail clients show once). SMTP
has no idempotency of its own; the server here is aiosmtpd on loopback."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from clawgate.agent.core.schema import STATE, migrate
from clawgate.channels.base import DeliveryError
from clawgate.channels.email.adapter import EmailAdapter
from clawgate.channels.email.settings import EmailSettings
from clawgate.channels.kit import ChannelStore, Target
from tests.email_servers import SmtpServer, unique_address
from tests.harness import free_port

BOT, SECRET = "bot@example.org", "smtp-secret"


@pytest.fixture
def smtp() -> Iterator[SmtpServer]:
    server = SmtpServer(users={BOT: SECRET}).start()
    try:
        yield server
    finally:
        server.stop()


def adapter_for(smtp: SmtpServer, db: sqlite3.Connection) -> EmailAdapter:
    """The adapter after a restart is a new one on the same store: only what is recorded survives."""
    settings = EmailSettings(address=BOT, password=SECRET, imap_host="127.0.0.1", imap_port=free_port(),
                             imap_tls="none", smtp_tls="none", smtp_port=smtp.port, timeout_seconds=20)
    kit = SimpleNamespace(store=ChannelStore(db, "email"), log=logging.getLogger("clawgate.email"))
    return EmailAdapter(settings, kit)  # type: ignore[arg-type]


@pytest.fixture
def db() -> sqlite3.Connection:
    connection = sqlite3.connect(":memory:", isolation_level=None)
    migrate(connection, STATE)
    return connection


async def test_a_part_mailed_before_a_crash_is_not_mailed_again(smtp: SmtpServer, db: sqlite3.Connection) -> None:
    to = unique_address("ann")
    part = Target(chat_id=to, send_key="reply-1:0")
    first = await adapter_for(smtp, db).send_text(part, "Time to water the plants")
    assert await adapter_for(smtp, db).send_text(part, "Time to water the plants") == first
    assert [s.message["Message-ID"] for s in smtp.sent] == [first]
    await adapter_for(smtp, db).send_text(Target(chat_id=to), "no key")  # without one, every send is a mail
    await adapter_for(smtp, db).send_text(Target(chat_id=to), "no key")
    assert len(smtp.sent) == 3


async def test_a_part_the_server_did_not_confirm_goes_out_again_with_the_same_message_id(
        smtp: SmtpServer, db: sqlite3.Connection) -> None:
    to = unique_address("ann")
    part = Target(chat_id=to, send_key="reply-2:0")
    smtp.fail_next.append("451 4.3.0 try again later")
    with pytest.raises(DeliveryError):
        await adapter_for(smtp, db).send_text(part, "the result")
    sent = await adapter_for(smtp, db).send_text(part, "the result")
    assert len(smtp.attempts) == 2 and [s.message["Message-ID"] for s in smtp.sent] == [sent]
    assert [s.message["Message-ID"] for s in smtp.refused] == [sent]
    other = await adapter_for(smtp, db).send_text(Target(chat_id=to, send_key="reply-3:0"), "the result")
    assert other != sent  # another part is another mail
