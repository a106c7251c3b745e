"""A stand-in for neonize's `NewClient`, loaded in the daemon by WHATSAPP_LINKED_TEST_CLIENT.

It has the methods the linked transport calls with neonize's exact signatures (tests/unit/channels/whatsapp/
test_linked_fake.py compares them with the installed neonize), takes and returns neonize's own protobuf
classes and raises neonize's own exceptions, and behaves as neonize does where the adapter can tell:
`connect()` blocks for the session's life; event handlers run on one callback thread (not the caller's),
one at a time, `client.me` set before ConnectedEv; a lost connection is DisconnectedEv and whatsmeow's
automatic reconnection (ConnectedEv again); a send while disconnected fails as whatsmeow's
"websocket not connected"; `stop()` makes `connect()` return.

Where the fake knows more than WhatsApp says: it tells the fake server when a handler returned
("handled"), which the tests read as the acknowledgement; real neonize acknowledges before the handler
runs (docs/whatsapp.md, "What a crash can lose").
"""

from __future__ import annotations

import itertools
import os
import queue
import socket
import threading
import time
from pathlib import Path
from typing import Any, Callable

from neonize.events import EVENT_TO_INT, INT_TO_EVENT, ConnectedEv, DisconnectedEv
from neonize.exc import DownloadError, MarkReadError, NeonizeError, PairPhoneError, SendMessageError, SendPresenceError, \
    UploadError
from neonize.proto.Neonize_pb2 import JID, Device, SendResponse, UploadResponse
from neonize.proto.waE2E.WAWebProtobufsE2E_pb2 import Message
from neonize.utils.enum import ChatPresence, ChatPresenceMedia, ClientName, ClientType, MediaType, ReceiptType

from tests.fakes.whatsapp_linked.wire import SERVER_VARIABLE, Lines, no_delay, pack, send_line, unpack

RECONNECT_SECONDS = 0.3
QR_CODE = -1  # the QR callback's turn on the callback thread (neonize calls it outside its event codes)


def _server() -> tuple[str, int]:
    host, _, port = os.environ[SERVER_VARIABLE].rpartition(":")
    return host, int(port)


def stored_device(path: Path) -> str | None:
    """The fake WhatsApp says whether this account's device is linked (and not logged out)."""
    try:
        with socket.create_connection(_server(), timeout=5) as sock:
            send_line(sock, {"op": "device", "account": path.parent.name})
            answer = Lines(sock).read() or {}
    except OSError:
        return "unreachable@s.whatsapp.net"  # as a real session database: known without the network
    jid = answer.get("jid")
    return str(jid) if jid else None


def open_client(path: Path, name: str) -> "FakeNewClient":
    return FakeNewClient(str(path), uuid=name)


class FakeEvent:
    """neonize's `client.event`: `event(EventClass)(handler)` and `event.qr(callback)`."""

    def __init__(self, client: "FakeNewClient") -> None:
        self.client = client
        self.list_func: dict[int, Callable[[Any, Any], None]] = {}
        self._qr: Callable[[Any, bytes], None] = lambda _c, _d: None

    def __call__(self, event: type) -> Callable[[Callable[[Any, Any], None]], None]:
        def register(func: Callable[[Any, Any], None]) -> None:
            self.list_func[EVENT_TO_INT[event]] = func
        return register

    def qr(self, f: Callable[[Any, bytes], None]) -> None:
        self._qr = f


class FakeNewClient:
    def __init__(self, name: str, jid: JID | None = None, props: Any = None, uuid: str | None = None,
                 new_device: bool = False) -> None:
        self.name = name
        self.uuid = (uuid or name).encode()
        self.event = FakeEvent(self)
        self.me: Device | None = None
        self.connected = False
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._ids = itertools.count(1)
        self._waiting: dict[int, "queue.Queue[dict[str, Any]]"] = {}
        self._events: "queue.Queue[tuple[int, int, Any] | None]" = queue.Queue()

    # -- the session ------------------------------------------------------------------------------------
    def connect(self, proxy_settings: Any = None) -> None:
        """Blocks until stop(); reconnects by itself after a lost connection, as whatsmeow does."""
        dispatcher = threading.Thread(target=self._dispatch, name=f"{self.uuid.decode()}-callbacks", daemon=True)
        dispatcher.start()
        try:
            first = True
            while not self._stopped.is_set():
                try:
                    sock = no_delay(socket.create_connection(_server(), timeout=5))
                except OSError as exc:
                    if first:
                        raise NeonizeError(f"failed to dial whatsapp servers: {exc}") from None
                    self._stopped.wait(RECONNECT_SECONDS)
                    continue
                first = False
                self._session(sock)
                if not self._stopped.is_set():
                    self._events.put((0, EVENT_TO_INT[DisconnectedEv], DisconnectedEv()))
                    self._stopped.wait(RECONNECT_SECONDS)
        finally:
            self._events.put(None)
            dispatcher.join(10)

    def _session(self, sock: socket.socket) -> None:
        sock.settimeout(None)
        lines = Lines(sock)
        with self._lock:
            send_line(sock, {"op": "hello", "account": Path(self.name).parent.name})
        hello = lines.read()
        if hello is None:
            sock.close()
            return
        self._sock = sock
        if hello["op"] == "qr":  # no linked session: whatsmeow offers pairing codes, on another thread than the reader
            for code in hello["codes"]:
                self._events.put((0, QR_CODE, code.encode()))
        else:
            self.me = unpack(Device, hello["me"])
        if hello["op"] == "welcome":
            self._events.put((0, EVENT_TO_INT[ConnectedEv], ConnectedEv()))
        try:
            while (line := lines.read()) is not None:
                if line["op"] == "qr":  # the next pairing code, while no phone linked this device
                    for code in line["codes"]:
                        self._events.put((0, QR_CODE, code.encode()))
                elif line["op"] == "event":
                    cls = INT_TO_EVENT[line["code"]]
                    self._events.put((line["seq"], line["code"], unpack(cls, line["data"])))
                    if cls is ConnectedEv:
                        self.me = unpack(Device, line["me"])
                elif line["op"] in ("result", "error"):
                    waiter = self._waiting.get(line["id"])
                    if waiter is not None:
                        waiter.put(line)
        finally:
            self._sock = None
            sock.close()
            for waiter in list(self._waiting.values()):
                waiter.put({"op": "error", "error": "SendMessageError", "text": "websocket not connected"})

    def _dispatch(self) -> None:
        """neonize's CallbackFunction: one thread, one event at a time, the handler's return awaited."""
        while (item := self._events.get()) is not None:
            seq, code, event = item
            handler = self.event.list_func.get(code) if code != QR_CODE else self.event._qr
            if handler is not None:
                handler(self, event)
            if seq:
                sock = self._sock
                if sock is not None:
                    with self._lock:
                        try:
                            send_line(sock, {"op": "handled", "seq": seq})
                        except OSError:
                            pass

    def stop(self) -> None:
        self._stopped.set()
        sock = self._sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def disconnect(self) -> None:
        self.stop()

    # -- calls ------------------------------------------------------------------------------------------
    def _call(self, method: str, error: type[Exception], **args: Any) -> dict[str, Any]:
        sock = self._sock
        if sock is None:
            raise error("websocket not connected")
        call_id = next(self._ids)
        waiter: "queue.Queue[dict[str, Any]]" = queue.Queue()
        self._waiting[call_id] = waiter
        try:
            with self._lock:
                send_line(sock, {"op": "call", "id": call_id, "method": method, **args})
            try:
                answer = waiter.get(timeout=30)
            except queue.Empty:
                raise error("timed out waiting for response") from None
        except OSError:
            raise error("websocket not connected") from None
        finally:
            self._waiting.pop(call_id, None)
        if answer["op"] == "error":
            raise error(answer["text"])
        return answer

    def send_message(self, to: JID | str, message: Message | str, link_preview: bool = False,
                     ghost_mentions: str | None = None, mentions_are_lids: bool = False,
                     add_msg_secret: bool = False) -> SendResponse:
        if isinstance(to, str):
            to = JID(User=to, Server="s.whatsapp.net")
        if isinstance(message, str):
            message = Message(conversation=message)
        answer = self._call("send_message", SendMessageError, to=pack(to), message=pack(message))
        response = unpack(SendResponse, answer["value"])
        response.Message.CopyFrom(message)
        return response

    def send_chat_presence(self, jid: JID, state: ChatPresence, media: ChatPresenceMedia) -> None:
        self._call("send_chat_presence", SendPresenceError, jid=pack(jid), state=state.value, media=media.value)

    def mark_read(self, *message_ids: str, chat: JID, sender: JID, receipt: ReceiptType,
                  timestamp: int | None = None) -> None:
        self._call("mark_read", MarkReadError, ids=list(message_ids), chat=pack(chat), sender=pack(sender),
                   receipt=receipt.value.decode(), timestamp=timestamp or int(time.time()))

    def download_any(self, message: Message, path: str | None = None) -> None | bytes:
        answer = self._call("download_any", DownloadError, message=pack(message))
        import base64

        data = base64.b64decode(answer["value"])
        if path:
            Path(path).write_bytes(data)
            return None
        return data

    def upload(self, binary: bytes, media_type: MediaType | None = None) -> UploadResponse:
        import base64

        answer = self._call("upload", UploadError, data=base64.b64encode(binary).decode(),
                            media_type=(media_type or MediaType.MediaDocument).value)
        return unpack(UploadResponse, answer["value"])

    def get_me(self) -> Device:
        if self.me is None:
            raise NeonizeError("not logged in")
        return self.me

    def PairPhone(self, phone: str, show_push_notification: bool, client_name: ClientName = ClientName.LINUX,  # noqa: N802
                  client_type: ClientType | None = None) -> str:
        answer = self._call("pair_phone", PairPhoneError, phone=phone)
        return str(answer["value"])
