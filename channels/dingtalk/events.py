"""A robot message (the SDK's ChatbotMessage) -> the kit's Incoming. No I/O.

Who wrote is `senderStaffId`: the organisation's user id of the sender, set by DingTalk on the envelope our
authenticated Stream connection received, and the id `oToMessages/batchSend` addresses. A sender outside the
organisation has none; then `senderId` (the app-scoped `$:LWCP_v1:$…` id) names them, so they can still be
paired (a reply to them goes only through the session webhook). `senderNick` is only the Sender's display:
it never admits anyone and is never a username (allow_from matches usernames), since a nickname is anyone's
to choose.

A 1:1 chat (`conversationType` "1") is the sender's own id as the chat, so a cron result or a late approval
reaches them through the OpenAPI by that id; a group (`conversationType` "2") is its `conversationId` (the
open conversation id the group send takes). DingTalk delivers a group message only when the robot is
@mentioned (`isInAtList`), with the mention already cut from the text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Awaitable, Callable

from clawgate.channels.kit import Incoming, IncomingFile, Sender

if TYPE_CHECKING:  # the SDK is imported only when the channel connects
    from dingtalk_stream import ChatbotMessage

Fetch = Callable[[str], Awaitable[bytes]]  # a downloadCode -> the file's bytes

PRIVATE = "1"
GROUP = "2"


def sender_id(message: ChatbotMessage) -> str:
    return str(message.sender_staff_id or message.sender_id or "")


def chat_of(message: ChatbotMessage) -> str:
    return sender_id(message) if str(message.conversation_type) == PRIVATE else str(message.conversation_id or "")


def _text(message: ChatbotMessage) -> str:
    if message.message_type == "text" and message.text is not None:
        return str(message.text.content or "")
    if message.message_type == "richText" and message.rich_text_content is not None:
        return "".join(str(part.get("text") or "") for part in message.rich_text_content.rich_text_list or []
                       if isinstance(part, dict))
    content = message.extensions.get("content")
    if message.message_type == "audio" and isinstance(content, dict) and str(content.get("recognition") or "").strip():
        return f"[voice message, transcribed by DingTalk] {str(content['recognition']).strip()}"
    return ""


def _files(message: ChatbotMessage, fetch: Fetch) -> tuple[IncomingFile, ...]:
    """Pictures (alone or in rich text) and files, fetched by their downloadCode only once the sender was
    admitted. All are saved in the sender's workspace: DingTalk names no picture's image type before the
    download, and the model must not be told a PNG is a JPEG."""
    found: list[tuple[str, str | None]] = []  # (downloadCode, file name)
    content = message.extensions.get("content")
    if message.message_type == "file" and isinstance(content, dict) and content.get("downloadCode"):
        found.append((str(content["downloadCode"]), str(content.get("fileName") or "") or None))
    elif message.message_type in ("picture", "richText"):
        found += [(str(code), None) for code in message.get_image_list() or [] if code]
    return tuple(IncomingFile(name=name or "picture", size=None, mime=None,
                              fetch=(lambda c=code: fetch(c)), kind="file")  # type: ignore[misc]
                 for code, name in found)


def incoming(message: ChatbotMessage, raw: dict[str, Any], fetch: Fetch) -> Incoming | None:
    """The kit's Incoming, or None for what names no message, sender or chat."""
    user, chat = sender_id(message), chat_of(message)
    if not message.message_id or not user or not chat:
        return None
    private = str(message.conversation_type) == PRIVATE
    text = _text(message).strip()
    files = _files(message, fetch)
    return Incoming(
        message_id=str(message.message_id),
        chat_id=chat,
        # DingTalk has no username: the id is the handle too (allow_from and owner name ids only, and the
        # model reads "@<id> (id <id>)"); the nickname is display only.
        sender=Sender(user_id=user, username=user, display=str(message.sender_nick or "") or None),
        private=private,
        text=text,
        addressed=private or bool(message.is_in_at_list),
        files=files,
        unreadable=not text and not files,  # a video, a voice message without a transcription
        metadata={"dingtalk_conversation_id": str(message.conversation_id or ""),
                  "dingtalk_conversation_type": str(message.conversation_type or ""),
                  "dingtalk_create_at": raw.get("createAt")},
    )
