"""The email channel end to end: the real daemon, a real Dovecot mailbox (IMAP IDLE), real SMTP (aiosmtpd).

People write with a mail client (SMTP into the bot's inbox); the tests read what the bot really sent.
An absence ("the stranger got nothing") is proven by a later mail that was answered: mail is taken
in UID order, so once the later one is answered the earlier one was decided.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from tests.email_servers import SmtpServer
from tests.email_support import (DELIVERY_RETRY, RETRY_BASE, MailWorld, dovecot, mail_daemon,  # noqa: F401
                                  mail_world, plain)
from tests.fakes.anthropic_api import FakeAnthropic, text, tool_use
from tests.harness import DaemonProcess
from tests.telegram_support import user_texts
from tests.waiting import wait_past, wait_until

# a duplicate would come within the dispatcher's first retry and a send's own retries (1 + 2 + 4 bases), with room
RESEND_WINDOW = 2 * (DELIVERY_RETRY + RETRY_BASE * 7)


def test_a_chat_threads_its_replies(mail_daemon, mail_world: MailWorld, fake_model: FakeAnthropic) -> None:
    mail_daemon()
    w = mail_world
    first_id = w.mail(w.owner, "hello there", subject="Plans for Friday")
    (reply,) = w.wait_replies(w.owner, 1)
    assert plain(reply).strip() == "echo: hello there"
    assert reply["Subject"] == "Re: Plans for Friday"
    assert reply["In-Reply-To"] == first_id and reply["References"] == first_id
    assert reply["Auto-Submitted"] == "auto-replied"
    assert str(reply["From"]) == f"Claw <{w.bot}>" and reply["To"] == w.owner
    html = reply.get_body(preferencelist=("html",))
    assert html is not None and "echo: hello there" in html.get_content()
    assert [s.login for s in w.smtp.sent if w.owner in s.rcpt_tos] == [w.bot]  # SMTP AUTH as the configured account
    # answering the reply: the quoted history never reaches the model, the thread goes on, Re: once
    second_id = w.mail(w.owner, "and **Saturday**?", answering=reply)
    second = w.wait_replies(w.owner, 2)[1]
    assert user_texts(fake_model.requests[-1])[-1] == "and **Saturday**?"
    assert second["Subject"] == "Re: Plans for Friday"
    assert second["In-Reply-To"] == second_id
    assert second["References"].split() == [first_id, reply["Message-ID"], second_id]


def test_a_multi_step_task_by_mail(mail_daemon, mail_world: MailWorld, fake_model: FakeAnthropic) -> None:
    daemon = mail_daemon()
    w = mail_world
    (daemon.workspace / "notes.txt").write_text("buy milk\ncall Bob\n")
    fake_model.enqueue(tool_use("list_dir", {"path": "."}), tool_use("read_file", {"path": "notes.txt"}),
                       text("You have **2 notes**: buy milk, call Bob."))
    w.mail(w.owner, "what is in my notes?")
    (reply,) = w.wait_replies(w.owner, 1)
    assert plain(reply).strip() == "You have 2 notes: buy milk, call Bob."  # the text part reads as text
    assert "<strong>2 notes</strong>" in reply.get_body(preferencelist=("html",)).get_content()
    results = [b for r in fake_model.requests for m in r["messages"] if m["role"] == "user"
               and isinstance(m["content"], list) for b in m["content"] if b.get("type") == "tool_result"]
    assert any("notes.txt" in str(b["content"]) for b in results)
    assert any("call Bob" in str(b["content"]) for b in results)


def test_a_risky_tool_is_approved_by_mail_from_the_owner_only(mail_daemon, mail_world: MailWorld,
                                                              fake_model: FakeAnthropic) -> None:
    daemon = mail_daemon()
    w = mail_world
    fake_model.enqueue(tool_use("exec", {"argv": ["touch", "approved.txt"]}), text("Created approved.txt."))
    w.mail(w.owner, "make a file")
    (prompt,) = w.wait_replies(w.owner, 1)
    found = re.search(r"approve (\S+)", plain(prompt))
    assert found, plain(prompt)
    approval_id = found.group(1).strip("`*")
    assert "touch approved.txt" in plain(prompt) and not (daemon.workspace / "approved.txt").exists()
    # an allowed guest answering with the id is refused, the tool does not run
    w.mail(w.friend, f"approve {approval_id}")
    (refusal,) = w.wait_replies(w.friend, 1)
    assert "owner" in plain(refusal).lower()
    assert not (daemon.workspace / "approved.txt").exists()
    # the owner answers the prompt mail: the quoted prompt below the answer is ignored
    w.mail(w.owner, f"approve {approval_id}", answering=prompt)
    wait_until(lambda: "Created approved.txt." in w.texts(w.owner), "the run's answer after the approval")
    assert (daemon.workspace / "approved.txt").exists()


def test_a_cron_jobs_result_is_mailed(mail_daemon, mail_world: MailWorld, fake_model: FakeAnthropic) -> None:
    mail_daemon()
    w = mail_world
    fake_model.enqueue_for("remind me to stretch",
                           tool_use("cron", {"action": "add", "message": "Remind the user to stretch", "at": "+1s"}),
                           text("Sure, I will remind you."))
    fake_model.enqueue_for("Remind the user to stretch", text("Time to **stretch**!"))
    w.mail(w.owner, "remind me to stretch in a second")
    wait_until(lambda: "Time to stretch!" in w.texts(w.owner), "the cron job's result by mail",
               describe=w.describe)
    assert w.texts(w.owner)[0] == "Sure, I will remind you."
    result = w.replies(w.owner)[-1]
    assert result["Auto-Submitted"] == "auto-replied" and result["To"] == w.owner


def test_kill_during_a_burst_of_fifty_mails_answers_each_exactly_once(mail_daemon, mail_world: MailWorld,
                                                                      fake_model: FakeAnthropic) -> None:
    daemon = mail_daemon()
    w = mail_world
    w.mail(w.owner, "warm up")
    w.wait_replies(w.owner, 1)
    texts = [f"burst mail {i}" for i in range(50)]
    for body in texts[:25]:
        w.mail(w.owner, body)
    wait_until(lambda: len(w.replies(w.owner)) >= 6, "a few of the burst answered before the kill")
    daemon.kill()  # SIGKILL in the middle of the burst
    for body in texts[25:]:
        w.mail(w.owner, body)
    daemon.start()
    wait_until(lambda: len(w.replies(w.owner)) >= 51, "all 50 burst mails answered after the restart", timeout=180)
    wait_past(RESEND_WINDOW)
    # One answer per mail: one Message-ID per answered text. The kill can land after the SMTP server took
    # an answer but before its OK reached the daemon; that answer is then sent again with the same
    # Message-ID, which mail clients show once (the kit records the send only once it is confirmed).
    ids: dict[str, set[str]] = {}
    for m in w.replies(w.owner):
        ids.setdefault(plain(m).strip(), set()).add(str(m["Message-ID"]))
    assert sorted(ids) == sorted(["echo: warm up"] + [f"echo: {body}" for body in texts])
    assert all(len(found) == 1 for found in ids.values()), {t: f for t, f in ids.items() if len(f) > 1}
    assert len(w.replies(w.owner)) <= 52  # at most the one answer in flight at the kill went out twice


def test_auto_replies_and_bulk_mail_are_never_answered(mail_daemon, mail_world: MailWorld) -> None:
    mail_daemon()
    w = mail_world
    # the friend's mailbox answers everything with an out-of-office notice (RFC 3834 style)
    w.smtp.auto_responders[w.friend] = {"Auto-Submitted": "auto-replied"}
    w.mail(w.friend, "ping")
    w.wait_replies(w.friend, 1)
    wait_until(lambda: any("Out of office" in str(m["Subject"]) for m in w.dovecot.messages(w.bot)),
               "the out-of-office notice in the bot's inbox")
    # an older-style responder (Precedence only), list mail, a bounce: none is answered either
    w.mail(w.friend, "I am away", headers={"Precedence": "bulk"})
    w.mail(w.friend, "list digest", headers={"List-Id": "<team.lists.example.test>"})
    w.mail(w.friend, "unsubscribe here", headers={"List-Unsubscribe": "<mailto:off@example.test>"})
    w.mail(w.friend, "vacation", headers={"Auto-Submitted": "auto-generated"})
    marker = w.mail(w.friend, "are you there?")  # taken after all of the above
    wait_until(lambda: len(w.replies(w.friend)) >= 2, "the marker mail answered")
    wait_past(RESEND_WINDOW)
    replies = w.replies(w.friend)
    assert [plain(m).strip() for m in replies] == ["echo: ping", "echo: are you there?"]
    assert replies[1]["In-Reply-To"] == marker


def test_a_stranger_gets_no_answer_at_all(mail_daemon, mail_world: MailWorld, fake_model: FakeAnthropic) -> None:
    daemon = mail_daemon()
    w = mail_world
    w.mail(w.stranger, "hello, who are you?")
    w.mail(w.owner, "marker")
    w.wait_replies(w.owner, 1)
    wait_past(RESEND_WINDOW)
    assert w.replies(w.stranger) == []
    assert all("who are you" not in " ".join(user_texts(r)) for r in fake_model.requests)
    assert w.stranger in daemon.log_text()  # logged as not answered, for the owner to see


def test_a_renumbered_mailbox_answers_only_new_mail(mail_daemon, mail_world: MailWorld) -> None:
    daemon = mail_daemon()
    w = mail_world
    w.mail(w.owner, "before")
    w.wait_replies(w.owner, 1)
    daemon.terminate()
    w.dovecot.new_uidvalidity(w.bot)
    w.mail(w.owner, "while it was down")
    daemon.start()
    wait_until(lambda: len(w.replies(w.owner)) >= 2, "the mail sent while the daemon was down")
    wait_past(RESEND_WINDOW)
    assert w.texts(w.owner) == ["echo: before", "echo: while it was down"]
    assert "UIDVALIDITY" in daemon.log_text()


def test_mail_already_there_on_first_start_is_not_answered(mail_daemon, mail_world: MailWorld) -> None:
    w = mail_world
    w.mail(w.owner, "an old mail from before the agent")
    wait_until(lambda: len(w.dovecot.messages(w.bot)) == 1, "the old mail in the inbox")
    delivered = int(time.time())
    # INTERNALDATE has whole seconds and a mail of the daemon's starting second counts as new
    wait_until(lambda: int(time.time()) > delivered, "the next second")
    mail_daemon()
    w.mail(w.owner, "the first new one")
    w.wait_replies(w.owner, 1)
    wait_past(RESEND_WINDOW)
    assert w.texts(w.owner) == ["echo: the first new one"]


def test_the_password_never_appears_in_the_log(mail_daemon, mail_world: MailWorld) -> None:
    daemon = mail_daemon()
    w = mail_world
    w.mail(w.owner, "hi")
    w.wait_replies(w.owner, 1)
    assert w.dovecot.passwords[w.bot] not in daemon.log_text()


def test_pairing_where_enabled_mails_a_code_and_the_owner_admits(mail_daemon, mail_world: MailWorld,
                                                                 fake_model: FakeAnthropic) -> None:
    daemon = mail_daemon(dm_policy="pairing", pairing_check_seconds=0.2)
    w = mail_world
    w.mail(w.stranger, "hi, may I use you?")
    (code_mail,) = w.wait_replies(w.stranger, 1)
    code = re.search(r"\b([A-Z2-9]{8})\b", plain(code_mail)).group(1)
    assert "clawgate pairing approve email" in plain(code_mail) and fake_model.requests == []
    approved = daemon.cli("pairing", "approve", "email", code)
    assert approved.returncode == 0, approved.stderr
    w.wait_replies(w.stranger, 2)  # told they are approved
    w.mail(w.stranger, "now can we talk?")
    wait_until(lambda: "echo: now can we talk?" in w.texts(w.stranger), "the paired sender answered")


def test_send_file_arrives_as_an_attachment_in_the_thread(mail_daemon, mail_world: MailWorld,
                                                          fake_model: FakeAnthropic) -> None:
    daemon = mail_daemon()
    w = mail_world
    (daemon.workspace / "invoice.pdf").write_bytes(b"%PDF-1.4 not really\n" * 20)
    fake_model.enqueue(tool_use("send_file", {"path": "invoice.pdf", "caption": "The invoice."}), text("Attached."))
    asked = w.mail(w.owner, "send me the invoice", subject="Invoice")
    mails = w.wait_replies(w.owner, 2)
    [with_file] = [m for m in mails if any(True for _ in m.iter_attachments())]
    [attachment] = list(with_file.iter_attachments())
    assert attachment.get_filename() == "invoice.pdf" and attachment.get_content_type() == "application/pdf"
    assert attachment.get_content() == b"%PDF-1.4 not really\n" * 20
    assert plain(with_file).strip() == "The invoice."
    assert with_file["In-Reply-To"] == asked and with_file["Subject"] == "Re: Invoice"
    assert any(plain(m).strip() == "Attached." for m in mails)


def test_a_local_relay_without_auth_sends_the_answers(mail_daemon, mail_world: MailWorld) -> None:
    w = mail_world
    provider, w.smtp = w.smtp, SmtpServer(w.dovecot).start()  # a relay that offers no AUTH
    try:
        mail_daemon(smtp_auth=False)
        w.mail(w.owner, "through the relay")
        (reply,) = w.wait_replies(w.owner, 1)
        assert plain(reply).strip() == "echo: through the relay"
        assert w.smtp.logins == [] and [s.login for s in w.smtp.sent if w.owner in s.rcpt_tos] == [None]
    finally:
        w.smtp.stop()
        w.smtp = provider  # the fixture stops its own


def test_a_refused_smtp_login_is_one_line_naming_the_fix_and_not_retried(mail_daemon, mail_world: MailWorld) -> None:
    daemon = mail_daemon(smtp_password="not-the-password")
    w = mail_world
    w.mail(w.owner, "will you answer?")
    wait_until(lambda: "refused the login" in daemon.log_text(), "the refused login in the log", describe=w.describe)
    wait_past(RESEND_WINDOW * 3)
    # one SMTP session tried to log in (once per mechanism the server offers): a refusal is not retried
    assert len(w.smtp.login_sessions) == 1 and set(w.smtp.logins) == {w.bot} and w.replies(w.owner) == []
    lines = [line for line in daemon.log_text().splitlines() if "refused the login" in line]
    assert len(lines) == 1 and "smtp_password" in lines[0], lines
    assert w.dovecot.passwords[w.bot] not in daemon.log_text()


def test_a_refused_imap_login_fails_the_channel_with_one_line_and_no_retries(mail_world: MailWorld,
                                                                             fake_model: FakeAnthropic,
                                                                             tmp_path: Path) -> None:
    w = mail_world
    w.settings["password"] = "not-the-password"
    daemon = DaemonProcess(tmp_path / "home", anthropic_url=fake_model.base_url)
    daemon.init()
    with (daemon.home / "config.toml").open("a") as config:
        config.write(w.section())
    w.daemon = daemon.start()
    try:
        wait_until(lambda: "refused the login for" in daemon.log_text(), "the refused IMAP login in the log",
                   describe=w.describe)
        wait_past(3.0)  # the channel runner's first reconnect comes 1 s after a failure: 6 s hold a retry
        refused = [line for line in daemon.log_text().splitlines() if "refused the login for" in line]
        assert len(refused) == 1 and "channels.email.username / password" in refused[0], refused
        attempts = [line for line in w.dovecot.log().splitlines() if "auth failed" in line and w.bot in line]
        assert len(attempts) == 1, attempts
        assert "not-the-password" not in daemon.log_text()
    finally:
        daemon.kill()
