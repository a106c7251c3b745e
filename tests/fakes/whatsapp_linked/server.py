"""The fake WhatsApp the fake neonize client talks to (tests/fakes/whatsapp_linked/client.py), in the test process.

It holds what WhatsApp would: which accounts' devices are linked, the people writing (their messages
built as neonize's `MessageEv` protobufs, as whatsmeow decodes them: DMs, groups with mentions and
quoted replies, the account's own "message yourself" chat, status broadcasts, reactions, media), and
records what the device sent (neonize `Message` protobufs), presences and read receipts. Failures are
injected as whatsmeow's errors (rate-overlimit, a refusal), a logged-out device, or the server gone.
An event is delivered again after a reconnect until the client says its handler returned.

It runs in the test process and every daemon's fake client connects to it, so it sees all of a fleet: per
account, the linked sessions open now (`sessions`), ever (`logins`) and the most at once (`peak`); WhatsApp
takes a device connected twice for a stolen session, so more than one at once is the fleet's failure.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import re
import secrets
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from neonize.events import EVENT_TO_INT, ConnectedEv, LoggedOutEv, MessageEv, PairStatusEv
from neonize.proto.Neonize_pb2 import JID, Device, MessageInfo, MessageSource, SendResponse, UploadResponse
from neonize.proto.waE2E.WAWebProtobufsE2E_pb2 import (
    AudioMessage,
    ContextInfo,
    DocumentMessage,
    ExtendedTextMessage,
    ImageMessage,
    Message,
    ReactionMessage,
)

from neonize.proto.waCommon.WACommon_pb2 import MessageKey

from tests.fakes.whatsapp_linked.wire import Lines, filled, no_delay, pack, send_line, unpack

BOT_NUMBER = "15550009999"
BOT_LID = "880000000001"
GROUP = "120363000000000001@g.us"
PHONE = "s.whatsapp.net"
FIRST_CODE = "2@fake-ref-0,fake-noise,fake-identity,fake-adv"  # what WhatsApp offers first to a device linking
# whatsmeow's pairing-code alphabet (pair-code.go's linkingBase32): 8 of these, given as ABCD-EFGH
PAIRING_ALPHABET = "123456789ABCDEFGHJKLMNPQRSTVWXYZ"


def jid(text: str) -> JID:
    user, _, server = text.rpartition("@")
    return JID(User=user, Server=server, RawAgent=0, Device=0, Integrator=0, IsEmpty=False)


def text_of(message: Message) -> str:
    if message.conversation:
        return message.conversation
    if message.HasField("extendedTextMessage"):
        return message.extendedTextMessage.text
    if message.HasField("documentMessage"):
        return message.documentMessage.caption
    return ""


@dataclass
class Sent:
    account: str
    to: str
    message: Message
    id: str
    at: float

    @property
    def text(self) -> str:
        return text_of(self.message)

    @property
    def quoted(self) -> str:
        if self.message.HasField("extendedTextMessage"):
            return self.message.extendedTextMessage.contextInfo.stanzaID
        return ""


@dataclass
class Account:
    number: str = BOT_NUMBER
    lid: str = BOT_LID
    linked: bool = True
    conns: list[socket.socket] = field(default_factory=list)
    pairings: list[tuple[str, str]] = field(default_factory=list)  # (number, code) a linking device asked for
    pairing_conns: dict[str, socket.socket] = field(default_factory=dict)  # code -> the connection that asked
    sessions: list[socket.socket] = field(default_factory=list)  # the connections logged in as the linked device
    logins: int = 0  # linked sessions opened, ever
    peak: int = 0  # the most linked sessions open at once: more than one is what WhatsApp logs a device out for


class FakeWhatsAppLinked:
    def __init__(self) -> None:
        self.accounts: dict[str, Account] = {}
        self.sent: list[Sent] = []
        self.attempts: list[float] = []
        self.presences: list[tuple[str, str]] = []  # (account, chat)
        self.reads: list[tuple[str, list[str]]] = []  # (chat, ids)
        self.media: dict[str, bytes] = {}
        self.events: dict[int, tuple[str, dict[str, Any]]] = {}  # seq -> (account, line)
        self.handled: set[int] = set()
        self._failures: list[str] = []
        self._pairing_failures: list[str] = []
        self._seq = itertools.count(1)
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None
        self._threads: list[threading.Thread] = []
        self.port = 0

    # -- lifecycle --------------------------------------------------------------------------------------
    def start(self) -> None:
        listener = socket.create_server(("127.0.0.1", self.port))
        self.port = listener.getsockname()[1]
        self._listener = listener
        thread = threading.Thread(target=self._accept, args=(listener,), daemon=True)
        thread.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            try:
                listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread: close() alone would not
            except OSError:
                pass
            listener.close()
        for account in self.accounts.values():
            for conn in list(account.conns):
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                conn.close()
            account.conns.clear()
            account.sessions.clear()

    def account(self, name: str = "default") -> Account:
        with self._lock:
            if name not in self.accounts:
                number = BOT_NUMBER if not self.accounts else f"1555000{9000 + len(self.accounts)}"
                self.accounts[name] = Account(number=number, lid=f"88000000{len(self.accounts) + 1:04d}")
            return self.accounts[name]

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(no_delay(conn),), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        lines = Lines(conn)
        account: Account | None = None
        lock = threading.Lock()
        try:
            while (line := lines.read()) is not None:
                op = line["op"]
                if op == "device":
                    found = self.account(line["account"])
                    send_line(conn, {"jid": f"{found.number}@{PHONE}" if found.linked else None})
                elif op == "hello":
                    name = line["account"]
                    account = self.account(name)
                    account.conns.append(conn)
                    if not account.linked:
                        send_line(conn, {"op": "qr", "codes": [FIRST_CODE]})
                        continue
                    with self._lock:
                        account.sessions.append(conn)
                        account.logins += 1
                        account.peak = max(account.peak, len(account.sessions))
                    with lock:
                        send_line(conn, {"op": "welcome", "me": pack(self._device(account))})
                        for seq, (owner, event) in sorted(self.events.items()):
                            if owner == name and seq not in self.handled:
                                send_line(conn, event)
                elif op == "handled":
                    self.handled.add(int(line["seq"]))
                elif op == "call":
                    with lock:
                        send_line(conn, self._answer(account, line, conn))
        except OSError:
            pass
        finally:
            if account is not None and conn in account.conns:
                account.conns.remove(conn)
            with self._lock:
                if account is not None and conn in account.sessions:
                    account.sessions.remove(conn)
            conn.close()

    def _device(self, account: Account) -> Device:
        return filled(Device(JID=jid(f"{account.number}@{PHONE}"), LID=jid(f"{account.lid}@lid"), PushName="clawgate",
                             Initialized=True))

    # -- what the device calls --------------------------------------------------------------------------
    def _answer(self, account: Account | None, call: dict[str, Any], conn: socket.socket) -> dict[str, Any]:
        method, call_id = call["method"], call["id"]
        name = next((n for n, a in self.accounts.items() if a is account), "default")
        if method == "send_message":
            self.attempts.append(time.monotonic())
            if self._failures:
                return {"op": "error", "id": call_id, "text": self._failures.pop(0)}
            message_id = f"3EB0{next(self._ids):012X}"
            to = unpack(JID, call["to"])
            self.sent.append(Sent(name, f"{to.User}@{to.Server}", unpack(Message, call["message"]), message_id,
                                  time.monotonic()))
            response = filled(SendResponse(ID=message_id, Timestamp=int(time.time())))
            return {"op": "result", "id": call_id, "value": pack(response)}
        if method == "send_chat_presence":
            chat = unpack(JID, call["jid"])
            self.presences.append((name, f"{chat.User}@{chat.Server}"))
            return {"op": "result", "id": call_id}
        if method == "mark_read":
            chat = unpack(JID, call["chat"])
            self.reads.append((f"{chat.User}@{chat.Server}", list(call["ids"])))
            return {"op": "result", "id": call_id}
        if method == "upload":
            data = base64.b64decode(call["data"])
            url = f"https://mmg.whatsapp.net/fake/{hashlib.sha256(data).hexdigest()[:16]}"
            self.media[url] = data
            upload = filled(UploadResponse(url=url, DirectPath=url.removeprefix("https://mmg.whatsapp.net"),
                                    MediaKey=b"k" * 32, FileEncSHA256=hashlib.sha256(b"enc" + data).digest(),
                                    FileSHA256=hashlib.sha256(data).digest(), FileLength=len(data)))
            return {"op": "result", "id": call_id, "value": pack(upload)}
        if method == "download_any":
            message = unpack(Message, call["message"])
            for kind in ("imageMessage", "audioMessage", "documentMessage", "videoMessage"):
                if message.HasField(kind) and getattr(message, kind).URL in self.media:
                    data = self.media[getattr(message, kind).URL]
                    return {"op": "result", "id": call_id, "value": base64.b64encode(data).decode()}
            return {"op": "error", "id": call_id, "text": "failed to download media: 404"}
        if method == "pair_phone":  # whatsmeow's PairPhone: the number's digits checked, then a code
            digits = re.sub(r"[^0-9]", "", call["phone"])
            if len(digits) <= 6:
                return {"op": "error", "id": call_id, "text": "phone number too short"}
            if digits.startswith("0"):
                return {"op": "error", "id": call_id, "text": "international phone number required (must not start with 0)"}
            if self._pairing_failures:
                return {"op": "error", "id": call_id, "text": self._pairing_failures.pop(0)}
            code = "".join(secrets.choice(PAIRING_ALPHABET) for _ in range(8))
            code = f"{code[:4]}-{code[4:]}"
            if account is not None:
                account.pairings.append((digits, code))
                account.pairing_conns[code] = conn
            return {"op": "result", "id": call_id, "value": code}
        return {"op": "error", "id": call_id, "text": f"the fake has no {method}"}

    # -- the test's side --------------------------------------------------------------------------------
    def fail_next(self, text: str) -> None:
        self._failures.append(text)

    def refuse_next_pairing(self, text: str) -> None:
        """WhatsApp answers the next pairing-code request with this error (whatsmeow's text)."""
        self._pairing_failures.append(text)

    def log_out(self, account: str = "default") -> None:
        """The phone removed this linked device: no session from now on, and a connected one is told."""
        found = self.account(account)
        found.linked = False
        self._push(account, LoggedOutEv(OnConnect=False, Reason=2))

    def rotate(self, account: str = "default") -> str:
        """WhatsApp offers the next pairing code (about every 20 s) to each connection still waiting to link."""
        code = f"2@fake-ref-{next(self._seq)},fake-noise,fake-identity,fake-adv"
        for conn in list(self.account(account).conns):
            try:
                send_line(conn, {"op": "qr", "codes": [code]})
            except OSError:
                pass
        return code

    def scan(self, account: str = "default") -> None:
        """The phone scanned the QR code (or typed the pairing code): the device is linked."""
        found = self.account(account)
        found.linked = True
        self._push(account, PairStatusEv(ID=jid(f"{found.number}@{PHONE}"), Status=1))
        self._push(account, ConnectedEv(status=True), me=pack(self._device(found)))

    def type_code(self, code: str, account: str = "default") -> bool:
        """The account's phone types a pairing code under "Link with phone number": it links the device
        when it is a code WhatsApp gave for this phone's number to a device still connected and waiting;
        any other (wrong, for another number, or its device gone: expired) is refused on the phone."""
        found = self.account(account)
        if (found.number, code) not in found.pairings or found.pairing_conns.get(code) not in found.conns:
            return False
        self.scan(account)
        return True

    def _push(self, account: str, event: Any, **extra: Any) -> int:
        seq = next(self._seq)
        line = {"op": "event", "seq": seq, "code": EVENT_TO_INT[type(event)], "data": pack(filled(event)), **extra}
        if isinstance(event, MessageEv):
            self.events[seq] = (account, line)
        for conn in list(self.account(account).conns):
            try:
                send_line(conn, line)
            except OSError:
                pass
        return seq

    def message(self, user: str, content: Message, *, chat: str | None = None, account: str = "default",
                from_me: bool = False, lid_only: bool = False, message_id: str | None = None) -> int:
        """`user` (digits) writes `content`; in `chat` (a group's JID) or in private. Returns the event's seq."""
        sender = jid(f"{BOT_LID if lid_only else user}@{'lid' if lid_only else PHONE}")
        me = self.account(account)
        if from_me:
            sender = jid(f"{me.number}@{PHONE}")
        chat_jid = jid(chat) if chat else (jid(f"{me.number}@{PHONE}") if from_me else sender)
        source = MessageSource(Chat=chat_jid, Sender=sender, IsFromMe=from_me, IsGroup=bool(chat and chat.endswith("@g.us")))
        info = MessageInfo(MessageSource=source, ID=message_id or f"ABCD{next(self._ids):012X}", Pushname="Someone",
                           Timestamp=int(time.time()), Type="text")
        return self._push(account, MessageEv(Info=info, Message=content))

    def text(self, user: str, text: str, **kwargs: Any) -> int:
        return self.message(user, Message(conversation=text), **kwargs)

    def group_text(self, user: str, text: str, *, mention: bool, account: str = "default",
                   reply_to: Sent | None = None) -> int:
        me = self.account(account)
        context = ContextInfo()
        if mention:
            text = f"@{me.number} {text}"
            context.mentionedJID.append(f"{me.number}@{PHONE}")
        if reply_to is not None:
            context.stanzaID = reply_to.id
            context.participant = f"{me.number}@{PHONE}"
            context.quotedMessage.CopyFrom(reply_to.message)
        return self.message(user, Message(extendedTextMessage=ExtendedTextMessage(text=text, contextInfo=context)),
                            chat=GROUP, account=account)

    def react(self, user: str, target: Sent, emoji: str, account: str = "default") -> int:
        key = MessageKey(remoteJID=target.to, fromMe=True, ID=target.id)
        return self.message(user, Message(reactionMessage=ReactionMessage(key=key, text=emoji)), account=account)

    def media_message(self, user: str, kind: str, data: bytes, *, caption: str = "", name: str = "",
                      mime: str = "application/octet-stream", account: str = "default") -> int:
        url = f"https://mmg.whatsapp.net/fake/in-{hashlib.sha256(data).hexdigest()[:16]}"
        self.media[url] = data
        common = {"URL": url, "mimetype": mime, "fileLength": len(data), "mediaKey": b"k" * 32}
        if kind == "image":
            content = Message(imageMessage=ImageMessage(caption=caption, **common))
        elif kind == "voice":
            content = Message(audioMessage=AudioMessage(PTT=True, seconds=2, **common))
        else:
            content = Message(documentMessage=DocumentMessage(fileName=name, caption=caption, **common))
        return self.message(user, content, account=account)

    def redeliver(self, seq: int) -> None:
        account, line = self.events[seq]
        for conn in list(self.account(account).conns):
            send_line(conn, line)

    def to(self, chat: str, account: str | None = None) -> list[Sent]:
        return [s for s in list(self.sent) if s.to == chat and (account is None or s.account == account)]
