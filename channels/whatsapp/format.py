"""Markdown -> WhatsApp's own formatting, written from a CommonMark parser's events (pyromark).

WhatsApp reads `*bold*`, `_italic_`, `~strike~`, `` `code` `` and ```` ```monospace``` ```` blocks, `> `
quotes and `- ` / `1. ` lists; it has no headings, no link markup and no escape character. So a heading
is written bold, a link as `text (url)` (WhatsApp makes the url clickable itself), a table as a
monospace block, and Markdown's backslash escapes are resolved by the parser, never passed on: the
kit's walk for marker platforms (channels/kit/marks.py) with its default style is WhatsApp's. A
literal `*` `_` `~` left in text formats only in pairs at word boundaries, which the text rarely
makes. `render_chunks` splits a reply into messages under WhatsApp's 4,096 characters, for both
modes (Cloud API and linked device).
"""

from __future__ import annotations

from clawgate.channels.kit.markdown import render_in_pieces
from clawgate.channels.kit.marks import MarkerStyle, to_markers

WHATSAPP = MarkerStyle()
MAX_CHARS = 4096  # a text message's body
SPLIT_AT = 3_600  # Markdown per piece, leaving room for the markers conversion adds
MAX_FILE_BYTES = 100 * 1024 * 1024  # a document's limit (the Cloud API's; a linked device sends the same)


def to_whatsapp(markdown: str) -> str:
    """One chunk of the model's Markdown as the text of a WhatsApp message."""
    return to_markers(markdown, WHATSAPP)


def _utf16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def render_chunks(markdown: str) -> list[str]:
    """Markdown as WhatsApp messages of at most MAX_CHARS each (counted in UTF-16 units, as WhatsApp does)."""
    return [text for text, _ in render_in_pieces(markdown, to_whatsapp, MAX_CHARS, SPLIT_AT, _utf16)]
