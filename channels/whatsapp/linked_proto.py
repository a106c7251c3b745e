"""The protobuf messages the linked transport sends, built with neonize's own classes (imported when used).

Text goes out as a `Message` built here, never as a str through neonize's `send_message`: neonize turns
every `@digits` in a str into a mention, and an answer quoting a number must not ping anyone. A reply
quotes the message it answers as WhatsApp clients do (`contextInfo`: its id, its sender, its content).
"""

from __future__ import annotations

from typing import Any


def jid_of(chat_id: str) -> Any:
    """`15551234567@s.whatsapp.net` (or `…@g.us`, `…@lid`) as neonize's JID."""
    from neonize.proto.Neonize_pb2 import JID

    user, _, server = chat_id.rpartition("@")
    return JID(User=user, Server=server or "s.whatsapp.net", RawAgent=0, Device=0, Integrator=0, IsEmpty=False)


def _quote(quoted: Any) -> Any:
    from neonize.proto.waE2E.WAWebProtobufsE2E_pb2 import ContextInfo

    source = quoted.Info.MessageSource
    sender = source.SenderAlt if source.Sender.Server == "lid" and source.SenderAlt.User else source.Sender
    return ContextInfo(stanzaID=quoted.Info.ID, participant=f"{sender.User}@{sender.Server}",
                       quotedMessage=quoted.Message)


def text_message(text: str, quoted: Any | None = None) -> Any:
    """A text message; with `quoted` (the MessageEv answered), a reply quoting it."""
    from neonize.proto.waE2E.WAWebProtobufsE2E_pb2 import ExtendedTextMessage, Message

    if quoted is None:
        return Message(conversation=text)
    return Message(extendedTextMessage=ExtendedTextMessage(text=text, contextInfo=_quote(quoted)))


def document_message(upload: Any, name: str, mime: str, caption: str, size: int) -> Any:
    """A document from neonize's UploadResponse, as neonize's own build_document_message fills it."""
    from neonize.proto.waE2E.WAWebProtobufsE2E_pb2 import DocumentMessage, Message

    document = DocumentMessage(URL=upload.url, directPath=upload.DirectPath, mediaKey=upload.MediaKey,
                               fileEncSHA256=upload.FileEncSHA256, fileSHA256=upload.FileSHA256,
                               fileLength=upload.FileLength or size, mimetype=mime, fileName=name, title=name)
    if caption:
        document.caption = caption[:1024]
    return Message(documentMessage=document)


def composing() -> tuple[Any, Any]:
    from neonize.utils.enum import ChatPresence, ChatPresenceMedia

    return ChatPresence.CHAT_PRESENCE_COMPOSING, ChatPresenceMedia.CHAT_PRESENCE_MEDIA_TEXT


def read_receipt() -> Any:
    from neonize.utils.enum import ReceiptType

    return ReceiptType.READ


__all__ = ["composing", "document_message", "jid_of", "read_receipt", "text_message"]
