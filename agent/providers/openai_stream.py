"""Fold a streamed Chat Completions reply (SSE `data:` chunks) into one reply, without I/O.

Text deltas go to `on_text` as they arrive, like the Anthropic stream; tool calls arrive in
pieces keyed by `index` (id and name first, then the arguments' JSON in fragments) and are
joined here; with `stream_options.include_usage` the last chunk (empty `choices`) carries the
usage. The result has the shape of a non-streamed reply, so one converter serves both.
"""

from __future__ import annotations

import json
from typing import Any

from .base import TextCallback


class StreamError(Exception):
    """The stream broke (an error chunk, bad JSON, or it ended before the reply was complete)."""


class SseLines:
    """SSE framing: `data:` lines joined until a blank line; comments and other fields skipped."""

    def __init__(self) -> None:
        self._data: list[str] = []

    def feed(self, line: str) -> str | None:
        """One line in; the event's data out when the line ends an event."""
        if not line.strip():
            if not self._data:
                return None
            data, self._data = "\n".join(self._data), []
            return data
        if line.startswith("data:"):
            self._data.append(line[5:].removeprefix(" "))
        return None

    def end(self) -> str | None:
        """Whatever data the stream ended with (a server may omit the last blank line)."""
        data, self._data = ("\n".join(self._data) if self._data else None), []
        return data


class ChatStreamAccumulator:
    def __init__(self, on_text: TextCallback | None = None) -> None:
        self.on_text = on_text
        self.text: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish: str | None = None
        self.usage: dict[str, Any] = {}
        self.model = ""
        self.done = False  # saw `[DONE]`

    def feed_data(self, data: str) -> None:
        if data.strip() == "[DONE]":
            self.done = True
            return
        try:
            chunk = json.loads(data)
        except ValueError:
            raise StreamError("a streamed chunk is not JSON") from None
        if not isinstance(chunk, dict):
            raise StreamError("a streamed chunk is not an object")
        if chunk.get("error"):
            error = chunk["error"]
            message = error.get("message") if isinstance(error, dict) else error
            raise StreamError(f"error in the stream: {' '.join(str(message).split())[:200]}")
        self.feed(chunk)

    def feed(self, chunk: dict[str, Any]) -> None:
        if chunk.get("model"):
            self.model = str(chunk["model"])
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue  # we ask for one choice
            delta = choice.get("delta") or {}
            text = delta.get("content")
            if isinstance(text, str) and text:
                self.text.append(text)
                if self.on_text is not None:
                    self.on_text(text)
            for position, part in enumerate(delta.get("tool_calls") or []):
                if isinstance(part, dict):
                    self._tool_call(part, position)
            if choice.get("finish_reason"):
                self.finish = choice["finish_reason"]

    def _tool_call(self, part: dict[str, Any], position: int) -> None:
        index = part.get("index")
        index = index if isinstance(index, int) else position
        call = self.calls.setdefault(index, {"id": "", "name": "", "arguments": []})
        if part.get("id"):
            call["id"] = str(part["id"])
        function = part.get("function") or {}
        if function.get("name"):
            call["name"] += str(function["name"])
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            call["arguments"].append(arguments)
        elif isinstance(arguments, dict):  # some servers send the whole object at once
            call["arguments"].append(json.dumps(arguments))

    @property
    def complete(self) -> bool:
        """A reply is whole once it has a finish reason (the `[DONE]` line is optional for some servers)."""
        return self.finish is not None

    def as_completion(self) -> dict[str, Any]:
        """The equivalent non-streamed `chat.completion` body."""
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.text) or None}
        if self.calls:
            message["tool_calls"] = [
                {"id": call["id"], "type": "function",
                 "function": {"name": call["name"], "arguments": "".join(call["arguments"])}}
                for _, call in sorted(self.calls.items())]
        return {"model": self.model, "choices": [{"index": 0, "message": message, "finish_reason": self.finish}],
                "usage": self.usage}
