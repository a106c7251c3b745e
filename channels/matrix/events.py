"""Reading Matrix events: who is addressed, which thread, what text — pure functions on event dicts.

Why separate from the adapter: these are the platform's rules (mentions, reply fallbacks, threads,
edits), tested without a server; the adapter only moves events between the homeserver and the kit.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote

THREAD = "m.thread"
REPLACE = "m.replace"
APPROVE_KEYS = ("👍", "✅")
DENY_KEYS = ("👎", "❌")
FILE_TYPES = ("m.image", "m.file", "m.audio", "m.video")


def relates_to(content: dict[str, Any]) -> dict[str, Any]:
    value = content.get("m.relates_to")
    return value if isinstance(value, dict) else {}


def is_edit(content: dict[str, Any]) -> bool:
    """An edit (m.replace) re-sends a message already read; answering it would answer twice."""
    return relates_to(content).get("rel_type") == REPLACE


def thread_root(content: dict[str, Any]) -> str | None:
    """The thread's root event id when the message is in a thread (m.thread relation)."""
    rel = relates_to(content)
    if rel.get("rel_type") == THREAD and isinstance(rel.get("event_id"), str):
        return rel["event_id"]
    return None


def reply_to(content: dict[str, Any]) -> str | None:
    """The event a rich reply answers (m.in_reply_to), outside the thread fallback."""
    rel = relates_to(content)
    if rel.get("is_falling_back"):
        return None
    inner = rel.get("m.in_reply_to")
    if isinstance(inner, dict) and isinstance(inner.get("event_id"), str):
        return inner["event_id"]
    return None


def strip_reply_fallback(body: str) -> str:
    """Drop the quoted "> <@user> said" lines older clients put before a reply's own text."""
    lines = body.split("\n")
    if not lines or not lines[0].startswith("> "):
        return body
    while lines and lines[0].startswith(">"):
        lines.pop(0)
    while lines and not lines[0].strip():
        lines.pop(0)
    return "\n".join(lines)


def _link_targets(formatted: str) -> set[str]:
    """User ids linked as pills (https://matrix.to/#/@user:server) in an HTML body."""
    return {unquote(m) for m in re.findall(r'href="https://matrix\.to/#/(@[^"?/]+)', formatted)}


def mentions(content: dict[str, Any], user_id: str, display_name: str | None) -> bool:
    """Whether the message names the bot: m.mentions, a pill, the user id or the display name in the text."""
    declared = content.get("m.mentions")
    if isinstance(declared, dict) and user_id in (declared.get("user_ids") or []):
        return True
    formatted = content.get("formatted_body")
    if isinstance(formatted, str) and user_id in _link_targets(formatted):
        return True
    body = content.get("body") if isinstance(content.get("body"), str) else ""
    if user_id.lower() in body.lower():
        return True
    if display_name and re.search(rf"(?<!\w){re.escape(display_name)}(?!\w)", body, re.IGNORECASE):
        return True
    return False


def strip_mention(body: str, user_id: str, display_name: str | None) -> str:
    """The text without the bot's own name (a leading "Bot: " or an inline id), what the agent reads."""
    names = [re.escape(user_id)] + ([re.escape(display_name)] if display_name else [])
    pattern = rf"(?<!\w)(?:{'|'.join(names)})(?!\w)[:,]?\s*"
    return re.sub(r"[ \t]{2,}", " ", re.sub(pattern, "", body, flags=re.IGNORECASE)).strip()


def reaction_answer(key: str) -> bool | None:
    """👍 approves, 👎 denies (skin tones and variation selectors ignored); anything else is no answer."""
    if key.startswith(APPROVE_KEYS):
        return True
    if key.startswith(DENY_KEYS):
        return False
    return None


def mxc_parts(url: str) -> tuple[str, str] | None:
    """mxc://server/media_id -> (server, media_id); None for anything else."""
    match = re.fullmatch(r"mxc://([A-Za-z0-9.\-]+(?::\d{1,5})?)/([A-Za-z0-9_\-]+)", url or "")
    return (match.group(1), match.group(2)) if match else None
