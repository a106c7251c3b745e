"""Reading a mail (new text only, threading ids, attachments, never-answer signals) and composing one
(Re: once, References, Auto-Submitted, text + HTML alternative, attachments); the settings' checks."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from clawgate.channels.email.compose import OutFile, compose, references_for, reply_subject
from clawgate.channels.email.message import automatic_reason, parse_bytes, read_mail
from clawgate.channels.email.settings import EmailSettings

BOT = "bot@example.test"


def raw(headers: str, body: str = "Hello there") -> bytes:
    base = f"From: Alice <alice@example.test>\r\nTo: {BOT}\r\nSubject: Plans\r\nMessage-ID: <m1@example.test>\r\n"
    return (base + headers + "Content-Type: text/plain; charset=utf-8\r\n\r\n" + body + "\r\n").encode()


@pytest.mark.parametrize("header, reason", [
    ("Auto-Submitted: auto-replied\r\n", "Auto-Submitted: auto-replied"),
    ("Auto-Submitted: auto-generated\r\n", "Auto-Submitted: auto-generated"),
    ("Precedence: bulk\r\n", "Precedence: bulk"),
    ("Precedence: junk\r\n", "Precedence: junk"),
    ("Precedence: list\r\n", "Precedence: list"),
    ("List-Id: <team.lists.example.test>\r\n", "List-Id present"),
    ("List-Unsubscribe: <mailto:leave@example.test>\r\n", "List-Unsubscribe present"),
    ("X-Autoreply: yes\r\n", "X-Autoreply present"),
    ("Return-Path: <>\r\n", "null return path (a bounce)"),
])
def test_machine_and_list_mail_is_never_answered(header: str, reason: str) -> None:
    assert automatic_reason(parse_bytes(raw(header)), BOT) == reason


def test_a_persons_mail_and_auto_submitted_no_are_answered() -> None:
    assert automatic_reason(parse_bytes(raw("")), BOT) is None
    assert automatic_reason(parse_bytes(raw("Auto-Submitted: no\r\n")), BOT) is None


def test_bounces_and_own_mail_are_not_answered() -> None:
    daemon = raw("").replace(b"Alice <alice@example.test>", b"MAILER-DAEMON@example.test")
    assert automatic_reason(parse_bytes(daemon), BOT) == "sent by mailer-daemon@example.test"
    own = raw("").replace(b"alice@example.test", BOT.encode())
    assert automatic_reason(parse_bytes(own), BOT) == "sent by this address itself"


def test_quoted_history_and_signature_are_cut() -> None:
    body = ("Sounds good, go ahead.\r\n\r\n-- \r\nAlice Example\r\nAcme Corp\r\n\r\n"
            "On Tue, 25 Nov 2026 at 10:00, Bot <bot@example.test> wrote:\r\n> Shall I book it?\r\n> Yes or no.\r\n")
    mail = read_mail(raw("In-Reply-To: <b1@example.test>\r\nReferences: <a0@example.test> <b1@example.test>\r\n", body),
                     own_address=BOT)
    assert mail.text == "Sounds good, go ahead."
    assert mail.references == ("<a0@example.test>", "<b1@example.test>")
    assert (mail.sender, mail.display, mail.subject, mail.message_id) == ("alice@example.test", "Alice", "Plans",
                                                                          "<m1@example.test>")


def test_in_reply_to_missing_from_references_is_added_last() -> None:
    mail = read_mail(raw("In-Reply-To: <b1@example.test>\r\n"), own_address=BOT)
    assert mail.references == ("<b1@example.test>",)


def test_html_only_mail_is_read_as_text() -> None:
    html = raw("", "<p>Please <b>summarise</b> the report</p>").replace(b"text/plain", b"text/html")
    assert read_mail(html, own_address=BOT).text == "Please summarise the report"


def test_attachments_are_read_with_name_type_and_bytes() -> None:
    msg = compose(sender="alice@example.test", display_name="", to=BOT, subject="report", markdown="see attached",
                  files=(OutFile("report.csv", b"a,b\n1,2\n"),))
    mail = read_mail(msg.as_bytes(), own_address=BOT)
    assert [(a.name, a.mime, a.data) for a in mail.attachments] == [("report.csv", "text/csv", b"a,b\n1,2\n")]
    assert mail.text == "see attached"


def test_authentication_results_from_the_configured_server_only() -> None:
    good = raw("Authentication-Results: mx.example.test; dkim=pass header.d=example.test; dmarc=pass\r\n")
    forged = raw("Authentication-Results: evil.example; dmarc=pass\r\n")
    failed = raw("Authentication-Results: mx.example.test; dmarc=fail\r\n")
    dkim_only = raw("Authentication-Results: mx.example.test; dkim=pass header.d=example.test\r\n")
    other_domain = raw("Authentication-Results: mx.example.test; dkim=pass header.d=attacker.test\r\n")
    verdicts = [read_mail(m, own_address=BOT, authserv_id="mx.example.test").authenticated
                for m in (good, forged, failed, dkim_only, other_domain)]
    assert verdicts == [True, False, False, True, False]
    assert read_mail(good, own_address=BOT).authenticated is None


@pytest.mark.parametrize("subject, expected", [
    ("Plans", "Re: Plans"), ("Re: Plans", "Re: Plans"), ("RE: re: Plans", "Re: Plans"),
    ("AW: Re: Plans", "Re: Plans"), ("Re[2]: Plans", "Re: Plans"), ("", "Re:"),
])
def test_re_once(subject: str, expected: str) -> None:
    assert reply_subject(subject) == expected


def test_reply_threads_and_carries_text_and_html() -> None:
    msg = compose(sender=BOT, display_name="Claw", to="alice@example.test", subject="Re: Plans",
                  markdown="**Done.** See <script>x</script>\n\n| a | b |\n|---|---|\n| 1 | 2 |",
                  parent="<m2@example.test>", references=("<m0@example.test>", "<m1@example.test>"))
    assert msg["Subject"] == "Re: Plans"
    assert msg["In-Reply-To"] == "<m2@example.test>"
    assert msg["References"] == "<m0@example.test> <m1@example.test> <m2@example.test>"
    assert msg["Auto-Submitted"] == "auto-replied"
    assert msg["Message-ID"].endswith("@example.test>")
    assert str(msg["From"]) == "Claw <bot@example.test>"
    plain = msg.get_body(preferencelist=("plain",))
    html = msg.get_body(preferencelist=("html",))
    assert plain is not None and plain.get_content().startswith("Done. See <script>x</script>")  # text, no marks
    assert html is not None
    page = html.get_content()
    assert "<strong>Done.</strong>" in page and "<table>" in page
    assert "<script>" not in page and "&lt;script&gt;" in page  # raw HTML from the model is escaped


def test_long_threads_keep_the_first_and_latest_references() -> None:
    chain = references_for([f"<{i}@x>" for i in range(30)], "<30@x>")
    assert len(chain) == 20 and chain[0] == "<0@x>" and chain[-1] == "<30@x>"


def test_new_thread_has_no_reply_headers() -> None:
    msg = compose(sender=BOT, display_name="", to="alice@example.test", subject="Daily report", markdown="x")
    assert msg["Subject"] == "Daily report" and msg["In-Reply-To"] is None and msg["References"] is None


def test_plain_imap_or_smtp_only_on_loopback() -> None:
    EmailSettings(imap_host="127.0.0.1", imap_tls="none", smtp_tls="none")
    with pytest.raises(ValidationError, match="only for a loopback host"):
        EmailSettings(imap_host="imap.example.com", imap_tls="none")
    with pytest.raises(ValidationError, match="smtp_tls"):
        EmailSettings(imap_host="imap.example.com", smtp_tls="none")


def test_ports_follow_the_security_mode() -> None:
    s = EmailSettings(imap_host="mail.example.com", address=BOT, password="pw")
    assert (s.imap_server_port, s.smtp_server, s.smtp_server_port, s.smtp_login) == (993, "mail.example.com", 587,
                                                                                     (BOT, "pw"))
    assert EmailSettings(smtp_tls="tls").smtp_server_port == 465


@pytest.mark.parametrize("text, command", [
    ("approve ab12-cd", "/approve ab12-cd"), ("Deny ab12\n\nnot now", "/deny ab12"), ("/approve x1", "/approve x1"),
    ("please approve it", "please approve it"), ("approve", "approve"),
])
def test_an_approval_written_in_a_reply_becomes_the_kits_command(text: str, command: str) -> None:
    from clawgate.channels.email.adapter import approval_command

    assert approval_command(text) == command
