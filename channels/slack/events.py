"""Slack payloads -> the kit's Incoming: which messages count, who sent them, where replies go.

- A ``message`` (DMs: channel_type ``im``; channels the bot is in) or an ``app_mention``. Edits,
  deletions, joins and other subtypes carry no new words and are skipped; a shared file
  (``file_share``) and a thread reply also sent to the channel (``thread_broadcast``) count.
- The bot's own posts are skipped; other bots' are passed on marked as bots (the kit drops them).
- The message id is ``<channel>:<ts>``: Slack's ts is unique within a conversation and the same
  in a redelivered envelope and in the ``message`` twin of an ``app_mention``, so the kit's
  dedupe answers one post once.
- Replies go in a thread under the person's message in channels (thread_id = the thread's ts, or
  the message's own ts); in a DM they go to the conversation itself unless the person wrote in
  a thread.
- Text arrives with Slack's escaping (``&amp;`` ``&lt;`` ``&gt;``) and links as ``<url|label>``:
  it is turned back into plain text, and the bot's mention removed.
"""

from __future__ import annotations

import re
from typing import Any, Awaitable, Callable

from clawgate.channels.kit import Incoming, IncomingFile, Sender

COUNTED_SUBTYPES = frozenset({"", "file_share", "thread_broadcast"})
IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
_LINK = re.compile(r"<((?:https?|mailto):[^|>\s]+)(?:\|([^>]*))?>")

FileFetcher = Callable[[dict[str, Any]], Awaitable[bytes]]


def plain_text(text: str, bot_user_id: str) -> str:
    """Slack's message text as a person wrote it: no bot mention, links spelled out, unescaped."""
    text = re.sub(rf"<@{re.escape(bot_user_id)}(?:\|[^>]*)?>\s*", "", text)
    text = _LINK.sub(lambda m: m.group(1) if not m.group(2) or m.group(2) == m.group(1)
                     else f"{m.group(2)} ({m.group(1)})", text)
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&").strip()


def is_private(event: dict[str, Any]) -> bool:
    channel_type = event.get("channel_type")
    if channel_type:
        return channel_type == "im"
    return str(event.get("channel", "")).startswith("D")


def _file_kind(mime: str | None) -> str:
    if mime in IMAGE_TYPES:
        return "image"
    if mime and mime.startswith("audio/"):
        return "voice"
    return "file"


def message_incoming(event: dict[str, Any], *, bot_user_id: str, sender: Sender | None,
                     fetch_file: FileFetcher) -> Incoming | None:
    """One Events API message / app_mention event as Incoming, or None when it is not one to read."""
    if event.get("type") not in ("message", "app_mention"):
        return None
    subtype = str(event.get("subtype") or "")
    is_bot = bool(event.get("bot_id")) or subtype == "bot_message"
    if subtype not in COUNTED_SUBTYPES and subtype != "bot_message":
        return None
    user = str(event.get("user") or event.get("bot_id") or "")
    channel, ts = str(event.get("channel") or ""), str(event.get("ts") or "")
    if not user or not channel or not ts or user == bot_user_id:
        return None
    raw = str(event.get("text") or "")
    private = is_private(event)
    mentioned = event.get("type") == "app_mention" or f"<@{bot_user_id}" in raw
    thread_ts = event.get("thread_ts")
    files = tuple(
        IncomingFile(name=f.get("name"), size=f.get("size"), mime=f.get("mimetype"),
                     fetch=(lambda f=f: fetch_file(f)), kind=_file_kind(f.get("mimetype")))  # type: ignore[arg-type, misc]
        for f in event.get("files") or [] if isinstance(f, dict) and f.get("id"))
    text = plain_text(raw, bot_user_id)
    return Incoming(
        message_id=f"{channel}:{ts}",
        chat_id=channel,
        sender=sender or Sender(user_id=user),
        private=private,
        text=text,
        addressed=private or mentioned,
        thread_id=str(thread_ts) if thread_ts else (None if private else ts),
        files=files,
        sender_is_bot=is_bot,
        metadata={"ts": ts, "channel_type": event.get("channel_type") or ("im" if private else "channel")},
        unreadable=not text and not files,
    )


def slash_incoming(payload: dict[str, Any], *, sender: Sender) -> Incoming:
    """``/clawgate new`` as the chat command ``/new`` in the conversation it was typed in."""
    channel = str(payload.get("channel_id") or "")
    return Incoming(
        message_id=f"slash:{payload.get('trigger_id')}",
        chat_id=channel,
        sender=sender,
        private=channel.startswith("D"),
        text="/" + str(payload.get("text") or "").strip(),
        addressed=True,
        metadata={"slash_command": str(payload.get("command") or "")},
    )
