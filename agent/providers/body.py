"""The Messages API request body, serialised once per message instead of once per request.

A session's history only grows: the messages the model saw last turn are the same objects
this turn (the session log projects them append-only and replaces, never edits, a message it
extends). So each message's JSON is kept and the body is the join of what is already encoded
plus the new messages, and a 1,000-turn conversation costs about what a 10-turn one does,
apart from the bytes themselves. Handing the SDK ready bytes also skips its per-request walk
over the whole body (a deep copy that grew with the history), while its transport, streaming
types and errors stay in use.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any

from .base import ModelRequest

_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode


class BodyEncoder:
    """Encodes request bodies, reusing each message's JSON while the message object is unchanged.

    Keyed by object identity (with the object kept alive, so an id is never reused meanwhile):
    a message is never edited in place once projected, so identity means equal content. The
    cache holds only the messages of a session's latest request, for the most recently used
    sessions whose encodings fit in `max_bytes`, and at most `max_sessions` of them (as many as
    the session manager keeps in memory: a session read again from its log has new message
    objects, so an entry older than that would only hold dead messages alive). The count alone
    would not do: one small enough for long conversations was thrashed by many short ones (100
    busy sessions cycling through a cache of 64 re-encoded every history on every request).

    The usual request is the last one plus new messages at the end: that is recognised by one
    list comparison (identity first, in C) and only the new messages are encoded, so no Python
    loop runs over the whole history. Anything else (a replaced message, a moved window) falls
    back to looking each message up by identity.
    """

    def __init__(self, max_bytes: int = 16 << 20, max_sessions: int = 256) -> None:
        self.max_bytes = max_bytes
        self.max_sessions = max_sessions
        # session -> (the messages of its latest request, their encodings in order, their total size)
        self._sessions: OrderedDict[str, tuple[list[dict[str, Any]], list[bytes], int]] = OrderedDict()
        self._held_bytes = 0
        # The system prompt and tool list are the same (or equal) from one request to the next.
        self._stable: dict[str, tuple[Any, bytes]] = {}

    def encode(self, request: ModelRequest, model: str, *, stream: bool) -> bytes:
        parts = [b'{"model":', _encode(model).encode(), b',"max_tokens":', str(int(request.max_tokens)).encode(),
                 b',"system":', self._stable_part("system", request.system)]
        if request.tools:
            parts += [b',"tools":', self._stable_part("tools", request.tools)]
        if request.cache_control:
            parts += [b',"cache_control":', _encode(request.cache_control).encode()]
        if stream:
            parts.append(b',"stream":true')
        parts += [b',"messages":[', b",".join(self._messages(request.session_key, request.messages)), b"]}"]
        return b"".join(parts)

    def forget(self, key: str) -> None:
        """Drop a session's entry (it left memory; the messages it holds would only be kept alive)."""
        entry = self._sessions.pop(key, None)
        if entry is not None:
            self._held_bytes -= entry[2]

    def _stable_part(self, name: str, value: Any) -> bytes:
        cached = self._stable.get(name)
        if cached is not None and (cached[0] is value or cached[0] == value):
            return cached[1]
        encoded = _encode(value).encode()
        self._stable[name] = (value, encoded)
        return encoded

    def _messages(self, key: str, messages: list[dict[str, Any]]) -> list[bytes]:
        seen, encoded, size = self._sessions.pop(key, None) or ([], [], 0)
        self._held_bytes -= size
        held = len(seen)
        if held <= len(messages) and messages[:held] == seen:  # the last request plus new messages
            new = [_encode(m).encode() for m in messages[held:]]
            parts, size = encoded + new, size + sum(map(len, new))
        else:
            known = {id(m): (m, e) for m, e in zip(seen, encoded)}
            parts = []
            for message in messages:
                hit = known.get(id(message))
                parts.append(hit[1] if hit is not None and hit[0] is message else _encode(message).encode())
            size = sum(map(len, parts))
        if key:
            self._sessions[key] = (list(messages), parts, size)
            self._held_bytes += size
            while len(self._sessions) > 1 and (self._held_bytes > self.max_bytes
                                               or len(self._sessions) > self.max_sessions):
                self._held_bytes -= self._sessions.popitem(last=False)[1][2]
        return parts
