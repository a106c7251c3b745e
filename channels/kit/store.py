"""A channel's small durable state in the daemon's state database, behind a store API.

Per channel (every row carries the channel's name):
- the cursor (Telegram's update offset, a stream position), moved only after an event was handled
  durably;
- how many chunks of each multi-part reply were sent, so a retried or replayed reply resumes
  after the last sent chunk instead of sending any part twice;
- events handled outside the inbox (commands, button presses), so a redelivered one is not acted
  on twice;
- users already refused once, so a stranger gets one refusal and then silence;
- chats that moved to a new id (a Telegram group that became a supergroup), so the conversation
  follows the chat;
- the id each owner named by username had at first contact (ownership stays with the id);
- a small key/value space for the adapter's own state.

The tables are declared with every other table in agent/core/schema.py (migration 4 carried the
Telegram-only tables of earlier versions over).
"""

from __future__ import annotations

import sqlite3
import time
from typing import Callable

CURSOR = "cursor"
KV = "kv:"
OWNER_CHAT = "owner-chat:"




class ChannelStore:
    """The state of one channel. Writes are single statements on the daemon's shared connection."""

    def __init__(self, db: sqlite3.Connection, channel: str, *, clock: Callable[[], float] = time.time) -> None:
        self._db = db
        self.channel = channel
        self.clock = clock

    def _get(self, key: str) -> str | None:
        row = self._db.execute("SELECT value FROM channel_state WHERE channel=? AND key=?", (self.channel, key)).fetchone()
        return row[0] if row else None

    def _set(self, key: str, value: str) -> None:
        self._db.execute("INSERT INTO channel_state(channel, key, value) VALUES(?, ?, ?) "
                         "ON CONFLICT(channel, key) DO UPDATE SET value=excluded.value", (self.channel, key, value))

    def prune(self, keep_seconds: float = 7 * 86400) -> None:
        """Forget bookkeeping older than a week (platforms redeliver for a day at most)."""
        cutoff = self.clock() - keep_seconds
        self._db.execute("DELETE FROM channel_sent WHERE channel=? AND updated_at < ?", (self.channel, cutoff))
        self._db.execute("DELETE FROM channel_seen WHERE channel=? AND seen_at < ?", (self.channel, cutoff))

    # cursor ------------------------------------------------------------------------------------------
    def cursor(self) -> str | None:
        """Where receiving resumes (the adapter's own format), or None the first time."""
        return self._get(CURSOR)

    def save_cursor(self, value: str) -> None:
        self._set(CURSOR, value)

    # multi-part replies -------------------------------------------------------------------------------
    def chunks_sent(self, outbound_id: str) -> int:
        row = self._db.execute("SELECT chunks FROM channel_sent WHERE channel=? AND outbound_id=?",
                               (self.channel, outbound_id)).fetchone()
        return int(row[0]) if row else 0

    def record_chunk(self, outbound_id: str, chunks: int) -> None:
        self._db.execute("INSERT INTO channel_sent(channel, outbound_id, chunks, updated_at) VALUES(?, ?, ?, ?) "
                         "ON CONFLICT(channel, outbound_id) DO UPDATE SET chunks=excluded.chunks, "
                         "updated_at=excluded.updated_at", (self.channel, outbound_id, chunks, self.clock()))

    # at-most-once handling of events that do not go through the inbox ----------------------------------
    def first_time(self, key: str) -> bool:
        """Record `key`; False if it was recorded before (a redelivered command or button press)."""
        cur = self._db.execute("INSERT OR IGNORE INTO channel_seen(channel, key, seen_at) VALUES(?, ?, ?)",
                               (self.channel, key, self.clock()))
        return cur.rowcount == 1

    # one refusal per stranger -------------------------------------------------------------------------
    def refused_before(self, user_id: str) -> bool:
        return self._db.execute("SELECT 1 FROM channel_refused WHERE channel=? AND user_id=?",
                                (self.channel, user_id)).fetchone() is not None

    def mark_refused(self, user_id: str) -> None:
        self._db.execute("INSERT OR IGNORE INTO channel_refused(channel, user_id, refused_at) VALUES(?, ?, ?)",
                         (self.channel, user_id, self.clock()))

    # chats that moved to a new id ------------------------------------------------------------------
    def record_migration(self, old_chat_id: int | str, new_chat_id: int | str) -> None:
        """A chat got a new id: its session stays keyed by the chat's first id."""
        self._set(f"migrated:{new_chat_id}", str(old_chat_id))

    def session_chat(self, chat_id: int | str) -> str:
        """The chat id a chat's session is keyed by: the original chat's after a migration."""
        current, seen = str(chat_id), set()
        while (older := self._get(f"migrated:{current}")) is not None and older not in seen:
            seen.add(current)
            current = older
        return current

    # owners ----------------------------------------------------------------------------------------
    def owner_ids(self) -> dict[str, str]:
        """username -> the id it was bound to at first contact."""
        return {str(name): str(uid) for name, uid in self._db.execute(
            "SELECT username, user_id FROM channel_owner_ids WHERE channel=?", (self.channel,))}

    def bind_owner(self, username: str, user_id: str) -> None:
        """Bind once; a later id with the same username never replaces the first."""
        self._db.execute("INSERT OR IGNORE INTO channel_owner_ids(channel, username, user_id, bound_at) "
                         "VALUES(?, ?, ?, ?)", (self.channel, username, user_id, self.clock()))

    def owner_chats(self) -> dict[str, str]:
        """owner user id -> the private chat they last wrote from (where guests' approvals are asked)."""
        rows = self._db.execute("SELECT key, value FROM channel_state WHERE channel=? AND key LIKE ?",
                                (self.channel, OWNER_CHAT + "%")).fetchall()
        return {key[len(OWNER_CHAT):]: value for key, value in rows}

    def set_owner_chat(self, user_id: str, chat_id: str) -> None:
        self._set(OWNER_CHAT + user_id, chat_id)

    # the adapter's own state -----------------------------------------------------------------------
    def kv_get(self, key: str) -> str | None:
        return self._get(KV + key)

    def kv_set(self, key: str, value: str) -> None:
        self._set(KV + key, value)


__all__ = ["ChannelStore"]
