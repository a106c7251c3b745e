"""Markdown -> Matrix message content: a plain `body` and an HTML `formatted_body`.

Why markdown-it-py: it is a CommonMark parser kept up to date; raw HTML in the model's text is
escaped (html=False), so an answer can never inject markup into a reader's client.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from markdown_it import MarkdownIt

HTML_FORMAT = "org.matrix.custom.html"


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    return MarkdownIt("commonmark", {"html": False, "breaks": True}).enable(["table", "strikethrough"])


def to_html(markdown: str) -> str:
    """The HTML Matrix clients show (the org.matrix.custom.html subset covers what CommonMark emits)."""
    return _parser().render(markdown).strip()


def notice_content(markdown: str, plain: str) -> dict[str, Any]:
    """One bot reply: m.notice (bots answer with notices, so other bots do not answer them back)."""
    return {"msgtype": "m.notice", "body": plain, "format": HTML_FORMAT, "formatted_body": to_html(markdown),
            "m.mentions": {}}
