"""Reading the user's text out of a Messages request body.

Why separate: the same readers serve ``enqueue_for`` routing, the default echo
responder and tests that inspect recorded requests.
"""

from __future__ import annotations

from typing import Any


def _blocks_text(content: Any) -> str:
    """Text of a message ``content`` given as a string or a list of blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            b.get("text", "")
            for b in content
            if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
        )
    return ""


def last_user_text(body: dict) -> str:
    """Text of the last user message ("" if it holds only tool_result blocks)."""
    messages = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(messages, list):
        return ""
    for m in reversed(messages):
        if isinstance(m, dict) and m.get("role") == "user":
            return _blocks_text(m.get("content"))
    return ""


def _routing_text(body: dict) -> str:
    """Text used by ``enqueue_for``: the latest user message that has any text.

    Why not strictly the last user message: in a tool loop the follow-up request
    ends with a tool_result-only user message, and it must still route to the
    script of the session (human turn) that started the loop.
    """
    messages = body.get("messages")
    if not isinstance(messages, list):
        return ""
    for m in reversed(messages):
        if isinstance(m, dict) and m.get("role") == "user":
            t = _blocks_text(m.get("content"))
            if t:
                return t
    return ""


def last_user_block(body: dict) -> str:
    """The last text block of the last user message: what the person typed, without any
    context block a client puts before it."""
    messages = body.get("messages") if isinstance(body, dict) else None
    for m in reversed(messages if isinstance(messages, list) else []):
        if isinstance(m, dict) and m.get("role") == "user":
            content = m.get("content")
            if isinstance(content, str):
                return content
            texts = [b.get("text", "") for b in content or [] if isinstance(b, dict) and b.get("type") == "text"]
            return texts[-1] if texts else ""
    return ""


def tool_results(bodies: list[dict]) -> list[str]:
    """Every tool_result content the model was sent, across these request bodies, in order."""
    out: list[str] = []
    for body in bodies:
        for message in body["messages"]:
            if message["role"] == "user" and isinstance(message["content"], list):
                out += [str(b.get("content")) for b in message["content"] if b.get("type") == "tool_result"]
    return out
