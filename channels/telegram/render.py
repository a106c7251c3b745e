"""The model's Markdown as Telegram messages: text plus entities, split under 4096 characters.

Why entities and not HTML: telegramify-markdown parses Markdown with a real CommonMark parser
(pulldown-cmark) and returns plain text with MessageEntity offsets in UTF-16 units, so there is
no markup for Telegram to reject and no escaping to get wrong. Splitting happens on the
Markdown source, before conversion: paragraphs first, then lines, then spaces; a fenced code
block stays whole whenever it fits in one message and is re-fenced piece by piece when it does
not. Each piece is converted on its own, so no entity ever spans two messages. No I/O here.

One adjustment: raw HTML in a reply ("Usage: tool <input>", "List<String>") is text the model
meant to show, but CommonMark reads it as markup that the converter would drop; the ranges the
parser itself reports as HTML get their "<" backslash-escaped, so they arrive as written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import pyromark  # telegramify-markdown's own parser (a dependency of it)
from telegramify_markdown import convert

try:
    from telegramify_markdown.converter import STANDARD_OPTIONS as _OPTIONS
except ImportError:  # keep working if the library moves its constant
    _OPTIONS = (pyromark.Options.ENABLE_TABLES | pyromark.Options.ENABLE_STRIKETHROUGH
                | pyromark.Options.ENABLE_TASKLISTS | pyromark.Options.ENABLE_MATH)

MAX_CHARS = 4096
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


@dataclass(frozen=True)
class Chunk:
    """One sendable message: `text` with `entities` (Bot API dicts), and the Markdown it came from."""

    text: str
    entities: list[dict[str, Any]] = field(default_factory=list)
    source: str = ""


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
        text, entities = convert(literal_html(piece))
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


# splitting -------------------------------------------------------------------------------
def split_markdown(markdown: str, limit: int = MAX_CHARS) -> list[str]:
    """Pieces of at most `limit` characters, cut at paragraph, then line, then word boundaries."""
    text = markdown.replace("\r\n", "\n").strip("\n")
    if tg_length(text) <= limit:
        return [text] if text.strip() else []
    pieces: list[str] = []
    current = ""
    for block in _blocks(text):
        for part in _fit_block(block, limit):
            joined = f"{current}\n\n{part}" if current else part
            if tg_length(joined) <= limit:
                current = joined
            else:
                if current:
                    pieces.append(current)
                current = part
    if current:
        pieces.append(current)
    return pieces


def _blocks(text: str) -> list[str]:
    """Paragraphs separated by blank lines; a fenced code block is one block, blank lines and all."""
    blocks: list[str] = []
    lines: list[str] = []
    fence: str | None = None
    for line in text.split("\n"):
        match = _FENCE.match(line)
        if fence is None:
            if match:
                if lines:
                    blocks.append("\n".join(lines))
                lines, fence = [line], match.group(1)
            elif line.strip():
                lines.append(line)
            elif lines:
                blocks.append("\n".join(lines))
                lines = []
        else:
            lines.append(line)
            closing = match.group(1) if match else ""
            if closing[:1] == fence[0] and len(closing) >= len(fence) and not line.strip()[len(closing):]:
                blocks.append("\n".join(lines))
                lines, fence = [], None
    if lines:
        blocks.append("\n".join(lines))
    return blocks


def _fit_block(block: str, limit: int) -> list[str]:
    """One block as parts that each fit: whole if possible, else by lines (code re-fenced)."""
    if tg_length(block) <= limit:
        return [block]
    lines = block.split("\n")
    match = _FENCE.match(lines[0])
    if match:
        opener = lines[0]
        closer = match.group(1)
        body = lines[1:-1] if len(lines) > 1 and lines[-1].strip() == closer else lines[1:]
        budget = limit - tg_length(opener) - tg_length(closer) - 2
        if budget < 64:  # an absurd fence line: treat the block as plain lines
            return _pack(lines, limit, "\n")
        return [f"{opener}\n{part}\n{closer}" for part in _pack(body, budget, "\n")]
    return _pack(lines, limit, "\n")


def _pack(units: list[str], limit: int, sep: str) -> list[str]:
    """Greedily join `units` with `sep` into parts of at most `limit`; over-long units are cut at spaces."""
    parts: list[str] = []
    current: str | None = None
    for unit in units:
        for piece in ([unit] if tg_length(unit) <= limit else _split_words(unit, limit)):
            joined = piece if current is None else f"{current}{sep}{piece}"
            if tg_length(joined) <= limit:
                current = joined
            else:
                if current is not None:
                    parts.append(current)
                current = piece
    if current is not None:
        parts.append(current)
    return [p for p in parts if p.strip()] or parts[:1]


def _split_words(line: str, limit: int) -> list[str]:
    words = line.split(" ")
    if any(tg_length(w) > limit for w in words):
        return _hard_split(line, limit)
    return _pack(words, limit, " ")


def _hard_split(text: str, limit: int) -> list[str]:
    """Last resort for a single unbroken run: cut by length (UTF-16 safe)."""
    parts: list[str] = []
    start = size = 0
    for index, char in enumerate(text):
        width = 2 if ord(char) > 0xFFFF else 1
        if size + width > limit:
            parts.append(text[start:index])
            start, size = index, 0
        size += width
    parts.append(text[start:])
    return [p for p in parts if p]
