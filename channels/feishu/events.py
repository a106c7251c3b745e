"""Feishu `im.message.receive_v1` events -> the kit's Incoming (no I/O).

Who wrote is `sender.sender_id.open_id`, which Feishu sets from the sender's login: the only identity
trusted (an open_id is per app, so the owner's id is the one this app's events carry; union_id would
span apps of one developer, which clawgate does not need). Names never admit anyone. A group message
addresses the bot when its `mentions` list the bot's open_id; the `@_user_N` placeholders of the mentions
are replaced by the names (the bot's removed). A chat command (`/stop`) is taken without a mention.
"""

from __future__ import annotations

import json
import re
from typing import Any, Awaitable, Callable

from clawgate.channels.kit import Incoming, IncomingFile, Sender

PLACEHOLDER = re.compile(r"@_user_\d+")
# (message id, resource key, "image" | "file") -> the bytes, through im/v1/messages/:id/resources/:key
Fetch = Callable[[str, str, str], Awaitable[bytes]]


def _post_text(content: dict[str, Any]) -> str:
    """A rich-text (`post`) message's text: its paragraphs' text, links and mentions, one line each."""
    body = content if "content" in content else next((v for v in content.values() if isinstance(v, dict)), {})
    lines = []
    for paragraph in body.get("content") or []:
        parts = []
        for element in paragraph if isinstance(paragraph, list) else []:
            tag = element.get("tag") if isinstance(element, dict) else None
            if tag in ("text", "a", "md", "code_block"):
                parts.append(str(element.get("text") or ""))
            elif tag == "at":
                parts.append(str(element.get("user_id") or ""))
        lines.append("".join(parts))
    title = str(body.get("title") or "")
    return "\n".join(([title] if title else []) + lines)


def message_text(msg_type: str, content: str) -> str | None:
    """The text of a text or post message; None for what carries none (an image, a sticker)."""
    try:
        data = json.loads(content or "{}")
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    if msg_type == "text":
        return str(data.get("text") or "")
    if msg_type == "post":
        return _post_text(data)
    return None


def attachments(message_id: str, msg_type: str, content: str, fetch: Fetch) -> tuple[IncomingFile, ...]:
    """The file an image, file, audio or video message carries (fetched only once the sender is admitted)."""
    try:
        data = json.loads(content or "{}")
    except ValueError:
        return ()
    if not isinstance(data, dict):
        return ()
    if msg_type == "image" and data.get("image_key"):
        key, resource, kind, name = str(data["image_key"]), "image", "image", "image.png"
    elif msg_type in ("file", "audio", "media") and data.get("file_key"):
        key, resource = str(data["file_key"]), "file"
        kind = "voice" if msg_type == "audio" else "file"
        name = str(data.get("file_name") or ("voice.opus" if msg_type == "audio" else "file"))
    else:
        return ()
    return (IncomingFile(name=name, size=None, mime=None, kind=kind,  # type: ignore[arg-type]
                         fetch=lambda: fetch(message_id, key, resource)),)


def incoming(event: dict[str, Any], bot_open_id: str, commands: frozenset[str], *,
             reply_in_thread: bool = False, fetch: Fetch | None = None) -> Incoming | None:
    """The kit's Incoming for one `im.message.receive_v1` event's `event` object, or None."""
    message = event.get("message") or {}
    sender = event.get("sender") or {}
    open_id = str((sender.get("sender_id") or {}).get("open_id") or "")
    if not message.get("message_id") or not message.get("chat_id") or not open_id or open_id == bot_open_id:
        return None
    private = message.get("chat_type") == "p2p"
    text = message_text(str(message.get("message_type") or ""), str(message.get("content") or ""))
    mentioned = False
    for mention in message.get("mentions") or []:
        key = str(mention.get("key") or "")
        mention_id = str((mention.get("id") or {}).get("open_id") or "")
        if not text or not key:
            mentioned = mentioned or bool(mention_id and mention_id == bot_open_id)
            continue
        if mention_id and mention_id == bot_open_id:
            mentioned = True
            text = re.sub(re.escape(key) + r"(?![0-9])[ \t]?", "", text)  # the bot's mention and its space
        else:
            shown = f"@{mention.get('name') or mention_id}"
            text = re.sub(re.escape(key) + r"(?![0-9])", lambda _: shown, text)
    if text is not None:
        text = PLACEHOLDER.sub("", text).strip()  # indentation inside (code) is kept
    command = text.split(maxsplit=1)[0].lstrip("/").lower() if text and text.startswith("/") else ""
    addressed = private or mentioned or (bool(command) and command in commands)
    root = str(message.get("root_id") or "") or None
    thread = root if message.get("thread_id") and root else None
    if thread is None and reply_in_thread and not private:
        thread = str(message["message_id"])
    files = attachments(str(message["message_id"]), str(message.get("message_type") or ""),
                        str(message.get("content") or ""), fetch) if fetch is not None else ()
    return Incoming(
        message_id=str(message["message_id"]),
        chat_id=str(message["chat_id"]),
        sender=Sender(user_id=open_id, username=None, display=None),
        private=private,
        text=text or "",
        addressed=addressed,
        thread_id=thread,
        files=files,
        sender_is_bot=sender.get("sender_type") not in (None, "user"),
        unreadable=text is None and not files,
        metadata={"feishu_chat_type": message.get("chat_type"), "feishu_create_time": message.get("create_time")},
    )
