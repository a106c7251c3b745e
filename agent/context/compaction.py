"""Compaction: what the model sees of old tool results, and how big the window is.

Older tool outputs are shown as one-line placeholders that name where the full text lives
(the session file and the record's seq, readable again with `memory_get`); the transcript on
disk is never touched. The rule is a pure function of the session's messages, so the same
history always projects to the same bytes (also after a restart):

- the newest `keep` messages are always shown raw;
- walking the older messages in order, compactable output (tool results of at least
  `min_chars`) is counted; when `chunk_chars` of it has piled up, the boundary jumps to the
  current edge and everything before it is compacted.

Because the boundary moves in coarse jumps, consecutive requests stay byte-identical
extensions between jumps, and at a jump the prefix up to the old boundary still holds.
State is cached per Session object, so a build costs O(new messages), not O(history).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any

from ..core.jsontext import encoder
from ..session import Session

Message = dict[str, Any]


@dataclass
class _State:
    start: int
    edge: int  # messages [start, edge) have been walked
    boundary: int  # messages [start, boundary) are shown compacted
    pending: int = 0  # compactable characters in [boundary, edge)
    compacted: list[Message] = field(default_factory=list)  # view of [start, boundary)
    compacted_chars: int = 0
    raw_sizes: list[int] = field(default_factory=list)  # serialized size of raw messages from `start`


_encode = encoder(compact=True)  # json.dumps(message, ensure_ascii=False, separators=(",", ":"))


def message_chars(message: Message) -> int:
    """Serialized size of one message, the basis of the chars/4 token estimate."""
    return len(_encode(message))


class Compactor:
    def __init__(self, *, keep: int = 12, chunk_chars: int = 40_000, min_chars: int = 600) -> None:
        self.keep = max(2, keep)  # >= 2: the last message may still change (notes, merged turns)
        self.chunk_chars = max(1, chunk_chars)
        self.min_chars = max(1, min_chars)
        self._states: weakref.WeakKeyDictionary[Session, _State] = weakref.WeakKeyDictionary()

    # public ------------------------------------------------------------------
    def view(self, session: Session, start: int) -> list[Message]:
        """The model's view of messages [start:]: compacted head + raw tail (a new list)."""
        window = session.llm_messages(start)
        state = self._advance(session, start, window)
        return state.compacted + window[state.boundary - start:]

    def boundary(self, session: Session, start: int) -> int:
        return self._advance(session, start, session.llm_messages(start)).boundary

    def estimate_tokens(self, session: Session, start: int) -> int:
        """≈ chars/4 of the view from `start`; cached sizes, only new messages are measured."""
        window = session.llm_messages(start)
        state = self._advance(session, start, window)
        sizes = state.raw_sizes
        if sizes:
            sizes.pop()  # the last measured message may have grown since (a note, a merged turn)
        for message in window[len(sizes):]:
            sizes.append(message_chars(message))
        return (state.compacted_chars + sum(sizes[state.boundary - start:])) // 4

    def message_tokens(self, session: Session, start: int) -> list[int]:
        """Per-message token estimates of the view from `start` (for choosing a cut)."""
        return [message_chars(m) // 4 for m in self.view(session, start)]

    def forget(self, session: Session) -> None:
        self._states.pop(session, None)

    # the rule ----------------------------------------------------------------
    def _advance(self, session: Session, start: int, window: list[Message]) -> _State:
        n = start + len(window)
        state = self._states.get(session)
        if state is None or state.start != start or state.edge > max(start, n - self.keep):
            state = self._states[session] = _State(start=start, edge=start, boundary=start)
        target = max(start, n - self.keep)
        while state.edge < target:
            state.pending += self._compactable(window[state.edge - start])
            state.edge += 1
            if state.pending >= self.chunk_chars:
                for index in range(state.boundary, state.edge):
                    shown = self._compact(session, index, window, start)
                    state.compacted.append(shown)
                    state.compacted_chars += message_chars(shown)
                state.boundary = state.edge
                state.pending = 0
        return state

    def _compactable(self, message: Message) -> int:
        if message["role"] != "user":
            return 0
        return sum(len(b["content"]) for b in message["content"] if _big_result(b, self.min_chars))

    def _compact(self, session: Session, index: int, window: list[Message], start: int) -> Message:
        message = window[index - start]
        if not self._compactable(message):
            return message
        names = _tool_names(window[index - start - 1]) if index > start else {}
        seq = session.message_seq(index)
        where = f"sessions/{session.path.name}"
        blocks = []
        for block in message["content"]:
            if _big_result(block, self.min_chars):
                name = names.get(block["tool_use_id"], "tool")
                head = " ".join(block["content"][:100].split())
                text = (f"[compacted: {name} output, {len(block['content'])} chars, began \"{head}…\". Full text: "
                        f"memory_get(path=\"{where}\", seq={seq})]")
                block = {**block, "content": text}
            blocks.append(block)
        return {"role": "user", "content": blocks}


def _big_result(block: dict[str, Any], min_chars: int) -> bool:
    return block.get("type") == "tool_result" and isinstance(block.get("content"), str) and len(block["content"]) >= min_chars


def _tool_names(message: Message) -> dict[str, str]:
    if message.get("role") != "assistant":
        return {}
    return {b["id"]: b["name"] for b in message["content"] if b.get("type") == "tool_use"}
