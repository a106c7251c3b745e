"""The channel's small durable state in the daemon's SQLite file: offset, sends, seen, refusals.

- the polling offset, moved only after an update was handled durably;
- how many chunks of each multi-part reply were sent, so a retried or replayed reply resumes
  after the last sent chunk instead of sending any part twice;
- updates handled outside the inbox (commands, button presses), so a redelivered one is not
  acted on twice;
- users already refused once, so a stranger gets one refusal and then silence;
- groups that became supergroups (a new chat id), so the conversation follows the chat;
- the numeric id each owner named by username had at first contact (ownership stays with the id).
"""

from __future__ import annotations

import sqlite3
import time
from typing import Callable

OFFSET_KEY = "telegram:offset"


class ChannelState:
    def __init__(self, db: sqlite3.Connection, *, clock: Callable[[], float] = time.time) -> None:
        self.db = db
        self.clock = clock

    def _get(self, key: str) -> str | None:
        row = self.db.execute("SELECT value FROM telegram_state WHERE key=?", (key,)).fetchone()
        return row[0] if row else None

    def prune(self, keep_seconds: float = 7 * 86400) -> None:
        """Forget bookkeeping older than a week (Telegram redelivers for at most 24 h)."""
        cutoff = self.clock() - keep_seconds
        self.db.execute("DELETE FROM telegram_sent WHERE updated_at < ?", (cutoff,))
        self.db.execute("DELETE FROM telegram_seen WHERE seen_at < ?", (cutoff,))

    # offset ------------------------------------------------------------------------------
    def offset(self) -> int:
        return int(self._get(OFFSET_KEY) or 0)

    def save_offset(self, offset: int) -> None:
        self.db.execute("INSERT INTO telegram_state(key, value) VALUES(?, ?) "
                        "ON CONFLICT(key) DO UPDATE SET value=excluded.value", (OFFSET_KEY, str(offset)))

    # multi-part replies ------------------------------------------------------------------
    def chunks_sent(self, outbound_id: str) -> int:
        row = self.db.execute("SELECT chunks FROM telegram_sent WHERE outbound_id=?", (outbound_id,)).fetchone()
        return int(row[0]) if row else 0

    def record_chunk(self, outbound_id: str, chunks: int) -> None:
        self.db.execute("INSERT INTO telegram_sent(outbound_id, chunks, updated_at) VALUES(?, ?, ?) ON CONFLICT(outbound_id)"
                        " DO UPDATE SET chunks=excluded.chunks, updated_at=excluded.updated_at",
                        (outbound_id, chunks, self.clock()))

    # at-most-once handling of updates that do not go through the inbox ---------------------
    def first_time(self, key: str) -> bool:
        """Record `key`; False if it was recorded before (a redelivered command or button press)."""
        cur = self.db.execute("INSERT OR IGNORE INTO telegram_seen(key, seen_at) VALUES(?, ?)", (key, self.clock()))
        return cur.rowcount == 1

    # one refusal per stranger ------------------------------------------------------------
    def refused_before(self, user_id: str) -> bool:
        return self.db.execute("SELECT 1 FROM telegram_refused WHERE user_id=?", (user_id,)).fetchone() is not None

    def mark_refused(self, user_id: str) -> None:
        self.db.execute("INSERT OR IGNORE INTO telegram_refused(user_id, refused_at) VALUES(?, ?)", (user_id, self.clock()))

    # groups that became supergroups ------------------------------------------------------
    def record_migration(self, old_chat_id: int | str, new_chat_id: int | str) -> None:
        """A group became a supergroup with a new id: its session stays keyed by the group's first id."""
        self.db.execute("INSERT INTO telegram_state(key, value) VALUES(?, ?) "
                        "ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                        (f"migrated:{new_chat_id}", str(old_chat_id)))

    def session_chat(self, chat_id: int | str) -> str:
        """The chat id a chat's session is keyed by: the original group's after a migration."""
        current, seen = str(chat_id), set()
        while (older := self._get(f"migrated:{current}")) is not None and older not in seen:
            seen.add(current)
            current = older
        return current

    # owners named by username ------------------------------------------------------------
    def owner_ids(self) -> dict[str, str]:
        """username -> the id it was bound to at first contact."""
        return {str(name): str(uid) for name, uid in self.db.execute("SELECT username, user_id FROM telegram_owner_ids")}

    def bind_owner(self, username: str, user_id: str) -> None:
        """Bind once; a later id with the same username never replaces the first."""
        self.db.execute("INSERT OR IGNORE INTO telegram_owner_ids(username, user_id, bound_at) VALUES(?, ?, ?)",
                        (username, user_id, self.clock()))
