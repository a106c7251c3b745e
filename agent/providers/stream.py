"""Assemble a streamed Messages API response from its raw events, without I/O.

The SDK's `messages.stream()` helper rebuilds a full snapshot after every event; folding the
raw events ourselves costs a fraction of that and keeps the blocks in the plain-dict shape
the session log stores. The SDK still decodes the server-sent events and raises its typed
errors for an `error` event; only the per-event model objects are skipped.
"""

from __future__ import annotations

import json
from typing import Any

from .base import ModelResponse, TextCallback


class StreamAccumulator:
    def __init__(self, on_text: TextCallback | None = None) -> None:
        self.on_text = on_text
        self.blocks: dict[int, dict[str, Any]] = {}
        self._json: dict[int, list[str]] = {}
        self.usage: dict[str, int] = {}
        self.stop_reason: str | None = None
        self.model = ""

    def feed(self, event: dict[str, Any]) -> None:
        """One raw event as decoded from the stream (a dict: building the SDK's typed model for each
        event only to read three fields back cost a tenth of a message's CPU)."""
        kind = event.get("type")
        if kind == "message_start":
            message = event.get("message") or {}
            self.model = message.get("model") or ""
            usage = message.get("usage") or {}
            self.usage = {
                "input_tokens": usage.get("input_tokens") or 0,
                "output_tokens": usage.get("output_tokens") or 0,
                "cache_read_input_tokens": usage.get("cache_read_input_tokens") or 0,
                "cache_creation_input_tokens": usage.get("cache_creation_input_tokens") or 0,
            }
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
                if self.on_text is not None:
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
            usage = event.get("usage") or {}
            if usage.get("output_tokens") is not None:
                self.usage["output_tokens"] = usage["output_tokens"]

    def response(self, latency_ms: float) -> ModelResponse:
        return ModelResponse(content=[self.blocks[i] for i in sorted(self.blocks)], stop_reason=self.stop_reason,
                             usage=self.usage, model=self.model, latency_ms=latency_ms)
