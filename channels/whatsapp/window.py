"""WhatsApp's 24-hour customer-service window, kept per person.

A business may send free-form messages to a person only within 24 hours of that person's last
message (after that only pre-approved templates, which an agent's answer is not). The time of each
person's last message is kept in the kit's key/value store, so it survives a restart; a reply to
someone outside the window (or to someone who never wrote: the channel never writes first) is
refused before it reaches Meta, once in the log per person and as a notice in `clawgate channels`,
never dropped silently: the kit tells the dispatcher, and the answer stays in the session history.
"""

from __future__ import annotations

import logging
import time

from clawgate.channels.kit import ChannelStore

WINDOW_SECONDS = 24 * 3600


class ServiceWindow:
    def __init__(self, store: ChannelStore, log: logging.Logger, seconds: float = WINDOW_SECONDS) -> None:
        self._store, self._log, self._seconds = store, log, seconds
        self.closed: dict[str, float] = {}  # chat -> when a send was refused for the window

    def wrote(self, chat_id: str, timestamp: float) -> None:
        """The person wrote at `timestamp` (the webhook's, seconds since the epoch)."""
        key = f"in:{chat_id}"
        known = self._store.kv_get(key)
        if known is None or float(known) < timestamp:
            self._store.kv_set(key, str(int(timestamp)))
        self.closed.pop(chat_id, None)

    def refusal(self, chat_id: str, now: float | None = None) -> str | None:
        """Why nothing may be sent to `chat_id` now, or None when the window is open."""
        known = self._store.kv_get(f"in:{chat_id}")
        now = time.time() if now is None else now
        if known is None:
            why = f"{chat_id} has never written to this number, and the channel does not write first"
        elif now - float(known) > self._seconds:
            hours = (now - float(known)) / 3600
            why = (f"{chat_id} last wrote {hours:.0f} h ago, outside WhatsApp's 24-hour customer-service window; "
                   "it opens again when they write")
        else:
            return None
        self.shut(chat_id, why, now)
        return why

    def shut(self, chat_id: str, why: str, now: float | None = None) -> None:
        """Note a refusal for the window (ours, or Meta's 131047): one log line per person until they write."""
        if chat_id not in self.closed:
            self._log.warning("WhatsApp: not sent to %s: %s", chat_id, why)
        self.closed[chat_id] = time.time() if now is None else now

    def notice(self) -> str | None:
        if not self.closed:
            return None
        chats = sorted(self.closed, key=self.closed.__getitem__)
        return (f"{len(chats)} chat(s) outside WhatsApp's 24-hour window (last: {chats[-1]}): their replies "
                "were not sent and are in the session history on the web page")
