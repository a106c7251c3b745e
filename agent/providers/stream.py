"""Assemble a streamed Messages API response from its raw events, without I/O.

The SDK's `messages.stream()` helper rebuilds a full snapshot after every event; folding the
raw events ourselves costs a fraction of that and keeps the blocks in the plain-dict shape
the session log stores. The SDK still decodes the server-sent events and raises its typed
errors for an `error` event; only the per-event model objects are skipped.

A reply is whole only once `message_stop` has arrived: a stream that ends before it (a cut
connection, a proxy's timeout that closes the body cleanly) raises `StreamCut`, which the provider
retries, so a partial text is never taken as the answer. A server (a proxy) that answers a
streaming request with one JSON body is read by `json_events`: a complete message is the answer,
an error envelope is that error, anything else is a `StreamCut`.
"""

from __future__ import annotations

import json
from typing import Any

from .base import ModelResponse, TextCallback

USAGE_FIELDS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")


class StreamCut(Exception):
    """The reply ended before `message_stop`: what arrived is not the whole answer (retryable)."""


class StreamAccumulator:
    def __init__(self, on_text: TextCallback | None = None) -> None:
        self.on_text = on_text
        self.blocks: dict[int, dict[str, Any]] = {}
        self._json: dict[int, list[str]] = {}
        self.usage: dict[str, int] = {}
        self.stop_reason: str | None = None
        self.model = ""
        self.stopped = False  # `message_stop` seen: the reply is whole
        self.shown = False  # some text went to `on_text` (a live preview a retry must restart)

    def feed(self, event: dict[str, Any]) -> None:
        """One raw event as decoded from the stream (a dict: building the SDK's typed model for each
        event only to read three fields back cost a tenth of a message's CPU)."""
        kind = event.get("type")
        if kind == "message_start":
            message = event.get("message") or {}
            self.model = message.get("model") or ""
            usage = message.get("usage") or {}
            self.usage = {name: usage.get(name) or 0 for name in USAGE_FIELDS}
        elif kind == "content_block_start":
            index, block = event["index"], event.get("content_block") or {}
            if block.get("type") == "text":
                self.blocks[index] = {"type": "text", "text": block.get("text") or ""}
            elif block.get("type") == "tool_use":
                self.blocks[index] = {"type": "tool_use", "id": block.get("id"), "name": block.get("name"), "input": {}}
                self._json[index] = []
            else:
                self.blocks[index] = {k: v for k, v in block.items() if v is not None}
        elif kind == "content_block_delta":
            delta = event.get("delta") or {}
            if delta.get("type") == "text_delta":
                text = delta.get("text") or ""
                self.blocks[event["index"]]["text"] += text
                if self.on_text is not None and text:
                    self.shown = True
                    self.on_text(text)
            elif delta.get("type") == "input_json_delta":
                self._json[event["index"]].append(delta.get("partial_json") or "")
        elif kind == "content_block_stop":
            index = event["index"]
            parts = self._json.pop(index, None)
            if parts is not None:
                raw = "".join(parts)
                try:
                    self.blocks[index]["input"] = json.loads(raw) if raw.strip() else {}
                except json.JSONDecodeError:
                    # Cut off by max_tokens: keep a valid object; the loop refuses to run it.
                    self.blocks[index]["input"] = {}
        elif kind == "message_delta":
            self.stop_reason = (event.get("delta") or {}).get("stop_reason")
            # The counts here are cumulative and final; the API (and proxies in front of other
            # backends, which send 0 in message_start) may put the input and cache counts here too.
            usage = event.get("usage") or {}
            for name in USAGE_FIELDS:
                if isinstance(usage.get(name), int):
                    self.usage[name] = usage[name]
        elif kind == "message_stop":
            self.stopped = True

    def response(self, latency_ms: float) -> ModelResponse:
        """The whole reply; `StreamCut` when the stream ended before `message_stop`."""
        if not self.stopped:
            raise StreamCut("the model API's stream ended before the reply was complete (no message_stop)")
        return ModelResponse(content=[self.blocks[i] for i in sorted(self.blocks)], stop_reason=self.stop_reason,
                             usage=self.usage, model=self.model, latency_ms=latency_ms)


def json_events(raw: bytes) -> list[dict[str, Any]]:
    """The events equivalent to a JSON body sent in answer to a streaming request.

    Why use a complete message rather than retry: it is the same answer the non-streamed request
    gets (some proxies ignore `stream`), and asking again would only get the same body. An error
    envelope becomes one `error` event, raised as the SDK's error like one inside a stream. A body
    that is neither (no stop reason, not JSON) is not an answer: `StreamCut`.
    """
    try:
        body = json.loads(raw)
    except ValueError:
        raise StreamCut("the model API answered a streaming request with a body that is not JSON") from None
    if isinstance(body, dict) and body.get("type") == "error" and isinstance(body.get("error"), dict):
        return [body]
    if not (isinstance(body, dict) and body.get("type") == "message" and isinstance(body.get("content"), list)
            and body.get("stop_reason")):
        raise StreamCut("the model API answered a streaming request with JSON that is not a complete message")
    usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
    start = {**body, "content": [], "stop_reason": None, "usage": usage}
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    for index, block in enumerate(body["content"]):
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            events += [{"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}},
                       {"type": "content_block_delta", "index": index,
                        "delta": {"type": "text_delta", "text": block.get("text") or ""}}]
        elif block.get("type") == "tool_use":
            events += [{"type": "content_block_start", "index": index, "content_block": {**block, "input": {}}},
                       {"type": "content_block_delta", "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": json.dumps(block.get("input") or {})}}]
        else:
            events.append({"type": "content_block_start", "index": index, "content_block": block})
        events.append({"type": "content_block_stop", "index": index})
    events += [{"type": "message_delta", "delta": {"stop_reason": body["stop_reason"]}, "usage": usage},
               {"type": "message_stop"}]
    return events
