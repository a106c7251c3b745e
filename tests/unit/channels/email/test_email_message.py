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


MX = "mx.example.test"


def from_raw(sender: str, above: str = "", subject: str = "Plans") -> bytes:
    """A mail with this From header as written; `above`: header lines the receiving server put on top."""
    return (f"{above}From: {sender}\r\nTo: {BOT}\r\nSubject: {subject}\r\nMessage-ID: <m1@example.test>\r\n"
            "Content-Type: text/plain; charset=utf-8\r\n\r\nHello\r\n").encode()


@pytest.mark.parametrize("sender, why", [
    ("owner@example.test <attacker@evil.example>", "does not parse cleanly"),  # RFC 5322: the angle address
    ("owner@example.test, attacker@evil.example", "names 2 addresses"),
    ("Team: owner@example.test;", "names 1 addresses"),  # a group is nobody in particular
    ("=?utf-8?q?owner=40example.test?=", "does not parse cleanly"),  # an encoded word is no address
    ("=?utf-8?q?owner@example.test?= <attacker@evil.example>", "is another address"),
    ("=?utf-8?b?b3duZXJAZXhhbXBsZS50ZXN0?= <attacker@evil.example>", "is another address"),
    ('"owner@example.test" <attacker@evil.example>', "is another address"),
    ("<@example.test:attacker@evil.example>", "does not parse cleanly"),  # obsolete source route
    ("owner@[127.0.0.1]", "no valid domain"),
    ("=?utf-8?q?Al=0D=0Aice?= <alice@example.test>", "cannot be read"),  # a name that would break a header
])
def test_a_from_that_does_not_name_one_address_cleanly_names_nobody(sender: str, why: str) -> None:
    mail = read_mail(from_raw(sender), own_address=BOT)
    assert mail.untrusted is not None and why in mail.untrusted


def test_two_from_headers_name_nobody() -> None:
    mail = read_mail(from_raw("owner@example.test", above="From: attacker@evil.example\r\n"), own_address=BOT)
    assert mail.untrusted == "2 From headers"


@pytest.mark.parametrize("sender, address, display", [
    ("John Q. Public <john@example.test>", "john@example.test", "John Q. Public"),  # the common obsolete period
    ('"owner@example.test" <Owner@Example.TEST>', "owner@example.test", "owner@example.test"),  # name = its address
    ("Ö <owner@exämple.test>", "owner@xn--exmple-cua.test", "Ö"),  # IDN: compared as DNS and DMARC do
])
def test_a_clean_from_names_its_address_canonically(sender: str, address: str, display: str) -> None:
    mail = read_mail(from_raw(sender), own_address=BOT)
    assert (mail.sender, mail.display, mail.untrusted) == (address, display, None)


def verdict(sender: str, *results: str) -> str | None:
    above = "".join(f"Authentication-Results: {r}\r\n" for r in results)
    return read_mail(from_raw(sender, above), own_address=BOT, authserv_id=MX).untrusted


def test_dmarc_pass_from_the_configured_server_for_the_from_domain_is_believed() -> None:
    assert verdict("owner@example.test", f"{MX}; dkim=pass header.d=example.test; dmarc=pass header.from=example.test") is None
    assert verdict("Owner@EXAMPLE.test", f"MX.Example.Test; dmarc=pass (p=reject) header.from=Example.Test") is None
    assert verdict("owner@exämple.test", f"{MX}; dmarc=pass header.from=xn--exmple-cua.test") is None
    assert read_mail(from_raw("owner@example.test"), own_address=BOT).untrusted is None  # not checked without the id


@pytest.mark.parametrize("results, why", [
    ((), "no Authentication-Results header from mx.example.test"),
    (("evil.example; dmarc=pass header.from=example.test",), "no Authentication-Results header"),
    ((f"{MX}.evil.example; dmarc=pass header.from=example.test",), "no Authentication-Results header"),  # look-alike id
    (("(mx.example.test) evil.example; dmarc=pass header.from=example.test",), "no Authentication-Results header"),
    ((f"{MX}; dmarc=fail header.from=example.test",), "says dmarc=fail"),
    ((f"{MX}; dkim=pass header.d=example.test",), "no DMARC result"),  # DKIM alone is not DMARC alignment
    ((f"{MX}; dmarc=pass header.from=evil.example",), "is for evil.example"),  # a real pass, another domain
    ((f"{MX}; dmarc=pass",), "is for no domain"),
    # the words in a comment the server copied from the sender's envelope
    ((f'{MX}; spf=pass (sender "dmarc=pass"@evil.example) smtp.mailfrom="dmarc=pass"@evil.example; '
      'dmarc=fail header.from=example.test',), "says dmarc=fail"),
    # an encoded word in such a comment is never decoded into results
    ((f"{MX}; spf=pass (=?utf-8?q?=29_dmarc=3Dpass_header.from=3Dexample.test_=28?=) smtp.mailfrom=a@evil.example; "
      "dmarc=fail header.from=example.test",), "says dmarc=fail"),
    # the topmost header of the server counts; a lower copy is the sender's
    ((f"{MX}; dmarc=fail header.from=example.test", f"{MX}; dmarc=pass header.from=example.test"), "says dmarc=fail"),
    # an unreadable header above it may be the server's own, spoiled by the sender: nothing below is read
    (("garbage without results", f"{MX}; dmarc=pass header.from=example.test"), "cannot be read"),
])
def test_anything_else_is_not_believed(results: tuple[str, ...], why: str) -> None:
    problem = verdict("owner@example.test", *results)
    assert problem is not None and why in problem, problem


def test_a_subject_with_cr_lf_is_cleaned_and_the_reply_can_be_composed() -> None:
    mail = read_mail(from_raw("alice@example.test", subject="=?utf-8?q?Plans=0D=0ABcc:_victim@example.test?="),
                     own_address=BOT)
    assert mail.subject == "Plans Bcc: victim@example.test"
    # a subject stored before cleaning existed is cleaned where the reply is made
    reply = compose(sender=BOT, display_name="", to="alice@example.test", subject="Plans\r\nBcc: v@example.test",
                    markdown="ok", parent="<m1@example.test>")
    assert reply["Subject"] == "Re: Plans Bcc: v@example.test" and reply["Bcc"] is None
    assert b"\r\nBcc:" not in reply.as_bytes()


def test_owner_and_allow_from_are_spelled_as_mail_is_read() -> None:
    s = EmailSettings(owner=["Owner@Exämple.test"], allow_from=["*", "Friend@Example.TEST"])
    assert (s.owner, s.allow_from) == (["owner@xn--exmple-cua.test"], ["*", "friend@example.test"])


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


def test_a_look_alike_domain_is_not_the_owners() -> None:
    """`exаmple.test` with a Cyrillic а is another domain: compared as IDNA A-labels, never equal to the
    owner's, and a DMARC pass for it is no pass for the owner's domain."""
    owner = EmailSettings(owner=["owner@example.test"]).owner[0]
    mail = read_mail(from_raw("Owner <owner@ex\u0430mple.test>"), own_address=BOT)
    assert mail.untrusted is None and mail.sender.startswith("owner@xn--") and mail.sender != owner
    assert verdict("owner@ex\u0430mple.test", f"{MX}; dmarc=pass header.from=example.test") is not None
