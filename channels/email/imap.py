"""The bot's IMAP mailbox: log in, find mail after a UID, fetch it, wait for more (IDLE or polling).

Why imapclient on one worker thread: it is the complete, well-kept IMAP client (STARTTLS, IDLE, UIDs),
and it is blocking; every call for one mailbox runs on that mailbox's own single thread, so the
connection is never used by two threads at once and the event loop never blocks. A wait in IDLE
checks a stop flag every second, so disconnect() returns promptly.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import socket
import ssl
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, TypeVar

from imapclient import IMAPClient
from imapclient.exceptions import IMAPClientError, LoginError

from .settings import EmailSettings

T = TypeVar("T")
SLICE_SECONDS = 1.0  # how often a wait in IDLE looks at the stop flag
QUICK_EMPTY_CHECKS = 3  # IDLE checks in a row that returned at once and empty: the connection is gone


class MailboxAuthError(Exception):
    """The server refused the login: a configuration problem, not retried."""


class MailboxUnavailable(Exception):
    """The server could not be reached or dropped the connection: retried with backoff."""


class Mailbox:
    """One IMAP connection to the configured folder."""

    def __init__(self, settings: EmailSettings, ssl_context: ssl.SSLContext | None = None) -> None:
        self.settings = settings
        self.ssl_context = ssl_context
        self.client: IMAPClient | None = None
        self.uidvalidity = 0
        self.uidnext = 0
        self.idle_supported = False
        self._stop = threading.Event()
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="clawgate-imap")

    async def _call(self, work: Callable[[], T]) -> T:
        try:
            return await asyncio.get_running_loop().run_in_executor(self._thread, work)
        except ssl.SSLCertVerificationError as exc:
            raise MailboxAuthError(f"the IMAP server's certificate is not trusted ({exc.verify_message}): fix the "
                                   "server's certificate, or set channels.email.ca_file to its CA") from exc
        except (LoginError, MailboxAuthError) as exc:
            raise MailboxAuthError(str(exc)) from exc
        except (OSError, IMAPClientError, ssl.SSLError) as exc:
            raise MailboxUnavailable(f"{type(exc).__name__}: {exc}") from exc

    # connection -------------------------------------------------------------------------------
    async def connect(self) -> None:
        await self._call(self._connect)

    def _connect(self) -> None:
        s = self.settings
        try:
            context = self.ssl_context or s.tls_context()
        except ValueError as exc:  # an unreadable ca_file
            raise MailboxAuthError(str(exc)) from None
        client = IMAPClient(s.imap_host, port=s.imap_server_port, use_uid=True, ssl=s.imap_tls == "tls",
                            ssl_context=context if s.imap_tls == "tls" else None, timeout=s.timeout_seconds)
        try:
            if s.imap_tls == "starttls":
                client.starttls(context)
            try:
                client.login(s.login, s.password)
            except LoginError as exc:
                raise MailboxAuthError(f"the IMAP server refused the login for {s.login!r} ({_text(exc)}); check "
                                       "channels.email.username / password (most providers need an app password)") from exc
            client.normalise_times = False  # INTERNALDATE with its zone, compared with an aware time
            info = client.select_folder(s.imap_folder)
            self.uidvalidity = int(info.get(b"UIDVALIDITY", 0))
            self.uidnext = int(info.get(b"UIDNEXT", 0))
            self.idle_supported = client.has_capability("IDLE")
        except BaseException:
            _quietly(client.shutdown)
            raise
        self.client = client

    async def disconnect(self) -> None:
        self._stop.set()
        client, self.client = self.client, None
        if client is not None:
            try:
                await asyncio.get_running_loop().run_in_executor(self._thread, lambda: _quietly(client.logout))
            except RuntimeError:  # the loop is closing
                _quietly(client.shutdown)
        self._thread.shutdown(wait=False)

    def _live(self) -> IMAPClient:
        if self.client is None:
            raise MailboxUnavailable("not connected")
        return self.client

    # reading ----------------------------------------------------------------------------------
    async def uids_after(self, last: int) -> list[int]:
        """UIDs above `last`, ascending ("N:*" also matches the highest existing UID, so filter)."""
        def search() -> list[int]:
            client = self._live()
            client.noop()  # the session learns of mail delivered since its last command
            return client.search(["UID", f"{last + 1}:*"])

        found = await self._call(search)
        return sorted(uid for uid in found if uid > last)

    async def uids_since(self, day: Any) -> list[int]:
        found = await self._call(lambda: self._live().search(["SINCE", day]))
        return sorted(found)

    async def highest_uid(self) -> int:
        found = await self._call(lambda: self._live().search(["ALL"]))
        return max(found, default=0)

    async def last_uid_before(self, when: dt.datetime) -> int:
        """The UID after which mail arrived at or after `when` (the server's INTERNALDATE): mail delivered
        before then is old. `when` is timezone-aware."""
        def work() -> int:
            client = self._live()
            everything = client.search(["ALL"])
            recent = client.search(["SINCE", (when - dt.timedelta(days=1)).date()])
            dates = client.fetch(recent, ["INTERNALDATE"]) if recent else {}
            newer = [uid for uid, item in dates.items() if _aware(item[b"INTERNALDATE"]) >= when]
            return min(newer) - 1 if newer else max(everything, default=0)

        return await self._call(work)

    async def fetch(self, uid: int, max_bytes: int) -> tuple[bytes, int] | None:
        """(message, its size) without marking it read; above `max_bytes` only its header is downloaded.
        None when it was expunged meanwhile."""
        def work() -> tuple[bytes, int] | None:
            client = self._live()
            sizes = client.fetch([uid], ["RFC822.SIZE"])
            if uid not in sizes:
                return None
            size = int(sizes[uid][b"RFC822.SIZE"])
            part, key = ("BODY.PEEK[]", b"BODY[]") if size <= max_bytes else ("BODY.PEEK[HEADER]", b"BODY[HEADER]")
            data = client.fetch([uid], [part]).get(uid)
            return (data[key], size) if data and key in data else None

        return await self._call(work)

    async def mark(self, uid: int, flag: bytes) -> None:
        await self._call(lambda: self._live().add_flags([uid], [flag]))

    # waiting ----------------------------------------------------------------------------------
    async def wait(self) -> None:
        """Return when new mail may have arrived: on an IDLE push, or after poll_seconds without IDLE."""
        if not self.idle_supported:
            await asyncio.sleep(self.settings.poll_seconds)
            await self._call(lambda: self._live().noop())
            return
        await self._call(self._idle)

    def _idle(self) -> None:
        client = self._live()
        # A server that reports new mail before accepting IDLE makes idle() raise: that is a reconnect
        # (MailboxUnavailable), after which the mail is found from the saved cursor.
        client.idle()
        deadline = time.monotonic() + self.settings.idle_seconds
        quick = 0
        try:
            while not self._stop.is_set() and time.monotonic() < deadline:
                started = time.monotonic()
                if client.idle_check(timeout=SLICE_SECONDS):
                    return
                # imapclient swallows the end of the connection and returns nothing at once: a wait that
                # did not wait, three times in a row, is a connection the server closed (else a busy loop)
                quick = quick + 1 if time.monotonic() - started < SLICE_SECONDS / 10 else 0
                if quick >= QUICK_EMPTY_CHECKS:
                    raise MailboxUnavailable("the IMAP server closed the connection")
        finally:
            _quietly(client.idle_done)


def _aware(value: dt.datetime) -> dt.datetime:
    return value if value.tzinfo is not None else value.astimezone()


def _text(exc: BaseException) -> str:
    text = str(exc)
    return text.decode(errors="replace") if isinstance(text, bytes) else text


def _quietly(work: Callable[[], Any]) -> None:
    try:
        work()
    except (OSError, IMAPClientError, socket.error):
        return
