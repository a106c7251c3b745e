"""A fake Anthropic Messages API that speaks real HTTP on 127.0.0.1.

Why a real server instead of mocking the SDK: the daemon (and its tests) use the
real ``anthropic`` client, so retries, ``retry-after`` handling, SSE parsing,
keep-alive and error classes are all exercised exactly as in production, and the
same fake can serve a separate daemon process via ``base_url``.

Only the standard library is used so the fake has no moving parts of its own.

Usage::

    with FakeAnthropic() as fake:
        fake.enqueue(tool_use("read_file", {"path": "a.txt"}), text("done"))
        client = anthropic.AsyncAnthropic(api_key="test", base_url=fake.base_url)
        ...

Reply selection for each valid ``POST /v1/messages`` (first that applies):

1. ``fail_next`` errors,
2. ``enqueue_for`` scripts whose ``match`` occurs in the request's user text,
3. the FIFO ``enqueue`` script,
4. the ``responder`` (default: echo the last user message text).

Run as a process: ``python -m tests.fakes.anthropic_api --port 0 [--latency S]``
prints ``READY http://127.0.0.1:PORT`` and serves the echo responder until killed.

The implementation lives in the ``tests.fakes.anthropic`` package, one module per
job; this module re-exports its names so existing imports and ``python -m`` keep working.
"""

from __future__ import annotations

import sys

# Re-exports (private names included: tests and bench scripts import some of them).
from tests.fakes.anthropic.replies import Reply, error, file_sender, text, tool_use, tool_uses  # noqa: F401
from tests.fakes.anthropic.request_text import (  # noqa: F401
    _blocks_text,
    _routing_text,
    last_user_block,
    last_user_text,
)
from tests.fakes.anthropic.responses import (  # noqa: F401
    _ERROR_MESSAGES,
    _ERROR_TYPES,
    _REASONS,
    _content_blocks,
    _dumps,
    _estimate_output,
    _new_id,
)
from tests.fakes.anthropic.server import HOST, FakeAnthropic, _echo, _Handler, _Server, main  # noqa: F401
from tests.fakes.anthropic.sse import _chunks  # noqa: F401
from tests.fakes.anthropic.validation import _validate  # noqa: F401

__all__ = [
    "FakeAnthropic",
    "Reply",
    "error",
    "last_user_text",
    "text",
    "tool_use",
    "tool_uses",
]


if __name__ == "__main__":
    sys.exit(main())
