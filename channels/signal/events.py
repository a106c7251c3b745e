"""signal-cli `receive` events -> the kit's Incoming (no I/O but the attachment fetch handed in).

Who wrote is the envelope's authenticated identity: `sourceUuid` (the ACI, stable; a linked device
may see nothing else) as the user id, `sourceNumber` (when Signal shares it) as the name `owner` and
`allow_from` may use. `sourceName` is the sender's self-chosen profile name: shown, never trusted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from clawgate.channels.kit import Incoming, IncomingFile, Sender

GROUP_PREFIX = "group:"
MENTION_MARK = "\ufffc"  # where a mention sits in the text; its start/length (UTF-16) say whose

Fetch = Callable[[dict[str, Any], str], Awaitable[bytes]]


@dataclass(frozen=True)
class Self:
    """The bot's own identity, to tell mentions of and replies to it."""

    number: str
    uuid: str | None

    def is_me(self, number: Any, uuid: Any) -> bool:
        return bool((number and number == self.number) or (uuid and self.uuid and str(uuid).lower() == self.uuid))


def sender_of(envelope: dict[str, Any]) -> Sender | None:
    uuid = str(envelope.get("sourceUuid") or "").lower()
    number = str(envelope.get("sourceNumber") or "") or None
    if not uuid and not number:
        return None
    return Sender(user_id=uuid or str(number), username=number, display=envelope.get("sourceName") or None)


def message_key(author: str, timestamp: Any) -> str:
    """A message's id for the kit: its author and the author's timestamp (Signal's own key for quotes,
    reactions and deletes); stable across signal-cli delivering it again."""
    return f"{author}:{timestamp}"


def split_key(message_id: str) -> tuple[str, int] | None:
    author, _, stamp = message_id.rpartition(":")
    return (author, int(stamp)) if author and stamp.isdigit() else None


def _utf16_replace(text: str, spans: list[tuple[int, int, str]]) -> str:
    """Replace (start, length) spans counted in UTF-16 code units, right to left."""
    units = text.encode("utf-16-le")
    for start, length, new in sorted(spans, reverse=True):
        units = units[:2 * start] + new.encode("utf-16-le") + units[2 * (start + length):]
    return units.decode("utf-16-le", "replace")


def _kind(mime: str) -> str:
    if mime.startswith("image/") and mime != "image/gif":
        return "image"
    return "voice" if mime.startswith("audio/") else "file"


def incoming(event: dict[str, Any], me: Self, fetch: Fetch, commands: frozenset[str] = frozenset()) -> Incoming | None:
    """The message an event carries, or None (receipts, typing, our own sync copies, reactions). In a group
    it is addressed to the bot when it mentions the bot, quotes one of its messages, or is one of the chat
    `commands` ("/status"): not any text that starts with a slash."""
    envelope = event.get("envelope")
    if not isinstance(envelope, dict):
        return None
    data = envelope.get("dataMessage")
    sender = sender_of(envelope)
    if not isinstance(data, dict) or sender is None or data.get("reaction") or data.get("remoteDelete"):
        return None
    group = (data.get("groupInfo") or {}).get("groupId")
    chat = f"{GROUP_PREFIX}{group}" if group else sender.user_id
    text = str(data.get("message") or "")
    spans, mentioned = [], False
    for m in data.get("mentions") or []:
        if me.is_me(m.get("number"), m.get("uuid")):
            mentioned = True
            spans.append((int(m.get("start", 0)), int(m.get("length", 1)), ""))
        else:
            spans.append((int(m.get("start", 0)), int(m.get("length", 1)), "@" + str(m.get("number") or m.get("uuid"))))
    text = _utf16_replace(text, spans).strip() if spans else text.strip()
    quote = data.get("quote") or {}
    replied = bool(quote) and me.is_me(quote.get("authorNumber"), quote.get("authorUuid"))
    files = tuple(
        IncomingFile(name=a.get("filename") or None, size=a.get("size"), mime=a.get("contentType") or None,
                     fetch=(lambda a=a: fetch(a, chat)), kind=_kind(str(a.get("contentType") or "")))  # type: ignore[misc]
        for a in data.get("attachments") or [] if isinstance(a, dict) and a.get("id"))
    if not text and not files and not data.get("sticker"):
        return None  # a timer change, a group update, a profile key: nothing anyone wrote
    stamp = data.get("timestamp") or envelope.get("timestamp")
    return Incoming(message_id=message_key(sender.user_id, stamp), chat_id=chat, sender=sender, private=not group,
                    text=text, addressed=not group or mentioned or replied or _command(text, commands), files=files,
                    metadata={"signal_timestamp": stamp}, unreadable=not text and not files)


def _command(text: str, commands: frozenset[str]) -> bool:
    word = text.split(maxsplit=1)[0] if text.startswith("/") and text.strip() != "/" else ""
    return word[1:].split("@", 1)[0].lower() in commands


def reaction(event: dict[str, Any]) -> tuple[Sender, str, int, bool, str | None] | None:
    """(who, emoji, the target's timestamp, removed, group id) of a reaction, or None."""
    envelope = event.get("envelope") or {}
    data = envelope.get("dataMessage") or {}
    r = data.get("reaction")
    sender = sender_of(envelope)
    if not isinstance(r, dict) or sender is None:
        return None
    return (sender, str(r.get("emoji") or ""), int(r.get("targetSentTimestamp") or 0), bool(r.get("isRemove")),
            (data.get("groupInfo") or {}).get("groupId"))
