"""Real mail servers for the email tests: Dovecot (IMAP) and aiosmtpd (SMTP), on loopback ports.

Why real servers: the email channel's hard parts (UIDVALIDITY, IDLE, MIME on the wire, SMTP login)
are the servers' behaviour, which a hand-written fake would only imitate. Dovecot runs from a config
generated in a temp dir (passwd-file users with plain passwords, maildirs in the temp dir, no TLS on
loopback); as root the mail files belong to Dovecot's own `dovecot` user (Dovecot refuses uid 0 for
mail and root for its login processes), otherwise everything runs as the current user.

The SMTP server accepts every message, keeps it in `SmtpServer.messages` and delivers it into the
Dovecot inbox of each recipient that has an account there (IMAP APPEND), so a mail "sent" to the bot
arrives in the bot's mailbox the way a real MTA would put it there.
"""

from __future__ import annotations

import email
import email.policy
import email.utils
import imaplib
import os
import pwd
import re
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from email.message import EmailMessage
from pathlib import Path
from typing import Any, Iterator

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, Envelope, LoginPassword, Session, SMTP

from tests import lifeline
from tests.harness import free_port
from tests.waiting import wait_until

MISSING_DOVECOT = ("Dovecot not found: install the Debian package dovecot-imapd "
                   "(`make test` installs it when run as root, or: apt-get install dovecot-imapd)")

CONFIG = """\
protocols = imap
listen = 127.0.0.1
base_dir = {root}/run
state_dir = {root}/state
log_path = {root}/dovecot.log
{ssl}
disable_plaintext_auth = no
auth_mechanisms = plain login
first_valid_uid = 0
{users}
mail_location = maildir:{root}/mail/%u
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {root}/users/%u
}}
userdb {{
  driver = static
  args = uid={uid} gid={gid} home={root}/mail/%u
}}
service imap-login {{
  inet_listener imap {{
    address = 127.0.0.1
    port = {port}
  }}
  inet_listener imaps {{
    address = 127.0.0.1
    port = {tls_port}
  }}
  chroot =
}}
service anvil {{
  chroot =
}}
"""


def dovecot_binary() -> str:
    """The dovecot executable, or a one-line test failure naming the package."""
    found = shutil.which("dovecot") or next((p for p in ("/usr/sbin/dovecot", "/usr/local/sbin/dovecot")
                                             if os.access(p, os.X_OK)), None)
    if found is None:
        pytest.fail(MISSING_DOVECOT, pytrace=False)
    return found


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:  # the group is gone already
        return


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 / localhost (openssl CLI), used by the TLS servers and trusted by
    the client through channels.email.ca_file."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.fail("openssl not found: install the Debian package openssl", pytrace=False)
    subprocess.run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "2", "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                   check=True, capture_output=True, timeout=60)
    return cert, key


class Dovecot:
    """One Dovecot instance in a temp dir; `add_user` may be called while it runs. With `tls`, STARTTLS
    on `port` and implicit TLS on `tls_port`, with a self-signed certificate (`cert`)."""

    def __init__(self, *, tls: bool = False) -> None:
        self.binary = dovecot_binary()
        self.root = Path(tempfile.mkdtemp(prefix="clawgate-dovecot-"))
        self.root.chmod(0o755)  # the mail user (not us, when we are root) walks through it
        self.port = free_port()
        self.tls_port = free_port() if tls else 0
        self.cert: Path | None = None
        ssl_lines = "ssl = no"
        if tls:
            self.cert, key = self_signed(self.root)
            ssl_lines = f"ssl = yes\nssl_cert = <{self.cert}\nssl_key = <{key}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.passwords: dict[str, str] = {}
        if os.geteuid() == 0:
            mail_user = pwd.getpwnam("dovecot")
            self.uid, self.gid = mail_user.pw_uid, mail_user.pw_gid
            users = ""  # the package's own dovecot / dovenull users run the internal and login processes
        else:
            self.uid, self.gid = os.getuid(), os.getgid()
            name = pwd.getpwuid(self.uid).pw_name
            users = f"default_internal_user = {name}\ndefault_internal_group = {name}\ndefault_login_user = {name}"
        (self.root / "mail").mkdir()
        os.chown(self.root / "mail", self.uid, self.gid)
        (self.root / "users").mkdir()  # one passwd-file per user: a new user is a new file, never a stale cache
        (self.root / "dovecot.conf").write_text(CONFIG.format(root=self.root, users=users, uid=self.uid,
                                                              gid=self.gid, port=self.port, ssl=ssl_lines,
                                                              tls_port=self.tls_port))

    def add_user(self, address: str, password: str) -> None:
        self.passwords[address] = password
        (self.root / "users" / address).write_text(f"{address}:{{PLAIN}}{password}\n")

    def start(self) -> "Dovecot":
        # its own process group: halt() stops the per-connection imap processes along with the master
        self.proc = subprocess.Popen([self.binary, "-F", "-c", str(self.root / "dovecot.conf")],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        lifeline.hold(self.proc)  # dies with pytest, even a SIGKILLed one
        wait_until(self._answers, f"Dovecot to answer on 127.0.0.1:{self.port}", describe=self.log)
        return self

    def _answers(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise AssertionError(f"Dovecot exited with {self.proc.returncode}: "
                                 f"{self.proc.stderr.read().decode(errors='replace') if self.proc.stderr else ''}"
                                 f"\n{self.log()}")
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=2) as sock:
                return sock.recv(64).startswith(b"* OK")
        except OSError:
            return False

    def log(self) -> str:
        path = self.root / "dovecot.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else "(no dovecot.log)"

    def stop(self) -> None:
        self.halt()
        shutil.rmtree(self.root, ignore_errors=True)

    def halt(self) -> None:
        """Stop the server (connections dropped and refused from now on); its files stay.

        SIGTERM goes to the whole process group, as a service manager stops the unit: a client's imap
        process says BYE and closes at once (the master alone would leave it serving for seconds)."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            _signal_group(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                _signal_group(self.proc.pid, signal.SIGKILL)
                self.proc.wait(15)
        _signal_group(self.proc.pid, signal.SIGKILL)  # any process of the group that outlived its master

    # what a test does with a mailbox ------------------------------------------------------------
    def imap(self, address: str) -> imaplib.IMAP4:
        client = imaplib.IMAP4("127.0.0.1", self.port, timeout=30)
        client.login(address, self.passwords[address])
        return client

    def flags_of(self, address: str, message_id: str) -> list[bytes]:
        """The flags of every copy of the message with this Message-ID in INBOX (read-only)."""
        client = self.imap(address)
        try:
            client.select("INBOX", readonly=True)
            _, data = client.uid("SEARCH", "HEADER", "Message-ID", message_id)
            flags = []
            for uid in data[0].split():
                _, parts = client.uid("FETCH", uid.decode(), "(FLAGS)")
                flags.append(parts[0])
            return flags
        finally:
            client.logout()

    def append(self, address: str, raw: bytes, mailbox: str = "INBOX") -> None:
        client = self.imap(address)
        try:
            status, detail = client.append(mailbox, None, None, raw)
            assert status == "OK", f"APPEND into {address}'s {mailbox}: {detail}"
        finally:
            client.logout()

    def messages(self, address: str, mailbox: str = "INBOX") -> list[EmailMessage]:
        """Every message in the mailbox, oldest first, parsed (read-only: flags untouched)."""
        client = self.imap(address)
        try:
            client.select(mailbox, readonly=True)
            _, data = client.uid("SEARCH", "ALL")
            found: list[EmailMessage] = []
            for uid in data[0].split():
                _, parts = client.uid("FETCH", uid.decode(), "(BODY.PEEK[])")
                found.append(parse(parts[0][1]))
            return found
        finally:
            client.logout()

    def new_uidvalidity(self, address: str) -> int:
        """Give INBOX a new UIDVALIDITY (doveadm), as a server does after its index is rebuilt."""
        client = self.imap(address)
        try:
            _, data = client.status("INBOX", "(UIDVALIDITY)")
            current = int(data[0].decode().rsplit("UIDVALIDITY", 1)[1].strip(" )"))
        finally:
            client.logout()
        doveadm = shutil.which("doveadm") or str(Path(self.binary).with_name("doveadm"))
        done = subprocess.run([doveadm, "-c", str(self.root / "dovecot.conf"), "mailbox", "update", "-u", address,
                               "--uid-validity", str(current + 1), "INBOX"], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, f"doveadm mailbox update: {done.stderr}"
        return current + 1


def parse(raw: bytes) -> EmailMessage:
    return email.message_from_bytes(raw, policy=email.policy.default)  # type: ignore[return-value]


@dataclass
class Sent:
    """One message the SMTP server accepted."""

    mail_from: str
    rcpt_tos: list[str]
    raw: bytes
    login: str | None

    @property
    def message(self) -> EmailMessage:
        return parse(self.raw)


class _Deliver:
    """aiosmtpd handler: record, then put the message into each recipient's Dovecot inbox."""

    def __init__(self, server: "SmtpServer") -> None:
        self.server = server

    async def handle_DATA(self, smtp: SMTP, session: Session, envelope: Envelope) -> str:
        login = session.auth_data if session.authenticated else None
        if login is not None:  # a client that logged in: the daemon (people in the tests send without AUTH)
            self.server.attempts.append(time.monotonic())
        raw = envelope.original_content or b""
        if login is not None and self.server.fail_next:
            self.server.refused.append(Sent(envelope.mail_from or "", list(envelope.rcpt_tos), raw, login))
            return self.server.fail_next.pop(0)
        self.server.record(Sent(envelope.mail_from or "", list(envelope.rcpt_tos), raw, login))
        return "250 OK"


class SmtpServer:
    """aiosmtpd on a loopback port; with `users`, AUTH LOGIN/PLAIN is offered (without TLS: loopback only)."""

    def __init__(self, dovecot: Dovecot | None = None, users: dict[str, str] | None = None, *,
                 tls: str | None = None, cert: tuple[Path, Path] | None = None, authserv_id: str = "",
                 auth_required: bool = False) -> None:
        """`tls`: None (plain), "starttls" (required before AUTH and MAIL) or "tls" (implicit), with `cert`.
        `authserv_id`: mail put into a Dovecot inbox gets this server's Authentication-Results on top
        (`authentication_results`), as a receiving MTA with SPF and DMARC checks writes it.
        Without `users` no AUTH is offered (a local relay); `auth_required`: MAIL before AUTH is refused
        with 530, as a provider's submission server does."""
        self.dovecot = dovecot
        self.authserv_id = authserv_id
        self.users = users or {}
        self.port = free_port()
        self.sent: list[Sent] = []
        # from clients that logged in (the daemon): the time of every DATA, refused ones too, and the
        # answers ("550 ...") to give the next ones instead of 250
        self.attempts: list[float] = []
        self.fail_next: list[str] = []
        self.refused: list[Sent] = []  # the mails fail_next refused
        self.logins: list[str] = []  # every AUTH attempt's user name, refused ones too
        self.login_sessions: set[int] = set()  # the SMTP sessions that tried AUTH (a client may try each mechanism)
        # address -> extra headers: mail to that address is answered at once by an out-of-office
        # responder that sends from it (what a vacation notice or another bot does)
        self.auto_responders: dict[str, dict[str, str]] = {}
        self._lock = threading.Lock()
        kwargs: dict[str, Any] = {}
        if self.users:
            kwargs.update(authenticator=self._authenticate, auth_require_tls=tls == "starttls",
                          auth_required=auth_required)
        if tls is not None:
            assert cert is not None, "a TLS SMTP server needs cert=(cert.pem, key.pem)"
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(str(cert[0]), str(cert[1]))
            if tls == "starttls":
                kwargs.update(tls_context=context, require_starttls=True)
            else:
                kwargs.update(ssl_context=context)
        self.controller = Controller(_Deliver(self), hostname="127.0.0.1", port=self.port, **kwargs)

    def _authenticate(self, server: SMTP, session: Session, envelope: Envelope, mechanism: str,
                      auth_data: Any) -> AuthResult:
        if isinstance(auth_data, LoginPassword):
            user, password = auth_data.login.decode(), auth_data.password.decode()
            self.logins.append(user)
            self.login_sessions.add(id(session))
            if self.users.get(user) == password:
                return AuthResult(success=True, auth_data=user)
        return AuthResult(success=False, handled=False)

    def record(self, sent: Sent) -> None:
        with self._lock:
            self.sent.append(sent)
        if self.dovecot is not None:
            for rcpt in sent.rcpt_tos:
                if rcpt in self.dovecot.passwords:
                    self.dovecot.append(rcpt, self.as_received(sent))
        for rcpt in sent.rcpt_tos:
            if rcpt in self.auto_responders and sent.mail_from:
                self.record(Sent(rcpt, [sent.mail_from], self._out_of_office(rcpt, sent), None))

    def as_received(self, sent: Sent) -> bytes:
        """The message as the receiving server stores it: with `authserv_id`, its verdict on top. Like
        a server that does not strip them, copies the sender wrote themselves stay below."""
        if not self.authserv_id:
            return sent.raw
        line = f"Authentication-Results: {self.authserv_id}; {authentication_results(sent.mail_from, sent.raw)}\r\n"
        return line.encode() + sent.raw

    def _out_of_office(self, responder: str, original: Sent) -> bytes:
        asked = original.message
        answer = EmailMessage()
        answer["From"] = responder
        answer["To"] = original.mail_from
        answer["Subject"] = f"Out of office: {asked['Subject']}"
        answer["Message-ID"] = email.utils.make_msgid(domain="example.test")
        if asked["Message-ID"]:
            answer["In-Reply-To"] = asked["Message-ID"]
        for name, value in self.auto_responders[responder].items():
            answer[name] = value
        answer.set_content("I am away until Monday.")
        return answer.as_bytes()

    def to(self, address: str) -> list[EmailMessage]:
        with self._lock:
            return [s.message for s in self.sent if address in s.rcpt_tos]

    def start(self) -> "SmtpServer":
        self.controller.start()
        return self

    def stop(self) -> None:
        self.controller.stop()


_FROM_LINE = re.compile(rb"^From:[ \t]*(.*(?:\r?\n[ \t].*)*)", re.IGNORECASE | re.MULTILINE)


def authentication_results(mail_from: str, raw: bytes) -> str:
    """What a receiving server's SPF and DMARC checks write for this mail (RFC 8601 results): SPF passes
    for the envelope sender's domain (every test host may send for its domain), and DMARC passes when
    the From header's domain is that domain. The From domain is read as DMARC verifiers read it: the
    domain of the address in angle brackets, else after the last '@'. The envelope sender is copied into
    a comment, as servers do ("domain of ... designates ...")."""
    envelope_domain = mail_from.rpartition("@")[2].lower()
    head = raw.split(b"\r\n\r\n", 1)[0].split(b"\n\n", 1)[0]
    froms = [m.group(1).decode("utf-8", "replace") for m in _FROM_LINE.finditer(head)]
    spf = (f"spf=pass (domain of {mail_from} designates 127.0.0.1 as permitted sender) "
           f"smtp.mailfrom={envelope_domain}")
    if len(froms) != 1:
        return f"{spf}; dmarc=permerror"
    angle = re.findall(r"<[^<>]*@([^<>@\s]+)>", froms[0])
    bare = re.findall(r"@([^\s<>@,;]+)", froms[0])
    from_domain = (angle[-1] if angle else bare[-1] if bare else "").lower()
    verdict = "pass" if from_domain and from_domain == envelope_domain else "fail"
    return f"{spf}; dmarc={verdict} (p=reject) header.from={from_domain or 'unknown'}"


def send(smtp: SmtpServer, raw: bytes | EmailMessage, mail_from: str, to: list[str]) -> None:
    """Hand one message to the SMTP server as a mail client would (smtplib, the standard library's)."""
    import smtplib

    data = raw.as_bytes() if isinstance(raw, EmailMessage) else raw
    with smtplib.SMTP("127.0.0.1", smtp.port, timeout=30) as client:
        client.sendmail(mail_from, to, data)


@pytest.fixture(scope="session")
def dovecot() -> Iterator[Dovecot]:
    server = Dovecot().start()
    yield server
    server.stop()


_counter = iter(range(1, 1_000_000))


def unique_address(local: str) -> str:
    """A fresh mailbox name per test on the shared Dovecot (tests never see each other's mail)."""
    return f"{local}{next(_counter)}-{os.getpid()}@example.test"


def wait_mail(smtp: SmtpServer, address: str, count: int = 1, *, timeout: float = 60.0) -> list[EmailMessage]:
    """Wait until `address` has been sent at least `count` messages; return them all."""
    wait_until(lambda: len(smtp.to(address)) >= count, f"{count} mail(s) to {address}", timeout=timeout,
               describe=lambda: f"sent so far: {[(s.rcpt_tos, s.message['Subject']) for s in smtp.sent]}")
    return smtp.to(address)


