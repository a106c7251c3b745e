"""A real IRC network for the IRC channel's tests: InspIRCd with Anope services, on loopback ports.

Why these two: Debian packages no IRC server with accounts built in (its `ergo` is a chemistry
program), and accounts are what the channel's security rests on. InspIRCd 3 gives SASL (forwarded to
services), the IRCv3 `account-tag`, `msgid` and `account-notify`; Anope's NickServ keeps the accounts
(REGISTER, IDENTIFY, SASL PLAIN, and SASL EXTERNAL by a client certificate's fingerprint: m_sslinfo
on the TLS port, Anope's ns_cert), in a flat file in the temp dir, so they survive a restart. Both run
from configs generated here, linked over a loopback server port; `make test` installs the packages
(`make irc-server`), otherwise the tests fail with one line naming them.

`IrcUser` is the tests' own second client: a plain socket speaking the protocol line by line.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest

from tests import lifeline
from tests.email_servers import self_signed
from tests.harness import free_port
from tests.waiting import wait_until

MISSING = ("{what} not found: install the Debian packages inspircd and anope "
           "(`make test` installs them when run as root, or: apt-get install inspircd anope)")
LINK_PASSWORD = "link-secret-for-tests"

INSPIRCD_CONF = """\
<server name="irc.test" description="clawgate test network" network="TestNet">
<admin name="tests" nick="tests" email="tests@irc.test">
<bind address="127.0.0.1" port="{port}" type="clients">
<bind address="127.0.0.1" port="{link_port}" type="servers">
<module name="ssl_gnutls">
<sslprofile name="tests" provider="gnutls" certfile="{root}/cert.pem" keyfile="{root}/key.pem" dhfile=""
            hash="sha256" requestclientcert="yes">
<module name="sslinfo">
<bind address="127.0.0.1" port="{tls_port}" type="clients" sslprofile="tests">
<connect name="main" allow="*" timeout="60" pingfreq="120" hardsendq="1M" softsendq="100000" recvq="16000"
         threshold="100000" commandrate="100000" fakelag="off" localmax="1000" globalmax="1000"
         useident="no" limit="5000" modes="" resolvehostnames="no">
<power diepass="die-{link_port}" restartpass="restart-{link_port}">
<pid file="{root}/inspircd.pid">
<log method="file" type="* -USERINPUT -USEROUTPUT" level="default" target="{root}/inspircd.log">
<options prefixquit="Quit: " allowhalfop="yes" hostintopic="yes" defaultmodes="nt">
<security hidesplits="no" hideulines="no" flatlinks="no" announceinvites="dynamic" maxtargets="20">
<performance netbuffersize="10240" somaxconn="128" softlimit="1024" clonesonconnect="no" quietbursts="yes" nouserdns="yes">
<dns server="127.0.0.1" timeout="1">
<module name="spanningtree">
<module name="services_account">
<module name="hidechans">
<module name="sasl">
<sasl target="services.irc.test" requiressl="no">
<module name="cap">
<module name="ircv3">
<module name="ircv3_accounttag">
<module name="ircv3_msgid">
<module name="ircv3_servertime">
<module name="ircv3_capnotify">
<module name="ircv3_ctctags">
<link name="services.irc.test" ipaddr="127.0.0.1" port="{link_port}" allowmask="127.0.0.0/8"
      sendpass="{password}" recvpass="{password}">
<uline server="services.irc.test" silent="yes">
"""

ANOPE_CONF = """\
define {{ name = "services.host"; value = "services.irc.test" }}
uplink {{ host = "127.0.0.1"; ipv6 = no; ssl = no; port = {link_port}; password = "{password}" }}
serverinfo {{ name = "services.irc.test"; description = "Services"; pid = "{root}/anope.pid"; motd = "{root}/services.motd" }}
module {{ name = "inspircd3"; use_server_side_mlock = yes; use_server_side_topiclock = yes }}
networkinfo {{ networkname = "TestNet"; nicklen = 31; userlen = 10; hostlen = 64; chanlen = 32; modelistsize = 100;
  vhost_chars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-"; allow_undotted_vhosts = false;
  disallow_start_or_end = ".-" }}
options {{ casemap = "rfc1459"; seed = 8157234901; strictpasswords = no; badpasslimit = 100; badpasstimeout = 1h; updatetimeout = 2s;
  expiretimeout = 30m; readtimeout = 5s; warningtimeout = 4h; timeoutcheck = 1s; retrywait = 1s;
  hideprivilegedcommands = yes; hideregisteredcommands = yes }}
include {{ type = "file"; name = "nickserv.conf" }}
log {{ target = "services.log"; logage = 1; admin = "*"; servers = "*"; users = "connect disconnect nick"; other = "*"; rawio = no; debug = no }}
module {{ name = "m_sasl" }}
module {{ name = "help" }}
module {{ name = "db_flatfile"; database = "anope.db"; keepbackups = 1; nobackupokay = yes; fork = no }}
module {{ name = "enc_sha256" }}
"""


def _binary(name: str) -> str:
    found = shutil.which(name) or next((p for p in (f"/usr/sbin/{name}", f"/usr/local/sbin/{name}")
                                        if os.access(p, os.X_OK)), None)
    if found is None:
        pytest.fail(MISSING.format(what=name), pytrace=False)
    return found


def _nickserv_conf() -> str:
    """Debian's NickServ config with what a test network needs: no e-mail, no waiting before REGISTER,
    no renaming of a nick that has not identified (the impostor test keeps its nick)."""
    source = Path("/etc/anope/nickserv.conf")
    if not source.exists():
        pytest.fail(MISSING.format(what="/etc/anope/nickserv.conf"), pytrace=False)
    text = source.read_text()
    for old, new in (("forceemail = yes", "forceemail = no"), ("regdelay = 30s", "regdelay = 0s"),
                     ('defaults = "killprotect ns_secure', 'defaults = "ns_secure')):
        assert old in text, f"/etc/anope/nickserv.conf changed: no {old!r}"
        text = text.replace(old, new)
    return text


class IrcNetwork:
    """InspIRCd + Anope in a temp dir. `restart()` stops both and starts them again on the same ports,
    with the same accounts."""

    def __init__(self) -> None:
        self.inspircd, self.anope = _binary("inspircd"), _binary("anope")
        self.root = Path(tempfile.mkdtemp(prefix="clawgate-irc-"))
        self.root.chmod(0o755)
        self.port, self.link_port, self.tls_port = free_port(), free_port(), free_port()
        self.cert, _ = self_signed(self.root)  # TLS clients connect on tls_port and trust `cert`
        self.procs: list[subprocess.Popen[bytes]] = []
        values = {"root": self.root, "port": self.port, "link_port": self.link_port, "tls_port": self.tls_port,
                  "password": LINK_PASSWORD}
        (self.root / "inspircd.conf").write_text(INSPIRCD_CONF.format(**values))
        (self.root / "services.conf").write_text(ANOPE_CONF.format(**values))
        (self.root / "nickserv.conf").write_text(_nickserv_conf())
        (self.root / "services.motd").write_text("test network\n")
        for sub in ("data", "data/backups", "logs"):
            (self.root / sub).mkdir()
        self.user = "irc" if os.geteuid() == 0 else None  # neither server runs as root
        if self.user is not None:
            entry = pwd.getpwnam(self.user)
            for path in (self.root, *self.root.iterdir(), self.root / "data" / "backups"):
                os.chown(path, entry.pw_uid, entry.pw_gid)

    def _start(self, argv: list[str]) -> subprocess.Popen[bytes]:
        entry = pwd.getpwnam(self.user) if self.user else None
        proc = subprocess.Popen(argv, cwd=self.root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True, user=entry.pw_uid if entry else None,
                                group=entry.pw_gid if entry else None, extra_groups=[] if entry else None)
        lifeline.hold(proc)
        self.procs.append(proc)
        return proc

    def start(self) -> "IrcNetwork":
        self._start([self.inspircd, "--nofork", "--config", str(self.root / "inspircd.conf")])
        wait_until(self._answers, f"InspIRCd on 127.0.0.1:{self.port}", describe=self.log)
        self._start([self.anope, "--nofork", f"--confdir={self.root}", "--config=services.conf",
                     f"--dbdir={self.root / 'data'}", f"--logdir={self.root / 'logs'}",
                     "--modulesdir=/usr/lib/anope"])
        wait_until(self._services_linked, "Anope linked to InspIRCd", describe=self.log)
        return self

    def _answers(self) -> bool:
        for proc in self.procs:
            if proc.poll() is not None:
                raise AssertionError(f"{proc.args[0]} exited with {proc.returncode}\n{self.log()}")
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=2):
                return True
        except OSError:
            return False

    def _services_linked(self) -> bool:
        """NickServ is on the network and the server offers SASL (it does only while services are linked)."""
        self._answers()
        with IrcUser(self, f"probe{time.monotonic_ns() % 100000}") as probe:
            probe.send("CAP LS 302")
            probe.send("WHOIS NickServ")
            lines = probe.wait_for(lambda line: " 318 " in line, "WHOIS NickServ")
            return any(" 311 " in line for line in lines) and any(" LS " in line and "sasl" in line for line in lines)

    def log(self) -> str:
        parts = []
        for name in ("inspircd.log", "logs/services.log"):
            path = self.root / name
            found = sorted(path.parent.glob(path.name + "*"))
            for f in found:
                parts.append(f"--- {f.name}\n" + f.read_text(errors="replace")[-2000:])
        return "\n".join(parts) or "(no logs)"

    def halt(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(15)
        self.procs = []

    def restart(self) -> None:
        self.halt()
        self.start()

    def stop(self) -> None:
        self.halt()
        shutil.rmtree(self.root, ignore_errors=True)

    def register(self, nick: str, password: str, certificate: tuple[Path, Path] | None = None) -> None:
        """An account named `nick` (NickServ REGISTER from a client of that nick). With `certificate` (cert, key)
        the client connects over TLS with it and adds its fingerprint to the account (NickServ CERT ADD, which
        takes only the certificate in use), so it logs in by SASL EXTERNAL from then on."""
        if certificate is None:
            with IrcUser(self, nick) as user:
                user.send(f"PRIVMSG NickServ :REGISTER {password}")
                user.wait_for(lambda line: "NickServ" in line.split(" ", 1)[0] and "registered" in line,
                              f"NickServ to register {nick}")
            return
        context = ssl.create_default_context(cafile=str(self.cert))
        context.load_cert_chain(str(certificate[0]), str(certificate[1]))
        with socket.create_connection(("127.0.0.1", self.tls_port), timeout=60) as raw, \
                context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            said: list[str] = []

            def until(what: str) -> None:
                buffer = b""
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:
                    buffer += tls.recv(65536)
                    *lines, buffer = buffer.split(b"\r\n")
                    for line in (ln.decode("utf-8", "replace") for ln in lines):
                        said.append(line)
                        if line.startswith("PING"):
                            tls.sendall(b"PONG" + line[4:].encode() + b"\r\n")
                        if what in line:
                            return
                raise AssertionError(f"no {what!r} from the server: {said[-10:]}")

            tls.sendall(f"NICK {nick}\r\nUSER {nick} 0 * :{nick}\r\n".encode())
            until(" 001 ")
            tls.sendall(f"PRIVMSG NickServ :REGISTER {password}\r\n".encode())
            until(" 900 ")
            tls.sendall(b"PRIVMSG NickServ :CERT ADD\r\n")
            until("added to")  # "Fingerprint <fp> added to nick <nick>'s certificate list."
            tls.sendall(b"QUIT :bye\r\n")


def client_certificate(folder: Path, name: str) -> tuple[Path, Path]:
    """A self-signed client certificate and its key (openssl CLI): what a bot logs in with by SASL EXTERNAL."""
    cert, key = folder / f"{name}-cert.pem", folder / f"{name}-key.pem"
    openssl = shutil.which("openssl") or "openssl"
    subprocess.run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "2", "-subj", f"/CN={name}"], check=True, capture_output=True, timeout=60)
    return cert, key


@dataclass
class IrcUser:
    """A person on the network: a plain socket client, lines kept in `lines` (read on a thread)."""

    network: IrcNetwork
    nick: str
    password: str | None = None  # SASL PLAIN as the account `nick`
    lines: list[str] = field(default_factory=list)
    on_line: Callable[[str], None] | None = None  # called on the reader thread with each line (the bench's clock)

    def __enter__(self) -> "IrcUser":
        self.sock = socket.create_connection(("127.0.0.1", self.network.port), timeout=30)
        self.sock.settimeout(None)  # the reader waits as long as the person is quiet (a timeout would end it)
        self._stop = False
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        if self.password is not None:
            self.send("CAP REQ :sasl message-tags")
        self.send(f"NICK {self.nick}")
        self.send(f"USER {self.nick} 0 * :{self.nick}")
        if self.password is not None:
            import base64
            self.wait_for(lambda line: " ACK " in line or " NAK " in line, "CAP ACK")
            self.send("AUTHENTICATE PLAIN")
            self.wait_for(lambda line: line.startswith(("AUTHENTICATE +", "AUTHENTICATE :+")), "AUTHENTICATE +")
            token = base64.b64encode(f"{self.nick}\0{self.nick}\0{self.password}".encode()).decode()
            self.send(f"AUTHENTICATE {token}")
            self.wait_for(lambda line: " 903 " in line or " 904 " in line, "SASL")
            assert any(" 903 " in line for line in self.lines), f"SASL refused for {self.nick}: {self.lines[-3:]}"
            self.send("CAP END")
        self.wait_for(lambda line: " 001 " in line, f"{self.nick} registered")
        return self

    def __exit__(self, *_: object) -> None:
        """QUIT and wait for the server to close: the nick is free again once this returns."""
        try:
            self.send("QUIT :bye")
        except OSError:
            pass
        self._reader.join(30)
        self._stop = True
        self.sock.close()

    def _read(self) -> None:
        buffer = b""
        while not self._stop:
            try:
                data = self.sock.recv(65536)
            except OSError:
                return
            if not data:
                return
            buffer += data
            while b"\r\n" in buffer:
                raw, buffer = buffer.split(b"\r\n", 1)
                line = raw.decode("utf-8", "replace")
                if line.startswith("PING"):
                    self.send("PONG" + line[4:])
                self.lines.append(line)
                if self.on_line is not None:
                    self.on_line(line)

    def send(self, line: str) -> None:
        self.sock.sendall(line.encode() + b"\r\n")

    def say(self, target: str, text: str) -> None:
        self.send(f"PRIVMSG {target} :{text}")

    def wait_for(self, match, what: str, timeout: float = 60) -> list[str]:  # type: ignore[no-untyped-def]
        wait_until(lambda: any(match(line) for line in list(self.lines)), what, timeout=timeout,
                   describe=lambda: "\n".join(self.lines[-20:]))
        return list(self.lines)

    def received(self, source: str, target: str | None = None) -> list[str]:
        """The texts of PRIVMSGs from nick `source` (to `target`, default this user)."""
        to = target or self.nick
        out = []
        for line in list(self.lines):
            rest = line.split(" ", 1)[1] if line.startswith("@") else line
            if rest.startswith(f":{source}!") and f" PRIVMSG {to} :" in rest:
                out.append(rest.split(f" PRIVMSG {to} :", 1)[1])
        return out

    def raw_received(self, source: str) -> list[str]:
        return [line for line in list(self.lines) if f":{source}!" in line and " PRIVMSG " in line]

    def join(self, channel: str) -> None:
        self.send(f"JOIN {channel}")
        self.wait_for(lambda line: f" JOIN {channel}" in line or f" JOIN :{channel}" in line, f"{self.nick} in {channel}")
