"""Scripted replies: what a test tells the fake to answer with.

Why separate: tests and scripts build replies without needing the server, and the
reply shape is the fake's scripting language, independent of HTTP.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from .request_text import last_user_block


@dataclass
class Reply:
    """One scripted model reply (or, with a non-200 ``status``, one API error).

    ``delay`` (plus the fake's ``latency``) is slept before anything is sent, for
    streaming replies too, so a slow model looks like a slow first byte.
    """

    text: str = ""
    tool_calls: list[dict] = field(default_factory=list)
    stop_reason: str | None = None
    status: int = 200
    retry_after: float | None = None
    delay: float = 0.0
    input_tokens: int | None = None
    output_tokens: int | None = None
    # Error message for non-200 replies; None uses a stock message per error type.
    message: str | None = None
    # A threading.Event: the stream stops after its first text delta until the test sets it (at
    # most 30 s), so that delta reaches the client on its own, whatever the machine's load.
    hold: Any = None
    # Prompt-cache counts reported in the usage.
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    # Streaming only: the input and cache counts arrive in message_delta alone (message_start says
    # 0), as some proxies in front of other backends send them.
    usage_late: bool = False
    # Streaming only: the body ends cleanly but early, as when a proxy times out or a connection is
    # cut: "before_stop" sends every event but message_stop; "midway" stops after the first text delta.
    cut: str | None = None
    # Answer a streaming request with the whole message as one JSON body (a proxy that ignores `stream`).
    as_json: bool = False
    # Send this JSON object with HTTP 200 instead of a message (an error envelope a proxy sends).
    body: dict | None = None


def text(s: str, **kw: Any) -> Reply:
    """A plain assistant text reply; ``kw`` sets any other ``Reply`` field."""
    return Reply(text=s, **kw)


def tool_use(name: str, input: dict, *, text: str = "", id: str | None = None) -> Reply:  # noqa: A002
    """A reply that calls one tool (optionally preceded by some assistant text)."""
    call: dict = {"name": name, "input": input}
    if id is not None:
        call["id"] = id
    return Reply(text=text, tool_calls=[call])


def tool_uses(*calls: tuple[str, dict], text: str = "") -> Reply:
    """A reply with several parallel tool calls, given as ``(name, input)`` pairs."""
    return Reply(text=text, tool_calls=[{"name": n, "input": i} for n, i in calls])


def error(status: int, retry_after: float | None = None, message: str | None = None) -> Reply:
    """An API error reply (429, 529, 500, 400, ...) instead of a model message."""
    return Reply(status=status, retry_after=retry_after, message=message)


def file_sender(path: str, caption: str, *, asked: str = "send me") -> Callable[[dict], Reply]:
    """A responder for a run that sends a workspace file: a message holding `asked` gets a `send_file` call,
    the tool's result gets "Sent.", anything else its echo. A run resumed after a kill gets the same answers
    (a FIFO script would be spent by then)."""
    def respond(body: dict) -> Reply:
        last = body["messages"][-1]["content"]
        if isinstance(last, list) and any(b.get("type") == "tool_result" for b in last):
            return text("Sent.")
        if asked in last_user_block(body):
            return tool_use("send_file", {"path": path, "caption": caption})
        return text("echo: " + last_user_block(body))

    return respond
