"""Pairing codes: how the owner admits an unknown user of any channel, kept in the daemon's SQLite database.

Own tables in the same file as the inbox, so `clawgate pairing list|approve` works whether or
not the daemon runs: the CLI writes, the running daemon reads on every message (WAL mode lets
both at once). Codes are 8 characters from an alphabet without look-alikes (no 0/O, 1/I/L)
and expire after an hour.

Strangers must not be able to lock real users out, so the limits are per requester: one
pending code per user (asking again gives the same code), and a user whose code was replaced
gets no new one until `interval` after the first. The global cap only bounds the table: when it
is full, the OLDEST pending code is replaced rather than a new requester refused, so a flood
of strangers pushes out each other's codes while a real user can always ask and be approved.
"""

from __future__ import annotations

import secrets
import sqlite3
import time
from dataclasses import dataclass
from typing import Callable


ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
CODE_LENGTH = 8


class PairingError(Exception):
    """A user-fixable pairing problem, as one line."""


@dataclass(frozen=True)
class PairingRequest:
    channel: str
    code: str
    user_id: str
    username: str | None
    chat_id: str
    created_at: float
    expires_at: float
    code_sent: bool = False  # for a replaced request: the user was told to wait
    replaced: bool = False  # pushed out by newer requests; `expires_at` is when the user may ask again


def normalise_code(code: str) -> str:
    """Accept what people type: lower case, spaces or dashes ("abcd-efgh")."""
    return "".join(ch for ch in code.upper() if ch.isalnum())


class PairingStore:
    """Pairing state of every channel; `channel` is e.g. "telegram"."""

    def __init__(self, db: sqlite3.Connection, *, ttl_seconds: float = 3600.0, max_pending: int = 50,
                 interval_seconds: float = 600.0, clock: Callable[[], float] = time.time) -> None:
        self.db = db
        self.ttl = ttl_seconds
        self.max_pending = max_pending
        self.interval = interval_seconds
        self.clock = clock

    # asked by the daemon on each message -------------------------------------------------
    def is_paired(self, channel: str, user_id: str) -> bool:
        row = self.db.execute("SELECT 1 FROM pairing_allowed WHERE channel=? AND user_id=?", (channel, user_id)).fetchone()
        return row is not None

    def request(self, channel: str, user_id: str, username: str | None, chat_id: str) -> PairingRequest:
        """The user's live request: their pending code (made now if needed), or — if their code was
        replaced by newer requests less than `interval` ago — that request, marked `replaced`."""
        now = self.clock()
        with self.db:
            self.db.execute("BEGIN IMMEDIATE")
            self.db.execute("DELETE FROM pairing_requests WHERE status IN ('pending', 'replaced') AND expires_at <= ?",
                            (now,))
            mine = self._live_where("channel=? AND user_id=?", (channel, user_id))
            if mine:
                return mine[0]
            pending = self._pending_where("channel=?", (channel,))
            for oldest in pending[:max(len(pending) - self.max_pending + 1, 0)]:
                # Full: push out the oldest code. Its owner may ask again `interval` after it was made.
                self.db.execute("UPDATE pairing_requests SET status='replaced', code_sent=0, expires_at=? "
                                "WHERE channel=? AND code=?", (oldest.created_at + self.interval, channel, oldest.code))
            while True:
                code = "".join(secrets.choice(ALPHABET) for _ in range(CODE_LENGTH))
                cur = self.db.execute(
                    "INSERT OR IGNORE INTO pairing_requests(channel, code, user_id, username, chat_id, created_at, expires_at)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?)", (channel, code, user_id, username, chat_id, now, now + self.ttl))
                if cur.rowcount == 1:
                    return PairingRequest(channel, code, user_id, username, chat_id, now, now + self.ttl)

    def mark_code_sent(self, channel: str, code: str, sent: bool = True) -> None:
        self.db.execute("UPDATE pairing_requests SET code_sent=? WHERE channel=? AND code=?", (int(sent), channel, code))

    # the owner's side (CLI) ------------------------------------------------------------
    def pending(self, channel: str | None = None) -> list[PairingRequest]:
        if channel is None:
            return self._pending_where("1=1", ())
        return self._pending_where("channel=?", (channel,))

    def approve(self, channel: str, code: str) -> PairingRequest:
        """Admit the user behind `code`; PairingError (one line) when there is no such live code."""
        wanted = normalise_code(code)
        if len(wanted) != CODE_LENGTH or any(ch not in ALPHABET for ch in wanted):
            raise PairingError(f"{code!r} is not a pairing code (they are {CODE_LENGTH} letters and digits, e.g. "
                               "ABCD2345); run `clawgate pairing list` to see pending codes")
        now = self.clock()
        with self.db:
            self.db.execute("BEGIN IMMEDIATE")
            found = self._pending_where("channel=? AND code=?", (channel, wanted))
            if not found:
                raise PairingError(f"no pending {channel} pairing code {wanted}; it may have expired (codes last "
                                   f"{self.ttl / 3600:g} h): run `clawgate pairing list`, or ask the user to "
                                   "message the bot again")
            req = found[0]
            self.db.execute("UPDATE pairing_requests SET status='approved' WHERE channel=? AND code=?", (channel, wanted))
            self.db.execute("DELETE FROM pairing_requests WHERE channel=? AND user_id=? AND status='pending'",
                            (channel, req.user_id))
            self.db.execute(
                "INSERT INTO pairing_allowed(channel, user_id, username, chat_id, approved_at) VALUES (?, ?, ?, ?, ?)"
                " ON CONFLICT(channel, user_id) DO UPDATE SET username=excluded.username, chat_id=excluded.chat_id,"
                " approved_at=excluded.approved_at, notified=0", (channel, req.user_id, req.username, req.chat_id, now))
        return req

    def revoke(self, channel: str, user_id: str) -> bool:
        cur = self.db.execute("DELETE FROM pairing_allowed WHERE channel=? AND user_id=?", (channel, user_id.lstrip("@")))
        if cur.rowcount == 0:
            cur = self.db.execute("DELETE FROM pairing_allowed WHERE channel=? AND lower(username)=lower(?)",
                                  (channel, user_id.lstrip("@")))
        return cur.rowcount > 0

    def allowed(self, channel: str | None = None) -> list[dict[str, object]]:
        rows = self.db.execute(
            "SELECT channel, user_id, username, approved_at FROM pairing_allowed WHERE ? IS NULL OR channel=? "
            "ORDER BY approved_at", (channel, channel)).fetchall()
        return [{"channel": c, "user_id": u, "username": n, "approved_at": a} for c, u, n, a in rows]

    # telling newly admitted users --------------------------------------------------------
    def unnotified(self, channel: str) -> list[tuple[str, str]]:
        """(user_id, chat_id) of users approved since the daemon last told them."""
        rows = self.db.execute("SELECT user_id, chat_id FROM pairing_allowed WHERE channel=? AND notified=0 "
                               "AND chat_id IS NOT NULL", (channel,)).fetchall()
        return [(u, c) for u, c in rows]

    def mark_notified(self, channel: str, user_id: str) -> bool:
        """True for the one caller that marks it: the processes of a fleet share this database, and
        only the one whose update flips the flag tells the user."""
        cursor = self.db.execute("UPDATE pairing_allowed SET notified=1 WHERE channel=? AND user_id=? AND notified=0",
                                 (channel, user_id))
        return cursor.rowcount == 1

    def _pending_where(self, where: str, params: tuple[object, ...]) -> list[PairingRequest]:
        return self._where(f"status='pending' AND {where}", params)

    def _live_where(self, where: str, params: tuple[object, ...]) -> list[PairingRequest]:
        return self._where(f"status IN ('pending', 'replaced') AND {where}", params)

    def _where(self, where: str, params: tuple[object, ...]) -> list[PairingRequest]:
        rows = self.db.execute(
            "SELECT channel, code, user_id, username, chat_id, created_at, expires_at, code_sent, status "
            f"FROM pairing_requests WHERE expires_at > ? AND {where} ORDER BY created_at, rowid",
            (self.clock(), *params)).fetchall()
        return [PairingRequest(channel=c, code=code, user_id=u, username=n, chat_id=chat, created_at=made,
                               expires_at=ends, code_sent=bool(sent), replaced=status == "replaced")
                for c, code, u, n, chat, made, ends, sent, status in rows]
