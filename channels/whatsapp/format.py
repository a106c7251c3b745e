"""Markdown -> WhatsApp's own formatting, written from a CommonMark parser's events (pyromark).

WhatsApp reads `*bold*`, `_italic_`, `~strike~`, `` `code` `` and ```` ```monospace``` ```` blocks, `> `
quotes and `- ` / `1. ` lists; it has no headings, no link markup and no escape character. So a heading
is written bold, a link as `text (url)` (WhatsApp makes the url clickable itself), a table as a
monospace block, and Markdown's backslash escapes are resolved by the parser, never passed on. A
literal `*` `_` `~` left in text formats only in pairs at word boundaries, which the text rarely
makes; inside a code block a third backtick in a row (which would end the block) is written
`<U+0060>`, the notation of agent/core/visible.py. `render_chunks` splits a reply into messages under
WhatsApp's 4,096 characters, for both modes (Cloud API and linked device).
"""

from __future__ import annotations

import re
from typing import Any, Callable

import pyromark

from clawgate.channels.kit.markdown import hard_split, split_markdown

_OPTIONS = (pyromark.Options.ENABLE_TABLES | pyromark.Options.ENABLE_STRIKETHROUGH
            | pyromark.Options.ENABLE_TASKLISTS)
_MARKS = {"Strong": "*", "Emphasis": "_", "Strikethrough": "~"}


def code_safe(text: str) -> str:
    return re.sub(r"(?<=``)`", "<U+0060>", text)


class _Writer:
    """Walks the events once; `stack` holds the finished blocks of each open block quote."""

    def __init__(self, link: Callable[[str, str], str] | None = None) -> None:
        self.link = link
        self.stack: list[list[str]] = [[]]
        self.line: list[str] = []
        self.lists: list[int | None] = []
        self.links: list[str] = []
        self.code: list[str] | None = None
        self.table: list[list[str]] | None = None
        self.cell: list[str] | None = None

    def text(self, value: str) -> None:
        target = self.code if self.code is not None else self.cell if self.cell is not None else self.line
        target.append(value)

    def end_block(self) -> None:
        text = "".join(self.line).strip("\n")
        self.line = []
        if text.strip():
            self.stack[-1].append(text)

    def start(self, kind: Any) -> None:
        name = kind if isinstance(kind, str) else next(iter(kind))
        if name in _MARKS and self.cell is None:
            self.line.append(_MARKS[name])
        elif name == "Heading":
            self.end_block()
            self.line.append("*")
        elif name == "BlockQuote":
            self.end_block()
            self.stack.append([])
        elif name == "List":
            if not self.lists:
                self.end_block()
            self.lists.append(kind["List"])
        elif name == "Item":
            if self.line and self.lists:
                self.line.append("\n")
            number = self.lists[-1] if self.lists else None
            self.line.append("   " * max(len(self.lists) - 1, 0) + ("- " if number is None else f"{number}. "))
            if number is not None:
                self.lists[-1] = number + 1
        elif name == "CodeBlock":
            self.end_block()
            self.code = []
        elif name in ("Link", "Image"):
            self.links.append(str(kind[name].get("dest_url") or ""))
            self.line.append("\0")  # where the link's text starts: replaced at its end
        elif name == "Table":
            self.end_block()
            self.table = []
        elif name in ("TableHead", "TableRow") and self.table is not None:
            self.table.append([])
        elif name == "TableCell":
            self.cell = []

    def end(self, kind: Any) -> None:
        name = kind if isinstance(kind, str) else next(iter(kind))
        if name in _MARKS and self.cell is None:
            self.line.append(_MARKS[name])
        elif name == "Heading":
            self.line.append("*")
            self.end_block()
        elif name == "Paragraph" and not self.lists:
            self.end_block()
        elif name == "BlockQuote":
            self.end_block()
            inner = self.stack.pop()
            self.stack[-1].append("\n".join("> " + line if line else ">" for line in "\n\n".join(inner).split("\n")))
        elif name == "List":
            self.lists.pop()
            if not self.lists:
                self.end_block()
        elif name == "CodeBlock" and self.code is not None:
            body, self.code = "".join(self.code), None
            self.stack[-1].append(f"```\n{code_safe(body.removesuffix(chr(10)))}\n```")
        elif name in ("Link", "Image"):
            target = self.links.pop() if self.links else ""
            at = len(self.line) - 1 - self.line[::-1].index("\0") if "\0" in self.line else len(self.line)
            label = "".join(self.line[at + 1:])
            del self.line[at:]
            if target and label.strip() and label != target:
                self.line.append(self.link(label, target) if self.link else f"{label} ({target})")
            else:
                self.line.append(target or label)
        elif name == "TableCell" and self.cell is not None and self.table:
            self.table[-1].append("".join(self.cell))
            self.cell = None
        elif name == "Table" and self.table is not None:
            rows, self.table = self.table, None
            self.stack[-1].append("```\n" + code_safe("\n".join(" | ".join(row) for row in rows)) + "\n```")

    def result(self) -> str:
        self.end_block()
        while len(self.stack) > 1:  # never lose text, whatever the events
            inner = self.stack.pop()
            self.stack[-1].extend(inner)
        return "\n\n".join(self.stack[0])


def to_whatsapp(markdown: str, *, link: Callable[[str, str], str] | None = None) -> str:
    """One chunk of the model's Markdown as the text of a WhatsApp message. `link(label, url)` writes a
    link for a platform with the same markers and a link syntax of its own (Google Chat's `<url|label>`)."""
    writer = _Writer(link)
    try:
        events = pyromark.events(markdown, options=_OPTIONS)
    except Exception:  # a parser failure must never lose a reply: send it as text
        return markdown
    for event in events:
        if event in ("SoftBreak", "HardBreak"):
            writer.text("\n" if writer.code is None and writer.cell is None else " ")
        elif event == "Rule":
            writer.end_block()
            writer.stack[-1].append("───")
        elif not isinstance(event, dict):
            continue
        elif "Start" in event:
            writer.start(event["Start"])
        elif "End" in event:
            writer.end(event["End"])
        elif "Text" in event:
            writer.text(str(event["Text"]))
        elif "Code" in event:
            code = str(event["Code"])
            if writer.cell is not None:
                writer.cell.append(code)
            else:
                writer.line.append(f"`{code}`" if "`" not in code else code)
        elif "Html" in event or "InlineHtml" in event:
            writer.text(str(event.get("Html", event.get("InlineHtml"))))
        elif "TaskListMarker" in event:
            writer.line.append("☑ " if event["TaskListMarker"] else "☐ ")
    return writer.result()


MAX_CHARS = 4096  # a text message's body
SPLIT_AT = 3_600  # Markdown per piece, leaving room for the markers conversion adds
MAX_FILE_BYTES = 100 * 1024 * 1024  # a document's limit (the Cloud API's; a linked device sends the same)


def _utf16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def render_chunks(markdown: str, limit: int = SPLIT_AT) -> list[str]:
    """Markdown as WhatsApp messages of at most MAX_CHARS each: split on the Markdown first, then each piece
    converted; a piece the markers made too long is split smaller (no formatting spans two messages)."""
    out: list[str] = []
    for piece in split_markdown(markdown, limit, measure=_utf16):
        text = to_whatsapp(piece)
        if _utf16(text) <= MAX_CHARS:
            out.extend([text] if text.strip() else [])
        elif limit <= 250:
            out.extend(hard_split(text, MAX_CHARS, _utf16))
        else:
            out.extend(render_chunks(piece, limit // 2))
    return out
