"""Markdown for chat platforms: a block-aware chunker, and plain text for platforms without formatting.

Splitting happens on the Markdown source, before any conversion: paragraphs first, then lines,
then spaces; a fenced code block stays whole whenever it fits in one message and is re-fenced
piece by piece when it does not. Each adapter converts every piece on its own with a converter
for its platform, so no formatting ever spans two messages. No I/O here.
"""

from __future__ import annotations

import re
from typing import Callable

import pyromark

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_BREAKS = {"Paragraph", "Heading", "Item", "CodeBlock", "BlockQuote", "TableRow", "TableHead"}


def to_plain(markdown: str) -> str:
    """The text a reader sees, without markup (for platforms that show none): code and link texts
    kept, a link's target added in parentheses, raw HTML as the text it is, one line per paragraph,
    item or row."""
    out: list[str] = []
    links: list[str] = []
    for event in pyromark.events(markdown):
        if event in ("SoftBreak", "HardBreak"):
            out.append("\n")
        elif not isinstance(event, dict):
            continue
        elif "Text" in event or "Code" in event:
            out.append(str(event.get("Text", event.get("Code"))))
        elif "Html" in event or "InlineHtml" in event:  # raw HTML in the text is text the model wrote: shown
            out.append(str(event.get("Html", event.get("InlineHtml"))))
        elif "Start" in event:
            start = event["Start"]
            if start == "Item":
                out.append("- ")
            elif isinstance(start, dict) and "Link" in start:
                links.append(str(start["Link"].get("dest_url") or ""))
        elif "End" in event:
            end = event["End"]
            name = end if isinstance(end, str) else next(iter(end))
            if name == "Link" and links:
                target = links.pop()
                if target and not (out and out[-1] == target):
                    out.append(f" ({target})")
            if name in _BREAKS and out and not out[-1].endswith("\n"):
                out.append("\n")
    return "".join(out).strip()


def split_markdown(markdown: str, limit: int, measure: Callable[[str], int] = len) -> list[str]:
    """Pieces of at most `limit` (as `measure` counts: Telegram counts UTF-16 units), cut at paragraph,
    then line, then word boundaries; a fenced code block stays whole when it fits, else is re-fenced
    piece by piece. `limit` 0: no limit (one piece)."""
    if limit <= 0:
        text = markdown.replace("\r\n", "\n").strip("\n")
        return [text] if text.strip() else []
    text = markdown.replace("\r\n", "\n").strip("\n")
    if measure(text) <= limit:
        return [text] if text.strip() else []
    pieces: list[str] = []
    current = ""
    for block in _blocks(text):
        for part in _fit_block(block, limit, measure):
            joined = f"{current}\n\n{part}" if current else part
            if measure(joined) <= limit:
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


def _fit_block(block: str, limit: int, measure: Callable[[str], int]) -> list[str]:
    """One block as parts that each fit: whole if possible, else by lines (code re-fenced)."""
    if measure(block) <= limit:
        return [block]
    lines = block.split("\n")
    match = _FENCE.match(lines[0])
    if match:
        opener = lines[0]
        closer = match.group(1)
        body = lines[1:-1] if len(lines) > 1 and lines[-1].strip() == closer else lines[1:]
        budget = limit - measure(opener) - measure(closer) - 2
        if budget < 64:  # an absurd fence line: treat the block as plain lines
            return _pack(lines, limit, "\n", measure)
        return [f"{opener}\n{part}\n{closer}" for part in _pack(body, budget, "\n", measure)]
    return _pack(lines, limit, "\n", measure)


def _pack(units: list[str], limit: int, sep: str, measure: Callable[[str], int]) -> list[str]:
    """Greedily join `units` with `sep` into parts of at most `limit`; over-long units are cut at spaces."""
    parts: list[str] = []
    current: str | None = None
    for unit in units:
        for piece in ([unit] if measure(unit) <= limit else _split_words(unit, limit, measure)):
            joined = piece if current is None else f"{current}{sep}{piece}"
            if measure(joined) <= limit:
                current = joined
            else:
                if current is not None:
                    parts.append(current)
                current = piece
    if current is not None:
        parts.append(current)
    return [p for p in parts if p.strip()] or parts[:1]


def _split_words(line: str, limit: int, measure: Callable[[str], int]) -> list[str]:
    words = line.split(" ")
    if any(measure(w) > limit for w in words):
        return hard_split(line, limit, measure)
    return _pack(words, limit, " ", measure)


def hard_split(text: str, limit: int, measure: Callable[[str], int] = len) -> list[str]:
    """Last resort for a single unbroken run: cut by length (never inside a character)."""
    parts: list[str] = []
    start = size = 0
    for index, char in enumerate(text):
        width = measure(char)
        if size + width > limit:
            parts.append(text[start:index])
            start, size = index, 0
        size += width
    parts.append(text[start:])
    return [p for p in parts if p]



_PUNCTUATION = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~])")


def escape(text: str) -> str:
    """`text` as literal Markdown: every ASCII punctuation that could start markup backslash-escaped."""
    return _PUNCTUATION.sub(r"\\\1", text)


def fence(text: str) -> str:
    """`text` in a fenced code block whose fence no backtick run inside it can close."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    marks = "`" * max(3, longest + 1)
    return f"{marks}\n{text}\n{marks}"




def render_in_pieces(markdown: str, convert: Callable[[str], str], max_chars: int, split_at: int,
                     measure: Callable[[str], int] = len) -> list[tuple[str, str]]:
    """A reply as messages of at most `max_chars` of `convert`ed text, each with the Markdown it came from:
    split on the Markdown first (`split_at` leaves room for what conversion adds), then each piece
    converted on its own, so no formatting spans two messages; a piece conversion made too long is split
    smaller, and a single unbroken run is cut by length as the last resort."""
    out: list[tuple[str, str]] = []
    for piece in split_markdown(markdown, split_at, measure=measure):
        text = convert(piece)
        if not text.strip():
            continue
        if measure(text) <= max_chars:
            out.append((text, piece))
        elif split_at <= 250:
            out.extend((part, part) for part in hard_split(text, max_chars, measure))
        else:
            out.extend(render_in_pieces(piece, convert, max_chars, split_at // 2, measure))
    return out


__all__ = ["escape", "fence", "hard_split", "render_in_pieces", "split_markdown", "to_plain"]
