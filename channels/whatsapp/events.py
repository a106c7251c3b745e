"""One message of a Cloud API `messages` webhook as the kit's Incoming (or an approval press).

Who wrote is `from`, the sender's `wa_id`: the number WhatsApp vouches for. The profile name in
`contacts` is only shown (`Sender.display`), never an identity: anyone can name themselves anything.
The Cloud API has no groups: every message is a private chat whose id is the sender's wa_id.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from clawgate.channels.kit import Incoming, IncomingFile, Sender

APPROVAL_PREFIX = "clawgate-ap:"
Fetch = Callable[[str, int | None], Awaitable[bytes]]  # (media id, announced size) -> bytes
_MEDIA = {"image": "image", "audio": "voice", "video": "file", "document": "file"}


@dataclass(frozen=True)
class Press:
    """An interactive reply button pressed: the approval it answers and how."""

    approval_id: str
    approved: bool
    sender: Sender
    chat_id: str
    message_id: str


def press_of(message: dict[str, Any], sender: Sender) -> Press | None:
    interactive = message.get("interactive") or {}
    reply = interactive.get("button_reply") or {}
    button = str(reply.get("id") or "")
    if message.get("type") != "interactive" or not button.startswith(APPROVAL_PREFIX):
        return None
    approval_id, _, choice = button[len(APPROVAL_PREFIX):].rpartition(":")
    if not approval_id or choice not in ("y", "n"):
        return None
    return Press(approval_id, choice == "y", sender, sender.user_id, str(message.get("id") or ""))


def button_id(approval_id: str, approve: bool) -> str:
    return f"{APPROVAL_PREFIX}{approval_id}:{'y' if approve else 'n'}"


def incoming_of(message: dict[str, Any], sender: Sender, fetch: Fetch) -> Incoming | None:
    """None for what is not a message to answer (a reaction, a message the business sent)."""
    kind = str(message.get("type") or "")
    message_id = str(message.get("id") or "")
    if not message_id or kind == "reaction":
        return None
    text, files, unreadable = "", [], False
    if kind == "text":
        text = str((message.get("text") or {}).get("body") or "")
    elif kind == "button":  # a template's quick-reply button: its text is what the person said
        text = str((message.get("button") or {}).get("text") or "")
    elif kind == "interactive":  # a reply button or list row that is not an approval: its title
        interactive = message.get("interactive") or {}
        picked = interactive.get("button_reply") or interactive.get("list_reply") or {}
        text = str(picked.get("title") or "")
    elif kind in _MEDIA:
        media = message.get(kind) or {}
        media_id = str(media.get("id") or "")
        size = media.get("file_size") if isinstance(media.get("file_size"), int) else None
        text = str(media.get("caption") or "")
        if media_id:
            files.append(IncomingFile(name=media.get("filename") or None, size=size, mime=media.get("mime_type"),
                                      fetch=lambda media_id=media_id, size=size: fetch(media_id, size),
                                      kind=_MEDIA[kind]))  # type: ignore[arg-type]
        unreadable = not media_id and not text
    else:  # sticker, location, contacts, unsupported: nothing the agent can read
        unreadable = True
    context = message.get("context") or {}
    metadata: dict[str, Any] = {"wa_type": kind}
    if context.get("id"):
        metadata["reply_to"] = str(context["id"])
    return Incoming(message_id=message_id, chat_id=sender.user_id, sender=sender, private=True, text=text,
                    addressed=True, files=tuple(files), metadata=metadata, unreadable=unreadable)
