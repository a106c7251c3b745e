"""One Teams activity as the kit's Incoming, or an approval card's button press.

Who wrote is the activity's `from.aadObjectId`, the person's Microsoft Entra object id: the same for
every bot and every tenant app, and vouched for by the Bot Connector's signed token (the activity is
only read once that verified). An activity without one (a guest account, a bot) falls back to
`from.id` (the per-bot "29:…" id, also the Connector's). `from.name` is only shown, never an identity.

Conversations: `personal` is a private chat; `groupChat` and `channel` are shared and addressed only
when the bot's own mention entity is in the activity (its `<at>…</at>` text is removed). A channel
post's conversation id carries its thread (`19:…@thread.tacv2;messageid=<root>`): the chat is the
channel, the thread its root message, so a reply goes back into the thread it answers.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import Any

from microsoft_agents.activity import Activity

from clawgate.channels.kit import Incoming, Sender

APPROVAL_KIND = "clawgate-approval"
THREAD_MARK = ";messageid="
_TAGS = re.compile(r"<[^>]+>")


@dataclass(frozen=True)
class Press:
    """An approval card's Action.Submit: the approval, the answer, and the prompt's secret it carried."""

    approval_id: str
    approved: bool
    secret: str
    sender: Sender
    chat_id: str
    thread_id: str | None
    message_id: str


def split_conversation(conversation_id: str) -> tuple[str, str | None]:
    """`19:x@thread.tacv2;messageid=17` -> ("19:x@thread.tacv2", "17"); other ids are whole chats."""
    chat, mark, thread = conversation_id.partition(THREAD_MARK)
    return (chat, thread) if mark and thread else (conversation_id, None)


def join_conversation(chat_id: str, thread_id: str | None) -> str:
    return f"{chat_id}{THREAD_MARK}{thread_id}" if thread_id else chat_id


def sender_of(activity: Activity) -> Sender | None:
    who = activity.from_property
    if who is None:
        return None
    user_id = str(getattr(who, "aad_object_id", None) or who.id or "").strip()
    if not user_id:
        return None
    return Sender(user_id=user_id.lower() if not user_id.startswith(("29:", "28:", "8:")) else user_id,
                  username=None, display=who.name or None)


def _text_without_mention(activity: Activity, bot_id: str) -> tuple[str, bool]:
    """The text with the bot's mention removed, and whether the bot was mentioned."""
    text = activity.text or ""
    mentioned = False
    for entity in activity.entities or []:
        data = entity.model_dump(by_alias=True, exclude_none=True, mode="json") if hasattr(entity, "model_dump") else dict(entity)
        if data.get("type") != "mention":
            continue
        mentioned_id = str((data.get("mentioned") or {}).get("id") or "")
        if mentioned_id != bot_id:
            continue
        mentioned = True
        shown = str(data.get("text") or "")
        if shown:
            text = text.replace(shown, " ")
    return text, mentioned


def plain_text(text: str) -> str:
    """What a person typed: Teams sends a message's text with its own markup (<at>, <p>, entities)."""
    text = re.sub(r"<br\s*/?>|</p>\s*<p>", "\n", text, flags=re.I)
    return html.unescape(_TAGS.sub("", text)).strip()


def press_of(activity: Activity, sender: Sender) -> Press | None:
    value = activity.value
    if not isinstance(value, dict) or value.get("kind") != APPROVAL_KIND:
        return None
    approval_id = str(value.get("approval_id") or "")
    if not approval_id or not isinstance(value.get("approve"), bool):
        return None
    chat, thread = split_conversation(str(activity.conversation.id if activity.conversation else ""))
    return Press(approval_id, value["approve"], str(value.get("secret") or ""), sender, chat, thread,
                 str(activity.id or ""))


def incoming_of(activity: Activity, sender: Sender, bot_id: str) -> Incoming | None:
    """None for what is not a message to answer (an edit, a reaction, a card submit of something else)."""
    if activity.type != "message" or not activity.id or activity.conversation is None:
        return None
    conversation = activity.conversation
    kind = str(conversation.conversation_type or "personal")
    private = kind == "personal"
    text, mentioned = _text_without_mention(activity, bot_id)
    chat, thread = split_conversation(str(conversation.id or ""))
    if not chat:
        return None
    text = plain_text(text)
    attachments = [a for a in activity.attachments or [] if not str(a.content_type or "").startswith("text/html")]
    metadata: dict[str, Any] = {"conversation_type": kind}
    if sender.display:  # how the model names the writer beside the id ("@Ada Lovelace (id …)"); Teams has no
        metadata["username"] = sender.display  # usernames, and Sender.username stays empty: a name is never bound
    if activity.reply_to_id:
        metadata["reply_to"] = str(activity.reply_to_id)
    tenant = (conversation.tenant_id or "") if hasattr(conversation, "tenant_id") else ""
    if tenant:
        metadata["tenant_id"] = str(tenant)
    return Incoming(message_id=str(activity.id), chat_id=chat, sender=sender, private=private, text=text,
                    addressed=private or mentioned, thread_id=None if private else thread, metadata=metadata,
                    sender_is_bot=str(getattr(activity.from_property, "role", "") or "") == "bot",
                    unreadable=not text and bool(attachments))
