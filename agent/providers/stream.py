"""Assemble a streamed Messages API response from its raw events, without I/O.

The SDK's `messages.stream()` helper rebuilds a full snapshot after every event; folding the
raw events ourselves costs a fraction of that and keeps the blocks in the plain-dict shape
the session log stores.
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

    def feed(self, event: Any) -> None:
        kind = event.type
        if kind == "message_start":
            message = event.message
            self.model = message.model
            usage = message.usage
            self.usage = {
                "input_tokens": usage.input_tokens or 0,
                "output_tokens": usage.output_tokens or 0,
                "cache_read_input_tokens": getattr(usage, "cache_read_input_tokens", 0) or 0,
                "cache_creation_input_tokens": getattr(usage, "cache_creation_input_tokens", 0) or 0,
            }
        elif kind == "content_block_start":
            block = event.content_block
            if block.type == "text":
                self.blocks[event.index] = {"type": "text", "text": block.text or ""}
            elif block.type == "tool_use":
                self.blocks[event.index] = {"type": "tool_use", "id": block.id, "name": block.name, "input": {}}
                self._json[event.index] = []
            else:
                self.blocks[event.index] = block.model_dump(exclude_none=True)
        elif kind == "content_block_delta":
            delta = event.delta
            if delta.type == "text_delta":
                self.blocks[event.index]["text"] += delta.text
                if self.on_text is not None:
                    self.on_text(delta.text)
            elif delta.type == "input_json_delta":
                self._json[event.index].append(delta.partial_json)
        elif kind == "content_block_stop":
            parts = self._json.pop(event.index, None)
            if parts is not None:
                raw = "".join(parts)
                try:
                    self.blocks[event.index]["input"] = json.loads(raw) if raw.strip() else {}
                except json.JSONDecodeError:
                    # Cut off by max_tokens: keep a valid object; the loop refuses to run it.
                    self.blocks[event.index]["input"] = {}
        elif kind == "message_delta":
            self.stop_reason = event.delta.stop_reason
            if event.usage is not None and event.usage.output_tokens is not None:
                self.usage["output_tokens"] = event.usage.output_tokens

    def response(self, latency_ms: float) -> ModelResponse:
        return ModelResponse(content=[self.blocks[i] for i in sorted(self.blocks)], stop_reason=self.stop_reason,
                             usage=self.usage, model=self.model, latency_ms=latency_ms)
