"""Mattermost `posted` events -> the kit's Incoming (no I/O but the file fetch handed in).

Who wrote is the post's `user_id`, set by the server from the token that made the post: the only
identity trusted. `sender_name` (@username) names the sender to the model; it never admits anyone,
since `owner` and `allow_from` take user ids only (settings.py refuses a username there). A channel post addresses the bot when the server lists the bot among its `mentions` or the text
holds `@botname`; the mention is removed. Replies go in threads: a post in a thread has its `root_id`;
a channel post that starts a conversation is answered in a thread on itself.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from clawgate.channels.kit import Incoming, IncomingFile, Sender

PRIVATE_TYPES = frozenset({"D"})  # a direct message; "G" (group DM), "O", "P" are shared

Fetch = Callable[[str], Awaitable[bytes]]


@dataclass(frozen=True)
class Me:
    """The bot account, to tell its own posts and mentions of it."""

    user_id: str
    username: str


def _json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return None
    return value


def _kind(mime: str) -> str:
    return "image" if mime.startswith("image/") and mime != "image/gif" else "file"


def incoming(event: dict[str, Any], me: Me, fetch: Fetch, commands: frozenset[str]) -> Incoming | None:
    """The kit's Incoming for a `posted` event, or None for what is not a person's message to read."""
    data = event.get("data") or {}
    post = _json(data.get("post"))
    if not isinstance(post, dict) or not post.get("id") or not post.get("user_id"):
        return None
    if post.get("type") or post.get("user_id") == me.user_id:  # system messages; our own posts
        return None
    private = str(data.get("channel_type") or "") in PRIVATE_TYPES
    text = str(post.get("message") or "")
    mentions = _json(data.get("mentions")) or []
    mention = re.compile(rf"(?<![\w.-])@{re.escape(me.username)}(?![\w.-])", re.I) if me.username else None
    named = bool(mention and mention.search(text))
    if mention is not None:
        text = mention.sub("", text).strip()
        text = re.sub(r"[ \t]{2,}", " ", text)
    command = text.split(maxsplit=1)[0].lstrip("/").lower() if text.startswith("/") and text.split() else ""
    addressed = private or named or me.user_id in mentions or (bool(command) and command in commands)
    root = str(post.get("root_id") or "") or None
    props = post.get("props") if isinstance(post.get("props"), dict) else {}
    username = str(data.get("sender_name") or "").lstrip("@") or None
    files = tuple(
        IncomingFile(name=info.get("name"), size=info.get("size"), mime=info.get("mime_type"),
                     fetch=(lambda file_id=str(info["id"]): fetch(file_id)), kind=_kind(str(info.get("mime_type") or "")))  # type: ignore[misc]
        for info in ((post.get("metadata") or {}).get("files") or []) if isinstance(info, dict) and info.get("id"))
    return Incoming(
        message_id=str(post["id"]),
        chat_id=str(post.get("channel_id") or data.get("channel_id") or (event.get("broadcast") or {}).get("channel_id")),
        sender=Sender(user_id=str(post["user_id"]), username=username, display=username),
        private=private,
        text=text,
        addressed=addressed,
        thread_id=root or (None if private else str(post["id"])),
        files=files,
        sender_is_bot=bool(props.get("from_bot") in (True, "true") or props.get("from_webhook") in (True, "true")),
        metadata={"mattermost_create_at": int(post.get("create_at") or 0), "mattermost_channel_type": data.get("channel_type")},
    )
