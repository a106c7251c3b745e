"""Linked-device mode at neonize's boundary: the fake client cannot drift from neonize (its signatures and
protobufs are compared with the installed library), and a neonize MessageEv becomes the right Incoming."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import pytest
from neonize.client import NewClient
from neonize.events import MessageEv
from neonize.proto.Neonize_pb2 import JID, MessageInfo, MessageSource
from neonize.proto.waCommon.WACommon_pb2 import MessageKey
from neonize.proto.waE2E.WAWebProtobufsE2E_pb2 import (
    AudioMessage,
    ContextInfo,
    ExtendedTextMessage,
    ImageMessage,
    Message,
    ProtocolMessage,
    ReactionMessage,
    StickerMessage,
)

from clawgate.channels.kit import Incoming
from clawgate.channels.whatsapp.linked_client import LinkedClient
from clawgate.channels.whatsapp.linked_events import Me, Reaction, classify
from clawgate.channels.whatsapp.linked_proto import jid_of, text_message
from tests.fakes.whatsapp_linked.client import FakeEvent, FakeNewClient
from tests.fakes.whatsapp_linked.wire import filled

ME = Me(number="15550009999", lid="880000000001")


def _methods() -> list[str]:
    own = {name for name, _ in inspect.getmembers(LinkedClient, inspect.isfunction) if not name.startswith("_")}
    return sorted(own)


@pytest.mark.parametrize("method", ["__init__", *_methods()])
def test_the_fake_client_has_neonizes_signature_for_every_method_the_adapter_calls(method: str) -> None:
    real, fake = inspect.signature(getattr(NewClient, method)), inspect.signature(getattr(FakeNewClient, method))

    def shape(sig: inspect.Signature) -> list[tuple[str, Any, Any]]:
        return [(p.name, p.kind, p.default) for p in sig.parameters.values()]

    assert shape(fake) == shape(real), f"neonize's NewClient.{method} is {real}, the fake's {fake}"


def test_the_adapter_subscribes_the_same_neonize_events_on_the_real_client_and_on_the_fake(tmp_path: Any) -> None:
    from neonize.events import INT_TO_EVENT, ConnectedEv, DisconnectedEv, LoggedOutEv

    from clawgate.channels.whatsapp.linked import LinkedAdapter

    adapter = object.__new__(LinkedAdapter)  # only its handlers are wanted: nothing connects
    real, fake = NewClient(str(tmp_path / "session.db"), uuid="signature-check"), FakeNewClient("unused")
    for client in (real, fake):
        LinkedAdapter._subscribe(adapter, client)  # type: ignore[arg-type]
    assert set(real.event.list_func) == set(fake.event.list_func)
    subscribed = {INT_TO_EVENT[code] for code in real.event.list_func}
    assert {MessageEv, ConnectedEv, LoggedOutEv, DisconnectedEv} <= subscribed
    assert real.event._qr == adapter._on_qr and fake.event._qr == adapter._on_qr
    real_qr = inspect.signature(type(real.event).qr)
    assert list(inspect.signature(FakeEvent.qr).parameters) == list(real_qr.parameters)


def _jid(text: str) -> JID:
    return jid_of(text)


def _event(content: Message, *, chat: str, sender: str, from_me: bool = False, alt: str = "",
           message_id: str = "3A0001") -> Any:
    source = MessageSource(Chat=_jid(chat), Sender=_jid(sender), IsFromMe=from_me, IsGroup=chat.endswith("@g.us"))
    if alt:
        source.SenderAlt.CopyFrom(_jid(alt))
    event = MessageEv(Info=MessageInfo(MessageSource=source, ID=message_id, Pushname="Mallory the Owner"),
                      Message=content)
    return MessageEv.FromString(filled(event).SerializeToString())  # as neonize hands it over: decoded bytes


async def _no_download(_message: Any) -> bytes:
    return b""


def _classify(event: Any, sent: tuple[str, ...] = ()) -> Incoming | Reaction | None:
    return classify(event, ME, lambda mid: mid in sent, _no_download)


def test_a_direct_message_is_private_and_addressed_and_names_the_number_never_the_push_name() -> None:
    found = _classify(_event(Message(conversation="hi"), chat="15551234567@s.whatsapp.net",
                             sender="15551234567@s.whatsapp.net"))
    assert isinstance(found, Incoming)
    assert (found.chat_id, found.private, found.addressed, found.text) == ("15551234567@s.whatsapp.net", True, True, "hi")
    assert found.sender.user_id == "15551234567" and found.sender.display == "Mallory the Owner"


def test_a_lid_sender_is_its_number_when_whatsapp_gives_it_else_the_lid() -> None:
    with_number = _classify(_event(Message(conversation="x"), chat="77001@lid", sender="77001@lid",
                                   alt="15551234567@s.whatsapp.net"))
    only_lid = _classify(_event(Message(conversation="x"), chat="77001@lid", sender="77001@lid"))
    assert isinstance(with_number, Incoming) and with_number.sender.user_id == "15551234567"
    assert isinstance(only_lid, Incoming) and only_lid.sender.user_id == "77001@lid" and only_lid.sender.username is None


def test_in_a_group_only_a_mention_or_a_reply_to_the_bot_addresses_it() -> None:
    group, friend = "120363000000000001@g.us", "15551234567@s.whatsapp.net"
    plain = _classify(_event(Message(conversation="lunch?"), chat=group, sender=friend))
    mention = ContextInfo(mentionedJID=[f"{ME.number}@s.whatsapp.net"])
    mentioned = _classify(_event(Message(extendedTextMessage=ExtendedTextMessage(
        text=f"@{ME.number} what time is it?", contextInfo=mention)), chat=group, sender=friend))
    by_lid = _classify(_event(Message(extendedTextMessage=ExtendedTextMessage(
        text=f"@{ME.lid} hi", contextInfo=ContextInfo(mentionedJID=[f"{ME.lid}@lid"]))), chat=group, sender=friend))
    reply = ContextInfo(stanzaID="3EB0SENT", participant=f"{ME.number}@s.whatsapp.net")
    replied = _classify(_event(Message(extendedTextMessage=ExtendedTextMessage(text="and then?", contextInfo=reply)),
                               chat=group, sender=friend))
    assert isinstance(plain, Incoming) and not plain.addressed and not plain.private
    assert isinstance(mentioned, Incoming) and mentioned.addressed and mentioned.text == "what time is it?"
    assert isinstance(by_lid, Incoming) and by_lid.addressed and by_lid.text == "hi"
    assert isinstance(replied, Incoming) and replied.addressed and replied.metadata["reply_to"] == "3EB0SENT"


def test_status_broadcasts_newsletters_edits_and_the_owners_messages_to_others_are_never_taken_in() -> None:
    text = Message(conversation="look at my holiday")
    assert _classify(_event(text, chat="status@broadcast", sender="15551234567@s.whatsapp.net")) is None
    assert _classify(_event(text, chat="120363999@newsletter", sender="120363999@newsletter")) is None
    assert _classify(_event(text, chat="15551234567@s.whatsapp.net", sender=f"{ME.number}@s.whatsapp.net",
                            from_me=True)) is None  # the owner writing to a friend from the phone
    assert _classify(_event(text, chat="120363000000000001@g.us", sender=f"{ME.number}@s.whatsapp.net",
                            from_me=True)) is None
    edit = _event(text, chat="15551234567@s.whatsapp.net", sender="15551234567@s.whatsapp.net")
    edit.IsEdit = True
    assert _classify(edit) is None
    echo = _event(text, chat=f"{ME.number}@s.whatsapp.net", sender=f"{ME.number}@s.whatsapp.net", from_me=True,
                  message_id="3EB0MINE")
    assert _classify(echo, sent=("3EB0MINE",)) is None  # what this device sent, seen again
    keys = _event(Message(protocolMessage=ProtocolMessage(type=0)), chat="15551234567@s.whatsapp.net",
                  sender="15551234567@s.whatsapp.net")
    assert _classify(keys) is None


def test_the_owners_message_yourself_chat_is_a_private_chat_with_the_owner() -> None:
    found = _classify(_event(Message(conversation="remind me"), chat=f"{ME.number}@s.whatsapp.net",
                             sender=f"{ME.number}@s.whatsapp.net", from_me=True))
    assert isinstance(found, Incoming) and found.private and found.addressed
    assert found.sender.user_id == ME.number and found.chat_id == f"{ME.number}@s.whatsapp.net"


def test_a_reaction_names_the_message_it_is_on_and_whether_it_approves() -> None:
    def react(emoji: str) -> Any:
        content = Message(reactionMessage=ReactionMessage(key=MessageKey(ID="3EB0PROMPT", fromMe=True), text=emoji))
        return _classify(_event(content, chat="15551234567@s.whatsapp.net", sender="15551234567@s.whatsapp.net"))

    yes, no, other = react("👍"), react("👎"), react("😂")
    assert isinstance(yes, Reaction) and yes.target_id == "3EB0PROMPT" and yes.approved is True
    assert isinstance(no, Reaction) and no.approved is False
    assert isinstance(other, Reaction) and other.approved is None


def test_media_becomes_files_fetched_through_the_client_only_when_asked() -> None:
    asked: list[Any] = []

    async def download(message: Any) -> bytes:
        asked.append(message)
        return b"\x89PNG"

    image = _event(Message(imageMessage=ImageMessage(caption="what is this?", mimetype="image/png", fileLength=4)),
                   chat="15551234567@s.whatsapp.net", sender="15551234567@s.whatsapp.net")
    voice = _event(Message(audioMessage=AudioMessage(PTT=True, mimetype="audio/ogg; codecs=opus", fileLength=9)),
                   chat="15551234567@s.whatsapp.net", sender="15551234567@s.whatsapp.net")
    sticker = _event(Message(stickerMessage=StickerMessage(mimetype="image/webp")),
                     chat="15551234567@s.whatsapp.net", sender="15551234567@s.whatsapp.net")
    found = classify(image, ME, lambda _m: False, download)
    heard = classify(voice, ME, lambda _m: False, download)
    assert isinstance(found, Incoming) and found.text == "what is this?" and found.files[0].kind == "image"
    assert isinstance(heard, Incoming) and heard.files[0].kind == "voice"
    assert not asked
    assert asyncio.run(found.files[0].fetch()) == b"\x89PNG" and asked[0].HasField("imageMessage")
    unread = _classify(sticker)
    assert isinstance(unread, Incoming) and unread.unreadable and not unread.files


def test_a_reply_quotes_the_message_it_answers_as_whatsapp_clients_do() -> None:
    asked = _event(Message(conversation="what is 2+2?"), chat="77001@lid", sender="77001@lid",
                   alt="15551234567@s.whatsapp.net", message_id="3A0042")
    reply = text_message("4, and @15550000000 is not pinged", asked)
    context = reply.extendedTextMessage.contextInfo
    assert (context.stanzaID, context.participant) == ("3A0042", "15551234567@s.whatsapp.net")
    assert context.quotedMessage.conversation == "what is 2+2?" and not context.mentionedJID
    assert text_message("plain").conversation == "plain"
