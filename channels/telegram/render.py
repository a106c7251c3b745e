"""The model's Markdown as Telegram messages: text plus entities, split under 4096 characters.

Why entities and not HTML: telegramify-markdown parses Markdown with a real CommonMark parser
(pulldown-cmark) and returns plain text with MessageEntity offsets in UTF-16 units, so there is
no markup for Telegram to reject and no escaping to get wrong. Splitting happens on the
Markdown source, before conversion, with the kit's block-aware chunker (channels/kit/markdown.py),
counting UTF-16 units as Telegram does; each piece is converted on its own, so no entity ever
spans two messages. No I/O here.

`latex_escape=False`: the converter would otherwise read Markdown's escaped parentheses `\\(` `\\)` as
LaTeX delimiters and turn `\\(tools\\.exec\\)` into "toolsėxec" (a dot-above accent); an escape means the
character itself.

One adjustment: raw HTML in a reply ("Usage: tool <input>", "List<String>") is text the model
meant to show, but CommonMark reads it as markup that the converter would drop; the ranges the
parser itself reports as HTML get their "<" backslash-escaped, so they arrive as written.
"""

from __future__ import annotations

from typing import Any

import pyromark  # telegramify-markdown's own parser (a dependency of it)
from telegramify_markdown import convert

from clawgate.channels.kit.markdown import hard_split, split_markdown as kit_split

try:
    from telegramify_markdown.converter import STANDARD_OPTIONS as _OPTIONS
except ImportError:  # keep working if the library moves its constant
    _OPTIONS = (pyromark.Options.ENABLE_TABLES | pyromark.Options.ENABLE_STRIKETHROUGH
                | pyromark.Options.ENABLE_TASKLISTS | pyromark.Options.ENABLE_MATH)

MAX_CHARS = 4096


class Chunk(str):
    """One sendable message: its text (the string itself) with `entities` (Bot API dicts), and the
    Markdown it came from. A str, so the kit handles it like any platform's rendered chunk."""

    entities: list[dict[str, Any]]
    source: str

    def __new__(cls, text: str = "", entities: list[dict[str, Any]] | None = None, source: str = "") -> "Chunk":
        chunk = super().__new__(cls, text)
        chunk.entities = list(entities or [])
        chunk.source = source
        return chunk

    @property
    def text(self) -> str:
        return str.__str__(self)


def tg_length(text: str) -> int:
    """The length Telegram checks, in UTF-16 code units (never less than the code points)."""
    return len(text.encode("utf-16-le")) // 2


def render(markdown: str, limit: int = MAX_CHARS) -> list[Chunk]:
    """Split `markdown` and convert every piece; each chunk's text is at most `limit` long."""
    chunks: list[Chunk] = []
    for piece in split_markdown(markdown, limit):
        chunks.extend(_convert_fitting(piece, limit))
    return chunks or [Chunk(text="(empty reply)", source=markdown)]


def _convert_fitting(piece: str, limit: int) -> list[Chunk]:
    """Convert one piece; if rendering made it longer than `limit`, split it finer and retry."""
    try:
        text, entities = convert(literal_html(piece), latex_escape=False)
        dicts = [_entity_dict(e) for e in entities]
    except Exception:  # a converter bug must never lose a reply: send the source as plain text
        text, dicts = piece.strip(), []
    if not text.strip():
        return []
    if tg_length(text) <= limit:
        return [Chunk(text=text, entities=dicts, source=piece)]
    smaller = max(limit * 3 // 4, 64)
    if smaller >= limit or len(piece) <= 64:
        return [Chunk(text=part) for part in _hard_split(text, limit)]
    out: list[Chunk] = []
    for sub in split_markdown(piece, smaller):
        out.extend(_convert_fitting(sub, limit))
    return out


def literal_html(markdown: str) -> str:
    """Escape the "<" of every range the Markdown parser takes for HTML, so it renders as text."""
    if "<" not in markdown:
        return markdown
    data = markdown.encode("utf-8")
    escape: set[int] = set()
    for payload, where in pyromark.events_with_range(markdown, options=_OPTIONS):
        if isinstance(payload, dict) and ("InlineHtml" in payload or "Html" in payload):
            escape.update(i for i in range(where["start"], where["end"]) if data[i] == 0x3C)
    if not escape:
        return markdown
    out = bytearray()
    for index, byte in enumerate(data):
        if index in escape:
            out += b"\\"
        out.append(byte)
    return out.decode("utf-8")


def _entity_dict(entity: Any) -> dict[str, Any]:
    data = entity.to_dict() if hasattr(entity, "to_dict") else dict(entity)
    return {k: v for k, v in data.items() if v is not None}


def split_markdown(markdown: str, limit: int = MAX_CHARS) -> list[str]:
    """The kit's block-aware chunker, counting as Telegram does (UTF-16 units)."""
    return kit_split(markdown, limit, tg_length)


def _hard_split(text: str, limit: int) -> list[str]:
    return hard_split(text, limit, tg_length)
