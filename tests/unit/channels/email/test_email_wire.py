"""The email channel's wire plumbing against real servers: Dovecot (IMAP) and aiosmtpd (SMTP).

Mailbox (imapclient on its thread): login, UIDVALIDITY, UIDs after a cursor, fetch without marking
read, IDLE waking on new mail, a changed UIDVALIDITY seen; send_mail (aiosmtplib): AUTH, delivery into
the recipient's Dovecot inbox, refused logins and recipients sorted permanent vs transient.
"""

from __future__ import annotations

import asyncio
import ssl
import subprocess
from pathlib import Path
from typing import Iterator

import pytest

from clawgate.channels.base import DeliveryError
from clawgate.channels.email.compose import compose
from clawgate.channels.email.imap import Mailbox, MailboxAuthError, MailboxUnavailable
from clawgate.channels.email.message import read_mail
from clawgate.channels.email.settings import EmailSettings
from clawgate.channels.email.smtp import send_mail
from tests.email_servers import Dovecot, SmtpServer, dovecot, send, unique_address, wait_mail  # noqa: F401
from tests.harness import free_port
from tests.waiting import wait_until_async


def settings_for(dovecot: Dovecot, address: str, smtp: SmtpServer | None = None, **extra: object) -> EmailSettings:
    values: dict[str, object] = dict(address=address, password=dovecot.passwords[address], imap_host="127.0.0.1",
                                     imap_port=dovecot.port, imap_tls="none", smtp_tls="none",
                                     smtp_port=smtp.port if smtp else free_port(), timeout_seconds=20)
    values.update(extra)
    return EmailSettings(**values)  # type: ignore[arg-type]


def plain_mail(sender: str, to: str, subject: str, body: str, message_id: str) -> bytes:
    return (f"From: Alice <{sender}>\r\nTo: {to}\r\nSubject: {subject}\r\nMessage-ID: {message_id}\r\n"
            f"Content-Type: text/plain; charset=utf-8\r\n\r\n{body}\r\n").encode()


@pytest.fixture
def bot(dovecot: Dovecot) -> str:
    address = unique_address("bot")
    dovecot.add_user(address, "bot-secret")
    return address


async def test_mailbox_reads_new_mail_after_a_cursor_without_marking_it_read(dovecot: Dovecot, bot: str) -> None:
    dovecot.append(bot, plain_mail("alice@example.test", bot, "old", "before the cursor", "<old@example.test>"))
    box = Mailbox(settings_for(dovecot, bot))
    await box.connect()
    try:
        assert box.uidvalidity > 0 and box.idle_supported
        last = await box.highest_uid()
        assert last == 1
        dovecot.append(bot, plain_mail("alice@example.test", bot, "new", "after the cursor", "<new@example.test>"))
        uids = await box.uids_after(last)
        assert uids == [2]
        assert await box.uids_after(2) == []  # "3:*" matches the highest UID (2); it is filtered out
        fetched = await box.fetch(2, 10_000)
        assert fetched is not None
        mail = read_mail(fetched[0], own_address=bot)
        assert (mail.message_id, mail.sender, mail.text) == ("<new@example.test>", "alice@example.test", "after the cursor")
    finally:
        await box.disconnect()
    seen = dovecot.imap(bot)
    try:
        seen.select("INBOX", readonly=True)
        _, flags = seen.uid("FETCH", "2", "(FLAGS)")
        assert b"\\Seen" not in flags[0]
    finally:
        seen.logout()


async def test_an_oversized_mail_is_not_downloaded_only_its_header(dovecot: Dovecot, bot: str) -> None:
    big = plain_mail("a@example.test", bot, "huge report", "x" * 50_000, "<big@example.test>")
    dovecot.append(bot, big)
    box = Mailbox(settings_for(dovecot, bot))
    await box.connect()
    try:
        fetched = await box.fetch(1, 10_000)
        assert fetched is not None
        head, size = fetched
        assert size == len(big) and len(head) < 1000
        mail = read_mail(head, own_address=bot)
        assert (mail.subject, mail.sender, mail.text) == ("huge report", "a@example.test", "")
        assert await box.fetch(99, 10_000) is None
    finally:
        await box.disconnect()


async def test_idle_wakes_when_mail_arrives(dovecot: Dovecot, bot: str) -> None:
    box = Mailbox(settings_for(dovecot, bot, idle_seconds=120))
    await box.connect()
    try:
        waiting = asyncio.create_task(box.wait())
        await asyncio.sleep(0.5)  # let IDLE start; the assertion below is on the push, not on this pause
        assert not waiting.done()
        await asyncio.to_thread(dovecot.append, bot, plain_mail("a@example.test", bot, "s", "b", "<idle@example.test>"))
        await asyncio.wait_for(waiting, 60)
        assert await box.uids_after(0) == [1]
    finally:
        await box.disconnect()


async def test_polling_when_the_server_has_no_idle(dovecot: Dovecot, bot: str) -> None:
    box = Mailbox(settings_for(dovecot, bot, poll_seconds=0.2))
    await box.connect()
    try:
        box.idle_supported = False  # as with a server without the IDLE capability
        await box.wait()  # a poll: sleeps poll_seconds, then a NOOP so the server reports new mail
        dovecot.append(bot, plain_mail("a@example.test", bot, "s", "b", "<poll@example.test>"))
        await wait_until_async(lambda: box.uids_after(0), "the polled mailbox to list the new mail")
    finally:
        await box.disconnect()


async def test_a_disconnect_ends_a_wait_in_idle_promptly(dovecot: Dovecot, bot: str) -> None:
    box = Mailbox(settings_for(dovecot, bot, idle_seconds=1700))
    await box.connect()
    waiting = asyncio.create_task(box.wait())
    await asyncio.sleep(0.3)
    await box.disconnect()
    await asyncio.wait_for(asyncio.gather(waiting, return_exceptions=True), 30)



async def test_a_connection_the_server_drops_during_idle_ends_the_wait_as_unavailable(dovecot: Dovecot, bot: str) -> None:
    """The server's process for this session dies: the wait ends at once as a lost connection (retried with
    backoff), not a busy loop until idle_seconds ran out."""
    import psutil

    box = Mailbox(settings_for(dovecot, bot, idle_seconds=1700))
    await box.connect()
    try:
        waiting = asyncio.create_task(box.wait())
        master = psutil.Process(dovecot.proc.pid)  # type: ignore[union-attr]
        sessions = await wait_until_async(
            lambda: [p for p in master.children(recursive=True) if p.name() == "imap"] or None,
            "the server's process for the IMAP session")
        # in IDLE: the server accepted it (imapclient keeps the command's tag while IDLE lasts)
        await wait_until_async(lambda: getattr(box.client, "_idle_tag", None) is not None, "the wait in IDLE")
        assert not waiting.done()
        for process in sessions:
            process.kill()
        with pytest.raises(MailboxUnavailable):  # "closed the connection" (or, killed before IDLE was accepted, EOF)
            await asyncio.wait_for(waiting, 60)
    finally:
        await box.disconnect()

async def test_wrong_password_is_an_auth_error_naming_the_fix(dovecot: Dovecot, bot: str) -> None:
    box = Mailbox(settings_for(dovecot, bot, password="wrong"))
    with pytest.raises(MailboxAuthError, match="app password"):
        await box.connect()
    await box.disconnect()


async def test_unreachable_server_is_unavailable(dovecot: Dovecot, bot: str) -> None:
    box = Mailbox(settings_for(dovecot, bot, imap_port=free_port()))
    with pytest.raises(MailboxUnavailable):
        await box.connect()
    await box.disconnect()


async def test_tls_to_a_plain_server_fails_not_silently(dovecot: Dovecot, bot: str) -> None:
    box = Mailbox(settings_for(dovecot, bot, imap_tls="tls"), ssl_context=ssl.create_default_context())
    with pytest.raises(MailboxUnavailable):
        await box.connect()
    await box.disconnect()


async def test_a_rebuilt_mailbox_has_a_new_uidvalidity(dovecot: Dovecot, bot: str) -> None:
    dovecot.append(bot, plain_mail("a@example.test", bot, "s", "b", "<v1@example.test>"))
    box = Mailbox(settings_for(dovecot, bot))
    await box.connect()
    first = box.uidvalidity
    await box.disconnect()
    changed = dovecot.new_uidvalidity(bot)
    box = Mailbox(settings_for(dovecot, bot))
    await box.connect()
    try:
        assert box.uidvalidity == changed != first
    finally:
        await box.disconnect()


# SMTP ----------------------------------------------------------------------------------------------
async def test_send_mail_logs_in_and_delivers_into_the_recipients_inbox(dovecot: Dovecot, bot: str) -> None:
    alice = unique_address("alice")
    dovecot.add_user(alice, "alice-secret")
    smtp = SmtpServer(dovecot, users={bot: "smtp-secret"}).start()
    try:
        settings = settings_for(dovecot, bot, smtp, smtp_password="smtp-secret")
        msg = compose(sender=bot, display_name="Bot", to=alice, subject="hello", markdown="**hi** there")
        await send_mail(settings, msg)
        sent = wait_mail(smtp, alice)
        assert smtp.sent[0].login == bot
        assert sent[0]["Auto-Submitted"] == "auto-replied"
        inbox = await asyncio.to_thread(dovecot.messages, alice)
        assert [m["Message-ID"] for m in inbox] == [msg["Message-ID"]]
    finally:
        smtp.stop()


async def test_smtp_wrong_password_is_permanent_and_names_the_setting(dovecot: Dovecot, bot: str) -> None:
    smtp = SmtpServer(users={bot: "smtp-secret"}).start()
    try:
        settings = settings_for(dovecot, bot, smtp, smtp_password="nope")
        with pytest.raises(DeliveryError, match="smtp_password") as caught:
            await send_mail(settings, compose(sender=bot, display_name="", to="x@example.test", subject="s", markdown="m"))
        assert caught.value.permanent
        assert smtp.sent == []
    finally:
        smtp.stop()


async def test_a_relay_without_auth_takes_mail_when_smtp_auth_is_off(dovecot: Dovecot, bot: str) -> None:
    alice = unique_address("alice")
    dovecot.add_user(alice, "alice-secret")
    relay = SmtpServer(dovecot).start()  # offers no AUTH at all, like a local Postfix on loopback
    try:
        settings = settings_for(dovecot, bot, relay, smtp_auth=False)  # the IMAP password is set all the same
        assert settings.smtp_login is None
        await send_mail(settings, compose(sender=bot, display_name="", to=alice, subject="s", markdown="via relay"))
        (sent,) = wait_mail(relay, alice)
        assert relay.sent[0].login is None and relay.logins == [] and "via relay" in sent.get_body().get_content()
    finally:
        relay.stop()


async def test_smtp_auth_against_a_server_without_auth_is_permanent_naming_the_setting(dovecot: Dovecot,
                                                                                        bot: str) -> None:
    relay = SmtpServer(dovecot).start()
    try:
        settings = settings_for(dovecot, bot, relay)  # smtp_auth on (the default)
        with pytest.raises(DeliveryError, match="offers no login.*smtp_auth = false") as caught:
            await send_mail(settings, compose(sender=bot, display_name="", to="x@example.test", subject="s", markdown="m"))
        assert caught.value.permanent and relay.sent == []
    finally:
        relay.stop()


async def test_no_login_against_a_server_that_wants_one_is_permanent_naming_the_setting(dovecot: Dovecot,
                                                                                         bot: str) -> None:
    smtp = SmtpServer(users={bot: "smtp-secret"}, auth_required=True).start()
    try:
        settings = settings_for(dovecot, bot, smtp, smtp_auth=False)
        with pytest.raises(DeliveryError, match="wants a login.*smtp_auth") as caught:
            await send_mail(settings, compose(sender=bot, display_name="", to="x@example.test", subject="s", markdown="m"))
        assert caught.value.permanent and smtp.sent == []
    finally:
        smtp.stop()


async def test_smtp_down_is_transient(dovecot: Dovecot, bot: str) -> None:
    settings = settings_for(dovecot, bot)  # nothing listens on its smtp_port
    with pytest.raises(DeliveryError) as caught:
        await send_mail(settings, compose(sender=bot, display_name="", to="x@example.test", subject="s", markdown="m"))
    assert not caught.value.permanent


def test_missing_dovecot_message_names_the_package() -> None:
    script = ("import shutil, os, pytest\n"
              "import tests.email_servers as s\n"
              "shutil.which = lambda name: None\n"
              "os.access = lambda *a: False\n"
              "s.dovecot_binary()\n")
    done = subprocess.run([__import__("sys").executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "dovecot-imapd" in done.stderr


# TLS: a server with its own certificate, trusted through ca_file ---------------------------------
@pytest.fixture(scope="module")
def tls_dovecot() -> Iterator[Dovecot]:
    server = Dovecot(tls=True).start()
    yield server
    server.stop()


@pytest.mark.parametrize("mode", ["starttls", "tls"])
async def test_imap_over_tls_with_the_servers_ca(tls_dovecot: Dovecot, mode: str) -> None:
    address = unique_address("tlsbot")
    tls_dovecot.add_user(address, "tls-secret")
    port = tls_dovecot.port if mode == "starttls" else tls_dovecot.tls_port
    box = Mailbox(EmailSettings(address=address, password="tls-secret", imap_host="127.0.0.1", imap_port=port,
                                imap_tls=mode, ca_file=str(tls_dovecot.cert)))  # type: ignore[arg-type]
    await box.connect()
    try:
        assert box.uidvalidity > 0
    finally:
        await box.disconnect()


async def test_an_untrusted_certificate_is_refused(tls_dovecot: Dovecot) -> None:
    address = unique_address("tlsbot")
    tls_dovecot.add_user(address, "tls-secret")
    box = Mailbox(EmailSettings(address=address, password="tls-secret", imap_host="127.0.0.1",
                                imap_port=tls_dovecot.tls_port, imap_tls="tls"))
    with pytest.raises(MailboxAuthError, match="not trusted .*self-signed.*ca_file"):
        await box.connect()
    await box.disconnect()


def test_an_unreadable_ca_file_names_the_setting(tmp_path: Path) -> None:
    (tmp_path / "ca.pem").write_text("not a certificate")
    with pytest.raises(ValueError, match="ca_file"):
        EmailSettings(ca_file=str(tmp_path / "ca.pem")).tls_context()


@pytest.mark.parametrize("mode", ["starttls", "tls"])
async def test_smtp_over_tls_logs_in_and_sends(tls_dovecot: Dovecot, mode: str) -> None:
    assert tls_dovecot.cert is not None
    key = tls_dovecot.cert.with_name("key.pem")
    smtp = SmtpServer(users={"bot@example.test": "smtp-secret"}, tls=mode, cert=(tls_dovecot.cert, key)).start()
    try:
        settings = EmailSettings(address="bot@example.test", smtp_host="127.0.0.1", smtp_port=smtp.port,
                                 smtp_tls=mode, smtp_password="smtp-secret", ca_file=str(tls_dovecot.cert))  # type: ignore[arg-type]
        await send_mail(settings, compose(sender="bot@example.test", display_name="", to="alice@example.test",
                                          subject="s", markdown="over tls"))
        (sent,) = wait_mail(smtp, "alice@example.test")
        assert smtp.sent[0].login == "bot@example.test" and "over tls" in sent.get_body(("plain",)).get_content()
    finally:
        smtp.stop()
