"""One IRC connection: asyncio streams, CAP negotiation, SASL PLAIN or EXTERNAL, NickServ, paced sending.

Why the protocol directly rather than a library: what the channel needs is small (CAP LS 302, SASL
PLAIN, the `account-tag` and `msgid` tags, JOIN, PRIVMSG, PING) and the maintained asyncio libraries
either lack IRCv3 tags and SASL (jaraco's `irc`) or are unmaintained (pydle); a few hundred lines over
asyncio streams keep every byte the bot sends in view (docs/irc.md). One object per account: no
module-level state.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import ssl
import time
from typing import AsyncIterator

from clawgate.channels.irc.protocol import Message, casefold, line, parse

WANTED_CAPS = ("sasl", "account-tag", "message-tags", "account-notify", "extended-join", "server-time")
READ_LIMIT = 64 * 1024  # a line with tags is at most 8 KiB + 512; anything longer is not IRC


class AuthRefused(Exception):
    """The server or services refused our log-in (SASL 904, a wrong server password)."""


class Lost(Exception):
    """The connection closed or went silent, or the server cannot log us in now (services away)."""


class TokenBucket:
    """Flood pacing: `burst` lines at once, then one every 1/`rate` seconds (networks disconnect bots that
    send faster; the usual ircd allows about one line every two seconds after a small burst)."""

    def __init__(self, burst: int, rate: float) -> None:
        self.capacity, self.rate = float(burst), rate
        self.tokens, self.stamp = float(burst), time.monotonic()
        self.lock = asyncio.Lock()

    async def take(self) -> None:
        async with self.lock:
            while True:
                now = time.monotonic()
                self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.rate)
                self.stamp = now
                if self.tokens >= 1:
                    self.tokens -= 1
                    return
                await asyncio.sleep((1 - self.tokens) / self.rate)


class IrcConnection:
    def __init__(self, host: str, port: int, *, tls: bool, tls_verify: bool, ca_file: str | None, nick: str,
                 username: str, realname: str, sasl_username: str | None, sasl_password: str | None, server_password: str | None,
                 burst: int, rate: float, timeout: float, log: logging.Logger | logging.LoggerAdapter,  # type: ignore[type-arg]
                 certfile: str | None = None, keyfile: str | None = None) -> None:
        self.host, self.port, self.tls, self.tls_verify, self.ca_file = host, port, tls, tls_verify, ca_file
        self.wanted_nick, self.nick, self.username, self.realname = nick, nick, username, realname
        self.sasl_username, self.sasl_password, self.server_password = sasl_username, sasl_password, server_password
        self.timeout, self.log = timeout, log
        self.certfile, self.keyfile = certfile, keyfile
        # PLAIN with a password; EXTERNAL with a client certificate (the server vouches for its fingerprint)
        self.mechanism = "PLAIN" if sasl_password else "EXTERNAL" if certfile else None
        self.bucket = TokenBucket(burst, rate)
        self.caps: set[str] = set()
        self.account: str | None = None  # the account we are logged in as (900 RPL_LOGGEDIN)
        self.prefix = ""  # our own nick!user@host as others see it (learnt from our JOIN echo)
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.pending: list[Message] = []  # read while registering, handed to the caller after

    # -- the wire -----------------------------------------------------------------------------
    async def open(self) -> None:
        context: ssl.SSLContext | None = None
        if self.tls:
            context = ssl.create_default_context(cafile=self.ca_file)
            if not self.tls_verify:
                context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
            if self.certfile:
                try:
                    context.load_cert_chain(self.certfile, self.keyfile)
                except (OSError, ssl.SSLError) as exc:
                    raise AuthRefused(f"the client certificate {self.certfile} could not be loaded "
                                      f"({getattr(exc, 'strerror', None) or exc}): check tls_certfile / tls_keyfile "
                                      "(PEM, the key unencrypted)") from None
        self.reader, self.writer = await asyncio.wait_for(
            asyncio.open_connection(self.host, self.port, ssl=context, limit=READ_LIMIT), self.timeout)

    async def send(self, raw: str, *, paced: bool = True) -> None:
        """One line; paced lines wait for the token bucket (protocol replies like PONG do not)."""
        if self.writer is None or self.writer.is_closing():
            raise Lost("not connected")
        if paced:
            await self.bucket.take()
        self.writer.write(raw.encode() + b"\r\n")
        await self.writer.drain()

    async def read(self, timeout: float | None = None) -> Message:
        if self.reader is None:
            raise Lost("not connected")
        while True:
            try:
                raw = await asyncio.wait_for(self.reader.readline(), timeout)
            except (ConnectionError, ValueError) as exc:  # ValueError: a line over READ_LIMIT
                raise Lost(f"{type(exc).__name__}: {exc}") from None
            if not raw:
                raise Lost("the server closed the connection")
            message = parse(raw.decode("utf-8", "replace"))
            if message is None:
                continue
            if message.command == "PING":
                await self.send(line("PONG", *message.params), paced=False)
                continue
            return message

    async def close(self, reason: str = "") -> None:
        writer, self.writer, self.reader = self.writer, None, None
        if writer is None:
            return
        try:
            if reason and not writer.is_closing():
                writer.write(line("QUIT", reason).encode() + b"\r\n")
            writer.close()
            await asyncio.wait_for(writer.wait_closed(), 5)
        except (OSError, TimeoutError, ssl.SSLError):
            pass

    # -- registration -------------------------------------------------------------------------
    async def register(self) -> None:
        """CAP LS 302, REQ what we use, SASL (PLAIN or EXTERNAL) when configured, NICK/USER, up to 001 (welcome)."""
        deadline = time.monotonic() + self.timeout
        if self.server_password:
            await self.send(line("PASS", self.server_password), paced=False)
        await self.send("CAP LS 302", paced=False)
        await self.send(line("NICK", self.nick), paced=False)
        await self.send(line("USER", self.username, "0", "*", self.realname), paced=False)
        offered: dict[str, str] = {}  # capability -> its value (sasl=PLAIN,EXTERNAL)
        while True:
            message = await self.read(max(1.0, deadline - time.monotonic()))
            sub = message.param(1).upper()
            if message.command == "CAP" and sub == "LS":
                offered.update(item.partition("=")[::2] for item in message.params[-1].split())
                if message.param(2) == "*":  # more LS lines follow
                    continue
                wanted = [cap for cap in WANTED_CAPS if cap in offered]
                if self.mechanism and "sasl" not in offered:
                    # services split from the server take SASL away for a while: retried, the fix named
                    raise Lost(f"{self.host} offers no SASL now (services away?); if it never does, "
                               "log in with nickserv_password instead")
                mechanisms = offered.get("sasl", "")
                if self.mechanism and mechanisms and self.mechanism not in mechanisms.upper().split(","):
                    raise AuthRefused(f"{self.host} does not offer SASL {self.mechanism} (only {mechanisms}): "
                                      + ("use sasl_password" if self.mechanism == "EXTERNAL" else "use tls_certfile"))
                if wanted:
                    await self.send(line("CAP", "REQ", " ".join(wanted)), paced=False)
                else:
                    await self.send("CAP END", paced=False)
            elif message.command == "CAP" and sub == "ACK":
                self.caps |= set(message.params[-1].split())
                if "sasl" in self.caps and self.mechanism:
                    await self.send(line("AUTHENTICATE", self.mechanism), paced=False)
                else:
                    await self.send("CAP END", paced=False)
            elif message.command == "CAP" and sub == "NAK":
                await self.send("CAP END", paced=False)
            elif message.command == "AUTHENTICATE" and message.param(0) == "+" and self.mechanism == "EXTERNAL":
                # the account is the one the certificate's fingerprint was added to: nothing to name
                await self.send("AUTHENTICATE +", paced=False)
            elif message.command == "AUTHENTICATE" and message.param(0) == "+":
                user = self.sasl_username or self.wanted_nick
                token = base64.b64encode(f"{user}\0{user}\0{self.sasl_password}".encode()).decode()
                for start in range(0, len(token), 400):
                    await self.send(line("AUTHENTICATE", token[start:start + 400]), paced=False)
                if len(token) % 400 == 0:
                    await self.send("AUTHENTICATE +", paced=False)
            elif message.command == "900":
                self.account = message.param(2)
            elif message.command == "903":
                await self.send("CAP END", paced=False)
            elif message.command == "908":  # RPL_SASLMECHS before the 904: what the server offers instead
                offered["sasl"] = message.param(1)
            elif message.command in ("902", "904", "905", "906"):
                if self.mechanism == "EXTERNAL":
                    raise AuthRefused(f"{self.host} refused the SASL EXTERNAL log-in by the certificate {self.certfile}: "
                                      f"{message.params[-1]} (add its fingerprint to the bot's account: NickServ CERT ADD"
                                      + (f"; the server offers {offered['sasl']})" if offered.get("sasl") else ")"))
                raise AuthRefused(f"{self.host} refused the SASL log-in as {self.sasl_username or self.wanted_nick}: "
                                  f"{message.params[-1]}")
            elif message.command in ("432", "433", "436"):  # nick taken or invalid: take another one for now
                if message.command == "432":
                    raise AuthRefused(f"{self.host} refused the nick {self.nick!r}: {message.params[-1]}")
                self.nick = (self.nick + "_")[:30]
                await self.send(line("NICK", self.nick), paced=False)
            elif message.command == "464":
                raise AuthRefused(f"{self.host} refused the server password")
            elif message.command == "ERROR":
                raise Lost(f"{self.host} closed the connection: {message.params[-1] if message.params else ''}")
            elif message.command == "001":
                self.nick = message.param(0) or self.nick
                return
            else:
                self.pending.append(message)

    async def identify(self, password: str) -> bool:
        """NickServ IDENTIFY (networks without SASL); True once the server says we are logged in (900)."""
        # the account named: our nick may be `nick_` while another connection holds the nick
        account = self.sasl_username or self.wanted_nick
        await self.send(line("PRIVMSG", "NickServ", f"IDENTIFY {account} {password}"), paced=False)
        deadline = time.monotonic() + min(self.timeout, 15)
        while time.monotonic() < deadline:
            try:
                message = await self.read(max(0.5, deadline - time.monotonic()))
            except TimeoutError:
                break
            if message.command == "900":
                self.account = message.param(2)
                return True
            self.pending.append(message)
        return False

    async def join(self, channels: list[str]) -> list[str]:
        """JOIN each channel; the ones the server refused, with why (banned, invite-only, key)."""
        for channel in channels:
            await self.send(line("JOIN", channel))
        waiting, refused = {casefold(c) for c in channels}, []
        deadline = time.monotonic() + self.timeout
        while waiting and time.monotonic() < deadline:
            try:
                message = await self.read(max(0.5, deadline - time.monotonic()))
            except TimeoutError:
                break
            if message.command == "JOIN" and casefold(message.nick) == casefold(self.nick):
                self.prefix = message.prefix
                waiting.discard(casefold(message.param(0)))
            elif message.command in ("403", "405", "471", "473", "474", "475", "477"):
                waiting.discard(casefold(message.param(1)))
                refused.append(f"{message.param(1)}: {message.params[-1]}")
            else:
                self.pending.append(message)
        return refused + sorted(waiting)

    async def messages(self, idle_seconds: float) -> AsyncIterator[Message]:
        """Every message from now on (those read while registering first); a PING of ours when the server is
        quiet `idle_seconds`, and Lost when it stays quiet that long again."""
        while self.pending:
            yield self.pending.pop(0)
        pinged = False
        while True:
            try:
                message = await self.read(idle_seconds)
            except TimeoutError:
                if pinged:
                    raise Lost(f"{self.host} stopped answering (no PONG in {idle_seconds:.0f} s)") from None
                await self.send(line("PING", "clawgate"), paced=False)
                pinged = True
                continue
            pinged = False
            if message.command == "ERROR":
                raise Lost(f"{self.host} closed the connection: {message.params[-1] if message.params else ''}")
            yield message


__all__ = ["AuthRefused", "IrcConnection", "Lost", "TokenBucket", "WANTED_CAPS"]
