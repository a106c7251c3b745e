"""Request shape checks: reject what the real Messages API would reject.

Why separate: these rules catch real client bugs (empty content, unpaired tool
calls) and are the fake's biggest single piece of logic.
"""

from __future__ import annotations

from typing import Any


def _validate(body: Any) -> str | None:
    """Return an error message if the request would be rejected by the real API.

    Checks the rules that catch real client bugs: required fields, non-empty
    messages/content, unique tool_use ids, and tool_use/tool_result pairing
    between an assistant message and the user message right after it.
    """
    if not isinstance(body, dict):
        return "request body must be a JSON object"
    model = body.get("model")
    if not isinstance(model, str) or not model:
        return "model: Field required"
    max_tokens = body.get("max_tokens")
    if max_tokens is None:
        return "max_tokens: Field required"
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        return "max_tokens: Input should be a valid integer greater than or equal to 1"
    messages = body.get("messages")
    if messages is None:
        return "messages: Field required"
    if not isinstance(messages, list):
        return "messages: Input should be a valid list"
    if not messages:
        return "messages: at least one message is required"

    last = len(messages) - 1
    seen_tool_ids: set[str] = set()
    prev_tool_ids: list[str] = []  # tool_use ids of the immediately preceding assistant message
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            return f"messages.{i}: Input should be a valid dictionary"
        role = m.get("role")
        if role not in ("user", "assistant"):
            return f"messages.{i}.role: Input should be 'user' or 'assistant'"
        content = m.get("content")
        may_be_empty = i == last and role == "assistant"
        this_tool_ids: list[str] = []
        result_ids: set[str] = set()
        if isinstance(content, str):
            if not content and not may_be_empty:
                return (
                    f"messages.{i}: all messages must have non-empty content except for "
                    "the optional final assistant message"
                )
        elif isinstance(content, list):
            if not content and not may_be_empty:
                return (
                    f"messages.{i}: all messages must have non-empty content except for "
                    "the optional final assistant message"
                )
            for j, b in enumerate(content):
                where = f"messages.{i}.content.{j}"
                if not isinstance(b, dict) or not isinstance(b.get("type"), str):
                    return f"{where}: Input should be a valid content block"
                btype = b["type"]
                if btype == "text":
                    t = b.get("text")
                    if not isinstance(t, str):
                        return f"{where}.text: Field required"
                    if not t.strip():
                        return "messages: text content blocks must contain non-whitespace text"
                elif btype == "tool_use":
                    if role != "assistant":
                        return f"{where}: `tool_use` blocks can only be in `assistant` messages"
                    tid = b.get("id")
                    if not isinstance(tid, str) or not tid:
                        return f"{where}.id: Field required"
                    if not isinstance(b.get("name"), str):
                        return f"{where}.name: Field required"
                    if not isinstance(b.get("input"), dict):
                        return f"{where}.input: Input should be a valid dictionary"
                    if tid in seen_tool_ids:
                        return f"messages: `tool_use` ids must be unique; duplicate id: {tid}"
                    seen_tool_ids.add(tid)
                    this_tool_ids.append(tid)
                elif btype == "tool_result":
                    if role != "user":
                        return f"{where}: `tool_result` blocks can only be in `user` messages"
                    tid = b.get("tool_use_id")
                    if tid not in prev_tool_ids:
                        return (
                            f"{where}: unexpected `tool_use_id` found in `tool_result` blocks: {tid}. "
                            "Each `tool_result` block must have a corresponding `tool_use` block "
                            "in the previous message."
                        )
                    result_ids.add(tid)
        else:
            return f"messages.{i}.content: Input should be a valid string or list"

        if prev_tool_ids:
            missing = [t for t in prev_tool_ids if t not in result_ids]
            if missing:
                return (
                    f"messages.{i - 1}: `tool_use` ids were found without `tool_result` blocks "
                    f"immediately after: {', '.join(missing)}. Each `tool_use` block must have a "
                    "corresponding `tool_result` block in the next message."
                )
        prev_tool_ids = this_tool_ids
    return None
