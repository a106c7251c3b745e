"""The fake's line protocol between the fake neonize client (in the daemon) and the fake WhatsApp (in the test).

One JSON object a line over a loopback TCP socket; protobufs (neonize's own classes) travel as base64 of
their serialized bytes, so both sides speak exactly the messages neonize hands the adapter.
"""

from __future__ import annotations

import base64
import json
import socket
from typing import Any

SERVER_VARIABLE = "WHATSAPP_LINKED_TEST_SERVER"  # host:port of the fake WhatsApp, for the fake client


def pack(message: Any) -> str:
    return base64.b64encode(message.SerializeToString()).decode()


def unpack(cls: type, data: str) -> Any:
    return cls.FromString(base64.b64decode(data))


def no_delay(sock: socket.socket) -> socket.socket:
    """Each line leaves at once: the socket stands in for neonize's in-process calls into Go, and Nagle's
    algorithm against the peer's delayed ACK would add up to 40 ms to a line written behind another."""
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def send_line(sock: socket.socket, obj: dict[str, Any]) -> None:
    sock.sendall((json.dumps(obj) + "\n").encode())


class Lines:
    """Reads whole JSON lines from a socket; None at the end of the stream."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.buffer = sock, b""

    def read(self) -> dict[str, Any] | None:
        while b"\n" not in self.buffer:
            try:
                chunk = self.sock.recv(65536)
            except OSError:
                return None
            if not chunk:
                return None
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)  # type: ignore[no-any-return]


def filled(message: Any) -> Any:
    """`message` with every required field it lacks set to Go's zero value, as neonize's encoder writes them
    (neonize's protos are proto2 with required fields: whatsmeow's structs always carry them all)."""
    from google.protobuf.descriptor import FieldDescriptor

    for field in message.DESCRIPTOR.fields:
        is_message = field.type == FieldDescriptor.TYPE_MESSAGE
        if field.is_repeated:
            if is_message:
                for item in getattr(message, field.name):
                    filled(item)
            continue
        if is_message:
            if field.is_required or message.HasField(field.name):
                sub = getattr(message, field.name)
                filled(sub)
                sub.SetInParent()
        elif field.is_required and not message.HasField(field.name):
            setattr(message, field.name, field.default_value)
    return message
