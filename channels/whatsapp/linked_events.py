"""One neonize `MessageEv` (whatsmeow's decrypted message, as protobuf) as the kit's Incoming, or a reaction.

Identity is the sender's JID as WhatsApp vouches for it (the Signal session it came through), never the
push name (anyone can call themselves anything): the phone number's digits (`15551234567`) when WhatsApp
shows the number, and `<digits>@lid` when it shows only the sender's LID (WhatsApp's privacy-preserving
id, used in groups that hide numbers); a LID-addressed message that carries the number too (`SenderAlt`)
counts as the number. Chats are named by their JID without a device (`15551234567@s.whatsapp.net`,
`1203630…@g.us`, `…@lid`). Status updates (`status@broadcast`), broadcast lists and newsletters are
never answered.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from clawgate.channels.kit import Incoming, IncomingFile, Sender

PHONE_SERVER = "s.whatsapp.net"
LID_SERVER = "lid"
GROUP_SERVER = "g.us"
IGNORED_SERVERS = ("broadcast", "newsletter")  # status@broadcast, broadcast lists, channels
APPROVE_REACTIONS = ("👍", "✅", "👌")
DENY_REACTIONS = ("👎", "❌", "🚫")

_NOT_SAID = {"protocolMessage", "senderKeyDistributionMessage", "messageContextInfo"}
Download = Callable[[Any], Awaitable[bytes]]  # a waE2E.Message carrying media -> its bytes


def jid_text(jid: Any) -> str:
    """A JID without its device and agent parts: `user@server` (whatsmeow's ToNonAD, as text)."""
    return f"{jid.User}@{jid.Server}" if jid.User else str(jid.Server)


def identity(jid: Any) -> str:
    """The person's id: the number for a phone JID, `<digits>@lid` for a LID."""
    return str(jid.User) if jid.Server == PHONE_SERVER else jid_text(jid)


def sender_jid(source: Any) -> Any:
    """The sender's phone JID when WhatsApp gives it, else the JID the message came from (a LID)."""
    sender = source.Sender
    if sender.Server == LID_SERVER and source.SenderAlt.User and source.SenderAlt.Server == PHONE_SERVER:
        return source.SenderAlt
    return sender


@dataclass(frozen=True)
class Me:
    """The linked account's own ids, to find the bot's mentions and the owner's "message yourself" chat."""

    number: str  # digits
    lid: str  # digits, or "" when not known yet

    def jids(self) -> set[str]:
        return {f"{self.number}@{PHONE_SERVER}", *([f"{self.lid}@{LID_SERVER}"] if self.lid else [])}

    def is_me(self, jid: Any) -> bool:
        return jid_text(jid) in self.jids()


@dataclass(frozen=True)
class Reaction:
    """A reaction to a message (an approval when it is on a prompt and comes from an owner)."""

    message_id: str  # the reaction's own id
    target_id: str  # the message reacted to
    emoji: str
    chat_id: str
    sender: Sender

    @property
    def approved(self) -> bool | None:
        return True if self.emoji in APPROVE_REACTIONS else False if self.emoji in DENY_REACTIONS else None


def _inner(message: Any) -> Any:
    """The message inside WhatsApp's wrappers (ephemeral, view-once, document-with-caption)."""
    for wrapper in ("ephemeralMessage", "viewOnceMessage", "viewOnceMessageV2", "documentWithCaptionMessage"):
        if message.HasField(wrapper):
            return _inner(getattr(message, wrapper).message)
    return message


def _context(message: Any) -> Any | None:
    for kind in ("extendedTextMessage", "imageMessage", "documentMessage", "audioMessage", "videoMessage"):
        if message.HasField(kind) and getattr(message, kind).HasField("contextInfo"):
            return getattr(message, kind).contextInfo
    return None


def _strip_mentions(text: str, me: Me) -> str:
    for user in (me.number, me.lid):
        if user:
            text = text.replace(f"@{user}", " ")
    return " ".join(text.split(" ")).strip()


def classify(event: Any, me: Me, sent: Callable[[str], bool], download: Download) -> Incoming | Reaction | None:
    """What the kit should see of `event` (a neonize MessageEv), or None for what is never answered:
    status and newsletters, edits and protocol messages, our own sends, and what the account's owner
    writes to other people from their phone (only their "message yourself" chat is a conversation)."""
    info, source = event.Info, event.Info.MessageSource
    chat = source.Chat
    if chat.Server in IGNORED_SERVERS or event.IsEdit or not info.ID or sent(info.ID):
        return None
    group = chat.Server == GROUP_SERVER
    if source.IsFromMe and (group or not me.is_me(chat)):
        return None  # the account's own messages to others (sent from the phone): not for the agent
    who = f"{me.number}@{PHONE_SERVER}" if source.IsFromMe else jid_text(sender_jid(source))
    user_id = me.number if source.IsFromMe else identity(sender_jid(source))
    # the number is also the name people know a WhatsApp user by (as Signal's adapter does); a LID has none
    sender = Sender(user_id=user_id, username=user_id if user_id.isdigit() else None, display=info.Pushname or None)
    chat_id = jid_text(chat)
    message = _inner(event.Message)
    if message.HasField("reactionMessage"):
        reaction = message.reactionMessage
        return Reaction(info.ID, reaction.key.ID, reaction.text, chat_id, sender)
    text, files, unreadable = "", [], False
    if message.conversation:
        text = message.conversation
    elif message.HasField("extendedTextMessage"):
        text = message.extendedTextMessage.text
    else:
        media = _media(message)
        if media is None:
            if {field.name for field, _ in message.ListFields()} <= _NOT_SAID:
                return None  # key distribution, revokes, history notices: nothing a person said
            unreadable = True
        else:
            kind, name, mime, size, caption = media
            text = caption
            files.append(IncomingFile(name=name, size=size, mime=mime, kind=kind,  # type: ignore[arg-type]
                                      fetch=lambda whole=message: download(whole)))
    context = _context(message)
    mentioned = bool(context is not None and any(j in me.jids() for j in context.mentionedJID))
    replied_to_me = bool(context is not None and context.stanzaID and
                         (context.participant in me.jids() or sent(context.stanzaID)))
    metadata: dict[str, Any] = {"wa_jid": who}
    if context is not None and context.stanzaID:
        metadata["reply_to"] = context.stanzaID
    return Incoming(message_id=info.ID, chat_id=chat_id, sender=sender, private=not group,
                    text=_strip_mentions(text, me) if group else text, addressed=not group or mentioned or replied_to_me,
                    files=tuple(files), metadata=metadata, unreadable=unreadable and not text)


def _media(message: Any) -> tuple[str, str | None, str | None, int | None, str] | None:
    """(kind, file name, mime, size, caption) of a media message."""
    for field, kind in (("imageMessage", "image"), ("audioMessage", "voice"), ("documentMessage", "file"),
                        ("videoMessage", "file")):
        if message.HasField(field):
            part = getattr(message, field)
            if field == "audioMessage" and not part.PTT:
                kind = "file"  # an audio file sent as a file, not a voice note
            name = getattr(part, "fileName", "") or None
            caption = getattr(part, "caption", "") or ""
            return kind, name, part.mimetype or None, int(part.fileLength) or None, caption
    return None


__all__ = ["Me", "Reaction", "classify", "identity", "jid_text", "sender_jid"]
