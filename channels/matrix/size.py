"""How big a message is where Matrix measures it: the event the homeserver stores.

Why not the text's length: Synapse refuses an event whose canonical JSON is over 65,536 bytes
(M_TOO_LARGE), and the event carries the plain body *and* the HTML copy (where `&` is `&amp;` and a
table is mostly tags), and in an encrypted room the whole content is encrypted and base64-encoded
(a third more) inside an m.room.encrypted event. A chunk that fits `max_message_bytes` as text can
be twice that as an event; sized here, it is split before it is sent.
"""

from __future__ import annotations

import json
from typing import Any, Callable

from clawgate.channels.kit.markdown import split_markdown

EVENT_LIMIT = 65_536  # Synapse's limit on one event's canonical JSON, in bytes
PDU_RESERVE = 3_000  # what the server adds around the content: ids, hashes, signatures, auth and prev events
ROOM_ID_BYTES = 255  # the longest room id, inside the encrypted payload
MEGOLM_OVERHEAD = 1 + 10 + 8 + 64  # version, index and length varints, MAC, Ed25519 signature
ENCRYPTED_FIELDS = 400  # algorithm, sender_key, session_id, device_id and the JSON around them


def event_bytes(content: dict[str, Any], *, encrypted: bool) -> int:
    """The stored event's size in bytes, on the generous side (never under the real size)."""
    if not encrypted:
        return len(json.dumps(content, ensure_ascii=False, separators=(",", ":")).encode()) + PDU_RESERVE
    payload = {"type": "m.room.message", "content": content, "room_id": "!" + "x" * ROOM_ID_BYTES}
    # the payload as a client may serialise it before encrypting (\u escapes are the longer spelling)
    plain = len(json.dumps(payload, ensure_ascii=True, separators=(",", ":")).encode())
    cipher = (plain // 16 + 1) * 16 + MEGOLM_OVERHEAD  # AES-CBC with its padding
    return (cipher * 4 + 2) // 3 + ENCRYPTED_FIELDS + PDU_RESERVE  # unpadded base64


def fit_events(pieces: list[str], measure: Callable[[str], int], limit: int = EVENT_LIMIT) -> list[str]:
    """`pieces` (Markdown) with every one whose event would be over `limit` split smaller, in order."""
    fitted: list[str] = []
    for piece in pieces:
        size = measure(piece)
        text_bytes = len(piece.encode())
        if size <= limit or text_bytes < 2:
            fitted.append(piece)
            continue
        smaller = split_markdown(piece, max(1, int(text_bytes * limit / size * 0.9)), measure=_utf8_len)
        if len(smaller) < 2:
            smaller = split_markdown(piece, max(1, text_bytes // 2), measure=_utf8_len)
        fitted.extend(fit_events(smaller, measure, limit) if len(smaller) > 1 else smaller)
    return fitted


def _utf8_len(text: str) -> int:
    return len(text.encode())


__all__ = ["EVENT_LIMIT", "event_bytes", "fit_events"]
