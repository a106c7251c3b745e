"""Markdown -> what Teams shows: a message's HTML (`textFormat: "xml"`), in pieces under its limit, and the
Adaptive Card of an approval prompt.

Teams renders a subset of Markdown and of HTML in a bot's text; Markdown's corner cases (a `<` typed by
the model, an underscore inside a word) read differently in its renderer than in CommonMark. HTML is
exact: markdown-it-py renders CommonMark to the tags Teams shows (p, b/strong, i/em, code, pre, ul/ol,
blockquote, a, h1-h3) and escapes raw HTML in the model's text (html=False), so an answer can neither
inject markup nor mention anyone. Tables are left as the model wrote them (pipes): Teams does not render a
table in a text message.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from markdown_it import MarkdownIt

from clawgate.channels.kit.markdown import render_in_pieces

MAX_CHARS = 4000  # rendered HTML per message: Teams takes ~100 KB, long walls are unreadable in its client
SPLIT_AT = 3000  # Markdown per piece, leaving room for the tags rendering adds
CARD_TYPE = "application/vnd.microsoft.card.adaptive"


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    return MarkdownIt("commonmark", {"html": False, "breaks": True}).enable(["strikethrough"])


def to_html(markdown: str) -> str:
    return _parser().render(markdown).strip()


def _utf16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


class Chunk(str):
    """One message's HTML, carrying the Markdown it came from (the kit halves `source` when Teams refuses a size)."""

    source: str

    def __new__(cls, html: str, source: str) -> "Chunk":
        chunk = super().__new__(cls, html)
        chunk.source = source
        return chunk


def render_chunks(markdown: str) -> list[str]:
    """Split on the Markdown first, then render each piece; a piece the tags made too long is split smaller."""
    return [Chunk(html, source) for html, source in render_in_pieces(markdown, to_html, MAX_CHARS, SPLIT_AT, _utf16)]


def approval_card(approval_id: str, secret: str) -> dict[str, Any]:
    """An Adaptive Card with Approve / Deny (Action.Submit), sent under the prompt's HTML text. The prompt's
    secret rides in each button's data: a press counts only with it (a submit crafted by hand does not know it)."""

    def action(title: str, approve: bool) -> dict[str, Any]:
        return {"type": "Action.Submit", "title": title,
                "data": {"kind": "clawgate-approval", "approval_id": approval_id, "approve": approve,
                         "secret": secret}}

    return {"type": "AdaptiveCard", "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
            "version": "1.4",
            "body": [{"type": "TextBlock", "text": "Approve or deny the request above.", "wrap": True}],
            "actions": [action("Approve", True), action("Deny", False)]}
