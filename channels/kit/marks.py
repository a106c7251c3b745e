"""Markdown for platforms whose formatting is paired markers, written from a CommonMark parser's events.

Slack's mrkdwn, WhatsApp and Google Chat read the same marks: `*bold*`, `_italic_`, `~strike~`,
`` `code` ``, ```` ``` ```` blocks, `> ` quotes; none has headings, tables or a backslash escape. Why a
parser and not text substitution: Markdown's escapes (`\\(`, `\\*`) must be resolved, not passed on,
and the parser hands over the text with its escapes resolved and its formatting as events. What differs
per platform is a `MarkerStyle`: how text is escaped (Slack's `& < >`), how a list item starts, and how
a link is written. A heading is written bold, a table as a code block, a rule as a line. Inside a code
block a third backtick in a row (which would end the block: these platforms know no longer fences) is
written `<U+0060>`, the notation of agent/core/visible.py. No I/O here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable

import pyromark

_OPTIONS = (pyromark.Options.ENABLE_TABLES | pyromark.Options.ENABLE_STRIKETHROUGH
            | pyromark.Options.ENABLE_TASKLISTS)
_MARKS = {"Strong": "*", "Emphasis": "_", "Strikethrough": "~"}


def _as_is(text: str) -> str:
    return text


def label_then_url(label: str, target: str) -> str:
    """A link on a platform without link markup: `label (url)`, or the url alone when that is its label
    (the platform makes the url clickable itself)."""
    if target and label.strip() and label != target:
        return f"{label} ({target})"
    return target or label


@dataclass(frozen=True)
class MarkerStyle:
    """What one platform writes differently. `escape` is applied to all text the model wrote (code too);
    `link(label, target)` gets the label already escaped and the target as the model wrote it."""

    escape: Callable[[str], str] = _as_is
    bullet: str = "- "
    indent: str = "   "
    link: Callable[[str, str], str] = field(default=label_then_url)


def code_safe(text: str, style: MarkerStyle) -> str:
    """Code block text: no run of three backticks that would close the block, then escaped (so the
    `<...>` of the notation is text to the platform too)."""
    return style.escape(re.sub(r"(?<=``)`", "<U+0060>", text))


class _Writer:
    """Walks the events once; `stack` holds the finished blocks of each open block quote."""

    def __init__(self, style: MarkerStyle) -> None:
        self.style = style
        self.stack: list[list[str]] = [[]]
        self.line: list[str] = []  # the open block's text
        self.lists: list[int | None] = []  # open lists: the next number, or None for bullets
        self.links: list[str] = []
        self.code: list[str] | None = None  # inside a code block: its text
        self.table: list[list[str]] | None = None
        self.cell: list[str] | None = None

    def text(self, value: str) -> None:
        if self.code is not None:
            self.code.append(value)
        elif self.cell is not None:
            self.cell.append(value)
        else:
            self.line.append(self.style.escape(value))

    def inline_code(self, code: str) -> None:
        if self.cell is not None:
            self.cell.append(code)
        else:
            shown = self.style.escape(code)
            self.line.append(f"`{shown}`" if "`" not in code else shown)

    def rule(self) -> None:
        self.end_block()
        self.stack[-1].append("───")

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
            self._item()
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

    def _item(self) -> None:
        if self.line and self.lists:
            self.line.append("\n")
        number = self.lists[-1] if self.lists else None
        depth = max(len(self.lists) - 1, 0)
        self.line.append(self.style.indent * depth + (self.style.bullet if number is None else f"{number}. "))
        if number is not None:
            self.lists[-1] = number + 1

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
            self.stack[-1].append(f"```\n{code_safe(body.removesuffix(chr(10)), self.style)}\n```")
        elif name in ("Link", "Image"):
            target = self.links.pop() if self.links else ""
            at = len(self.line) - 1 - self.line[::-1].index("\0") if "\0" in self.line else len(self.line)
            label = "".join(self.line[at + 1:])
            del self.line[at:]
            self.line.append(self.style.link(label, target))
        elif name == "TableCell" and self.cell is not None and self.table:
            self.table[-1].append("".join(self.cell))
            self.cell = None
        elif name == "Table" and self.table is not None:
            rows, self.table = self.table, None
            self.stack[-1].append("```\n" + code_safe("\n".join(" | ".join(row) for row in rows), self.style) + "\n```")

    def result(self) -> str:
        self.end_block()
        while len(self.stack) > 1:  # an unclosed quote (cannot happen with a parser, but never lose text)
            inner = self.stack.pop()
            self.stack[-1].extend(inner)
        return "\n\n".join(self.stack[0])


def to_markers(markdown: str, style: MarkerStyle) -> str:
    """One chunk of the model's Markdown in a marker platform's formatting."""
    writer = _Writer(style)
    try:
        events = pyromark.events(markdown, options=_OPTIONS)
    except Exception:  # a parser failure must never lose a reply: send it as text
        return style.escape(markdown)
    for event in events:
        if event in ("SoftBreak", "HardBreak"):
            writer.text("\n" if writer.code is None and writer.cell is None else " ")
        elif event == "Rule":
            writer.rule()
        elif not isinstance(event, dict):
            continue
        elif "Start" in event:
            writer.start(event["Start"])
        elif "End" in event:
            writer.end(event["End"])
        elif "Text" in event:
            writer.text(str(event["Text"]))
        elif "Code" in event:
            writer.inline_code(str(event["Code"]))
        elif "Html" in event or "InlineHtml" in event:
            writer.text(str(event.get("Html", event.get("InlineHtml"))))
        elif "TaskListMarker" in event:
            writer.line.append("☑ " if event["TaskListMarker"] else "☐ ")
    return writer.result()


__all__ = ["MarkerStyle", "code_safe", "label_then_url", "to_markers"]
