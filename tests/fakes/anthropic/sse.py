"""Streaming event encoding: a reply as the real API's server-sent events.

Why separate: the SSE event sequence (message_start, ping, block deltas,
message_delta, message_stop) and its chunked HTTP framing are a protocol detail
of their own.
"""

from __future__ import annotations

from tests.fakes.anthropic.responses import _dumps, _new_id


def _chunks(s: str, n: int) -> list[str]:
    """Split ``s`` into at most ``n`` roughly equal non-empty pieces."""
    if not s:
        return []
    n = max(1, min(n, len(s)))
    size = -(-len(s) // n)
    return [s[k : k + size] for k in range(0, len(s), size)]


def stream_events(model: str, content: list[dict], stop: str, in_tok: int, out_tok: int, *,
                  cache_read: int = 0, cache_write: int = 0, usage_late: bool = False) -> list[tuple[str, dict]]:
    """The real SSE event sequence for one message, as ``(event name, data)`` pairs.

    Like the API, message_delta carries the final, cumulative counts (input and cache included);
    ``usage_late`` leaves message_start's input and cache counts at 0, as some proxies do.
    """
    usage = {"input_tokens": in_tok, "cache_creation_input_tokens": cache_write, "cache_read_input_tokens": cache_read}
    early = {k: 0 for k in usage} if usage_late else usage
    events: list[tuple[str, dict]] = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": _new_id("msg_"),
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {**early, "output_tokens": 1},
                },
            },
        ),
        ("ping", {"type": "ping"}),
    ]
    for idx, block in enumerate(content):
        if block["type"] == "text":
            start: dict = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": piece} for piece in _chunks(block["text"], 4)]
        else:
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            # Like the API: an empty first fragment, then the JSON in pieces.
            deltas = [{"type": "input_json_delta", "partial_json": ""}] + [
                {"type": "input_json_delta", "partial_json": piece}
                for piece in _chunks(_dumps(block["input"]), 3)
            ]
        events.append(("content_block_start", {"type": "content_block_start", "index": idx, "content_block": start}))
        events.extend(
            ("content_block_delta", {"type": "content_block_delta", "index": idx, "delta": d}) for d in deltas
        )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": idx}))
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {**usage, "output_tokens": out_tok},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def encode_stream(events: list[tuple[str, dict]], close_connection: bool) -> bytes:
    """Status line, headers and the events as one chunked HTTP/1.1 body (keeps keep-alive)."""
    return b"".join(stream_parts(events, close_connection))


def stream_parts(events: list[tuple[str, dict]], close_connection: bool) -> list[bytes]:
    """The same as separate writes: head, one chunk per event, the terminator."""
    out = [
        (
            "HTTP/1.1 200 OK\r\n"
            "content-type: text/event-stream; charset=utf-8\r\n"
            "cache-control: no-cache\r\n"
            "transfer-encoding: chunked\r\n"
            f"request-id: {_new_id('req_')}\r\n"
            + ("connection: close\r\n" if close_connection else "")
            + "\r\n"
        ).encode("latin-1")
    ]
    for name, data in events:
        payload = f"event: {name}\ndata: {_dumps(data)}\n\n".encode()
        out.append(b"%x\r\n%s\r\n" % (len(payload), payload))
    out.append(b"0\r\n\r\n")
    return out
