"""What a session log may hold: its keys and file names, the shape of each record, and the masking of
secrets before a record is written.

Kept apart from the log itself (agent/session.py) because these rules are pure: the gateway checks a
key a client sent, the memory tools name a log's file, and recovery validates a record read back,
all without opening a session.
"""

from __future__ import annotations

import unicodedata
from pathlib import Path
from typing import Any, Callable
from urllib.parse import quote, unquote

from .core.errors import DomainError
from .core.redact import redact

Record = dict[str, Any]
# "note": a runtime line attached to the latest user message (identity restatement mid-run).
LLM_KINDS = ("user", "assistant", "tool_results", "note")


MAX_SESSION_KEY_CHARS = 200
MAX_FILE_NAME_BYTES = 255  # what Linux and macOS file systems allow for one name
ARCHIVE_SUFFIX_BYTES = len(".20250101T000000.archived")  # what `reset` adds to the stem
# Characters a key may not hold: controls, format characters (bidi overrides), surrogates (not
# encodable), unassigned and private-use code points, line and paragraph separators.
_FORBIDDEN_CATEGORIES = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}


class InvalidSessionKey(DomainError):
    """A session key that cannot name a session (its log would be unwritable or ambiguous)."""


def check_session_key(key: object) -> str:
    """Return `key` if it can name a session, else raise InvalidSessionKey (one line, the limit named).

    Every place a key enters (gateway params, cron jobs, channel key builders) calls this, so a
    key that would make its log file unwritable never reaches the agent: such a message would
    fail on every attempt and its inbox row would replay forever.
    """
    if not isinstance(key, str) or not key:
        raise InvalidSessionKey("session key is empty; give a name such as \"main\"")
    if len(key) > MAX_SESSION_KEY_CHARS:
        raise InvalidSessionKey(f"session key is {len(key)} characters; the limit is {MAX_SESSION_KEY_CHARS}")
    for ch in key:
        if unicodedata.category(ch) in _FORBIDDEN_CATEGORIES:
            raise InvalidSessionKey(f"session key contains the control or format character U+{ord(ch):04X}; "
                                    "use printable characters only")
    stem_limit = MAX_FILE_NAME_BYTES - ARCHIVE_SUFFIX_BYTES
    stem = len(quote(key, safe=""))
    if stem > stem_limit:
        raise InvalidSessionKey(f"session key encodes to a {stem}-byte file name; the limit is {stem_limit} bytes "
                                "(ASCII letters, digits and . - _ ~ take 1 byte, other ASCII 3, other characters 6 to 12): use a shorter "
                                "or plainer key")
    return key


def session_file_name(key: str) -> str:
    """The log's file name in the sessions folder (archived logs: `<stem>.<time>.archived`)."""
    return quote(key, safe="") + ".jsonl"




def record_problem(record: object) -> str | None:
    """Why a decoded log line cannot be a record (None: it can). Checked on load, so a line of
    valid JSON but the wrong shape (hand-edited, written by another version) is skipped rather
    than breaking every later projection of the session. Unknown kinds are kept and ignored."""
    if not isinstance(record, dict):
        return f"a JSON {type(record).__name__}, not an object"
    kind = record.get("kind")
    if not isinstance(kind, str):
        return "no kind"
    for name in ("seq", "ts"):
        value = record.get(name, 0)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"{name} is not a number"
    if not isinstance(record.get("run_id", ""), str) or not isinstance(record.get("id", ""), str):
        return "an id is not a string"
    check = _SHAPES.get(kind)
    return check(record) if check else None


def _is_text(value: object) -> bool:
    return isinstance(value, str)


def _is_content(value: object) -> bool:
    """Tool output: a string or a list of content blocks."""
    return isinstance(value, str) or (isinstance(value, list) and all(isinstance(b, dict) for b in value))


def _user_shape(r: Record) -> str | None:
    if not _is_text(r.get("text")) or not isinstance(r.get("context") or "", str):
        return "user turn without text"
    if not isinstance(r.get("inbound_id") or "", str):
        return "inbound_id is not a string"
    if r.get("channel") is not None and (not _is_text(r.get("channel")) or "chat_id" not in r):
        return "channel without chat_id"
    deliver = r.get("deliver")
    if deliver is not None and not (isinstance(deliver, dict) and "channel" in deliver and "chat_id" in deliver):
        return "deliver is not a target"
    return None


def _assistant_shape(r: Record) -> str | None:
    content = r.get("content")
    if not isinstance(content, list) or not content:
        return "assistant turn without content"
    for block in content:
        if not isinstance(block, dict) or not _is_text(block.get("type")):
            return "content block without type"
        if block["type"] == "text" and not _is_text(block.get("text")):
            return "text block without text"
        if block["type"] == "tool_use" and not (_is_text(block.get("id")) and _is_text(block.get("name"))
                                                and isinstance(block.get("input", {}), dict)):
            return "tool_use block without id, name or input"
    return None


def _tool_results_shape(r: Record) -> str | None:
    results = r.get("results")
    if not isinstance(results, list) or not all(
            isinstance(x, dict) and _is_text(x.get("tool_use_id")) and _is_content(x.get("content")) for x in results):
        return "tool results without tool_use_id or content"
    return None


_SHAPES: dict[str, Callable[[Record], str | None]] = {
    "user": _user_shape,
    "assistant": _assistant_shape,
    "tool_results": _tool_results_shape,
    "note": lambda r: None if _is_text(r.get("text")) else "note without text",
    "tool_intent": lambda r: None if _is_text(r.get("name")) and r.get("id") else "tool intent without id or name",
    "tool_done": lambda r: None if r.get("id") and _is_content(r.get("content")) else "tool result without id or content",
    "consolidated": lambda r: None if isinstance(r.get("upto"), int) and not isinstance(r.get("upto"), bool)
    and r["upto"] >= 0 else "consolidation without upto",
    "event": lambda r: None if isinstance(r.get("name", ""), str) else "event name is not a string",
    "delivered": lambda r: None if _is_text(r.get("text")) and isinstance(r.get("origin"), dict)
    and _is_text(r.get("outbox_id")) else "delivered answer without text, origin or outbox_id",
}


# Structural fields stay as written (ids must match across records); every other string in a
# record — what people typed, tool inputs, tool output — is masked by redact().
_RECORD_FIELDS = frozenset({"seq", "ts", "kind", "id", "inbound_id", "run_id", "channel", "chat_id", "sender_id",
                            "name", "status", "deliver", "upto", "outbox_id"})
_BLOCK_FIELDS = frozenset({"type", "id", "name", "tool_use_id"})


def _redacted(value: Any, verbatim: frozenset[str] = _RECORD_FIELDS) -> Any:
    """A copy of a record with configured secrets and token patterns masked in its text: the log
    is kept for months and read back by tools, so a key an approved `env` printed stays out."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: v if k in verbatim else
                _redacted(v, _BLOCK_FIELDS if k in ("content", "results") else frozenset())
                for k, v in value.items()}
    if isinstance(value, list):
        return [_redacted(v, verbatim) for v in value]
    return value


def _key_of(path: Path) -> str:
    return unquote(path.name[: -len(".jsonl")])
