"""A fake Anthropic Messages API that speaks real HTTP on 127.0.0.1, split by job.

Why a package: one module per concern (scripted replies, request checks, response
bodies, SSE encoding, the server) keeps each small enough to read in one sitting.
``tests.fakes.anthropic_api`` re-exports everything for existing imports.
"""

from tests.fakes.anthropic.replies import Reply, error, text, tool_use, tool_uses
from tests.fakes.anthropic.request_text import last_user_block, last_user_text
from tests.fakes.anthropic.server import FakeAnthropic, main

__all__ = [
    "FakeAnthropic",
    "Reply",
    "error",
    "last_user_block",
    "last_user_text",
    "main",
    "text",
    "tool_use",
    "tool_uses",
]
