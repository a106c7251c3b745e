"""The model's Markdown as Discord messages: Discord reads Markdown itself, so little changes.

Why not a converter to another format: Discord renders CommonMark's inline marks, fenced code,
block quotes, lists, masked links and #-### headings natively. What it would misread is changed,
located with the same CommonMark parser the Telegram renderer uses (pyromark, pulldown-cmark),
never with hand-written pattern matching over the text:
- a table (Discord has none) is shown inside a code block, so its columns stay aligned;
- a #### / ##### / ###### heading (Discord stops at ###) becomes a bold line;
- `__strong__` (underline on Discord) becomes `**strong**`;
- an image `![alt](url)` becomes the link `[alt](url)` (Discord shows no inline images in text);
- inside a code block, a third backtick in a row is written `<U+0060>` (the notation of
  agent/core/visible.py): Discord ends a block at the first ``` whatever its fence is.
Mentions need no escaping: every send carries `allowed_mentions` = none, so `@everyone` or
`<@id>` in a reply never pings anyone. Splitting is the kit's block-aware chunker; no I/O here.
"""

from __future__ import annotations

import re

import pyromark

from clawgate.channels.kit.markdown import split_markdown

MAX_CHARS = 2000
_OPTIONS = (pyromark.Options.ENABLE_TABLES | pyromark.Options.ENABLE_STRIKETHROUGH
            | pyromark.Options.ENABLE_TASKLISTS)
_DEEP_HEADING = re.compile(r"^\s{0,3}#{4,6}[ \t]+(?P<text>.*?)[ \t#]*$", re.S)
_MARGIN = 16  # a table gains its fence lines when converted; split a little under the limit


def render(markdown: str, limit: int = MAX_CHARS) -> list[str]:
    """Split `markdown` under `limit` and convert every piece; no chunk is empty or over `limit`."""
    chunks: list[str] = []
    for piece in split_markdown(markdown, max(limit - _MARGIN, 64)):
        text = for_discord(piece).strip("\n")
        if not text.strip():
            continue
        chunks.extend([text] if len(text) <= limit else _hard_split(text, limit))
    return chunks or ["(empty reply)"]


def for_discord(markdown: str) -> str:
    """One piece of Markdown with what Discord misreads rewritten (see the module docstring)."""
    data = markdown.encode("utf-8")
    edits: list[tuple[int, int, bytes]] = []  # (start, end, replacement), byte offsets
    table_end = -1
    try:
        events = list(pyromark.events_with_range(markdown, options=_OPTIONS))
    except Exception:  # a parser failure must never lose a reply: send it as written
        return markdown
    for payload, where in events:
        start, end = where["start"], where["end"]
        if start < table_end or not isinstance(payload, dict) or "Start" not in payload:
            continue
        kind = payload["Start"]
        if isinstance(kind, dict) and "Table" in kind:
            table_end = end
            source = data[start:end].rstrip(b"\n")
            if b"```" not in source:
                edits.append((start, end, b"```\n" + source + b"\n```\n"))
        elif isinstance(kind, dict) and "Heading" in kind and kind["Heading"]["level"] in ("H4", "H5", "H6"):
            line = data[start:end].decode("utf-8", "replace").rstrip("\n")
            match = _DEEP_HEADING.match(line)
            if match and match["text"]:
                edits.append((start, start + len(line.encode()), f"**{match['text']}**".encode()))
        elif isinstance(kind, dict) and "CodeBlock" in kind and isinstance(kind["CodeBlock"], dict):
            body = "".join(str(p["Text"]) for p, w in events if isinstance(p, dict) and "Text" in p
                           and start <= w["start"] < end)
            if "```" in body:  # Discord ends a code block at the first ``` whatever the fence: show it visibly
                table_end = end  # nothing inside is rewritten again
                lang = str(kind["CodeBlock"].get("Fenced") or "")
                safe = re.sub(r"(?<=``)`", "<U+0060>", body.removesuffix("\n"))
                edits.append((start, end, f"```{lang}\n{safe}\n```\n".encode()))
        elif kind == "Strong" and data[start:start + 2] == b"__" and data[end - 2:end] == b"__":
            edits.append((start, start + 2, b"**"))
            edits.append((end - 2, end, b"**"))
        elif isinstance(kind, dict) and "Image" in kind and data[start:start + 1] == b"!":
            edits.append((start, start + 1, b""))
    for start, end, replacement in sorted(edits, reverse=True):
        data = data[:start] + replacement + data[end:]
    return data.decode("utf-8", "replace")


def _hard_split(text: str, limit: int) -> list[str]:
    """Last resort for a piece that conversion made too long: cut at line ends, else by length."""
    parts: list[str] = []
    current = ""
    for line in text.split("\n"):
        while len(line) > limit:
            if current:
                parts.append(current)
                current = ""
            parts.append(line[:limit])
            line = line[limit:]
        joined = f"{current}\n{line}" if current else line
        if len(joined) <= limit:
            current = joined
        else:
            parts.append(current)
            current = line
    if current.strip():
        parts.append(current)
    return [p for p in parts if p.strip()]
