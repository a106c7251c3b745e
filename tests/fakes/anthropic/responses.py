"""Building response bodies: ids, compact JSON, error types and content blocks.

Why separate: both the JSON and the streaming (SSE) paths send the same pieces,
shaped like the real API's.
"""

from __future__ import annotations

import json
import os
from typing import Any

from tests.fakes.anthropic.replies import Reply

_ERROR_TYPES: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}

_ERROR_MESSAGES: dict[str, str] = {
    "invalid_request_error": "Invalid request",
    "authentication_error": "invalid x-api-key",
    "permission_error": "Your API key does not have permission to use the specified resource.",
    "not_found_error": "Not found",
    "request_too_large": "Request exceeds the maximum allowed number of bytes.",
    "rate_limit_error": "Number of request tokens has exceeded your per-minute rate limit",
    "api_error": "Internal server error",
    "overloaded_error": "Overloaded",
}

_REASONS: dict[int, str] = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    408: "Request Timeout",
    409: "Conflict",
    413: "Payload Too Large",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
    529: "Overloaded",
}


def _new_id(prefix: str) -> str:
    """A random id shaped like the real API's (``msg_…``, ``toolu_…``)."""
    return prefix + os.urandom(12).hex()


def _dumps(obj: Any) -> str:
    """Compact JSON, as the real API sends it."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def _content_blocks(reply: Reply) -> list[dict]:
    """Response content: a text block (omitted if empty with tool calls), then tool_use blocks."""
    blocks: list[dict] = []
    if reply.text or not reply.tool_calls:
        blocks.append({"type": "text", "text": reply.text})
    for call in reply.tool_calls:
        blocks.append(
            {
                "type": "tool_use",
                "id": call.get("id") or _new_id("toolu_"),
                "name": call["name"],
                "input": call.get("input") or {},
            }
        )
    return blocks


def _estimate_output(content: list[dict]) -> int:
    """Rough token count (~4 chars per token), at least 1 like the real API."""
    n = 0
    for b in content:
        n += len(b["text"]) if b["type"] == "text" else len(b["name"]) + len(_dumps(b["input"]))
    return max(1, n // 4)
