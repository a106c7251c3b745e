"""Markdown -> Slack mrkdwn, written from a CommonMark parser's events (pyromark, pulldown-cmark).

Why a parser and not text substitution: mrkdwn has no backslash escapes, so `\\(` or `\\*` that Markdown
uses to mean a literal character must be resolved, not passed on (users saw `\\(tools\\.exec\\.allowlist\\)`);
the parser hands over the text with its escapes resolved and its formatting as events, and this module
writes each in Slack's syntax: `*bold*`, `_italic_`, `~strike~`, `` `code` ``, fenced blocks,
`<url|text>` links, `>` quotes, bullets. Tables (mrkdwn has none) become a code block.

Slack reads ``&``, ``<`` and ``>`` as markup (``<@U123>``, ``<!channel>``, ``<url|text>``) and asks apps to
send them as ``&amp;`` ``&lt;`` ``&gt;`` everywhere, code included: every text this writes is escaped so,
and only the links it writes itself are markup (no mass mention from a reply). A literal ``*`` or ``_``
in the text is left as it is: mrkdwn has no way to escape it, and it formats only in matched pairs at
word boundaries. Inside a code block a third backtick in a row would end the block (Slack knows no
longer fences), so it is written ``<U+0060>``, the notation of agent/core/visible.py.
"""

from __future__ import annotations

import re
from typing import Any

import pyromark

_OPTIONS = (pyromark.Options.ENABLE_TABLES | pyromark.Options.ENABLE_STRIKETHROUGH
            | pyromark.Options.ENABLE_TASKLISTS)
_MARKS = {"Strong": "*", "Emphasis": "_", "Strikethrough": "~"}
_LINKABLE = re.compile(r"^(https?|mailto):", re.IGNORECASE)
_SPECIAL = re.compile(r"<([!@#^][^>]*)>")


def escape(text: str) -> str:
    """Slack's three control characters as the entities Slack asks for."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def code_safe(text: str) -> str:
    """Code block text: no run of three backticks that would close the block (the third written <U+0060>),
    then escaped, so the `<...>` of that escape is text to Slack too, never its link markup."""
    return escape(re.sub(r"(?<=``)`", "<U+0060>", text))


class _Writer:
    """Walks the events once; `blocks` of the current container (a quote nests a new list of blocks)."""

    def __init__(self) -> None:
        self.stack: list[list[str]] = [[]]  # finished blocks, per open block quote
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
            self.line.append(escape(value))

    def end_block(self) -> None:
        text = "".join(self.line).strip("\n")
        self.line = []
        if text.strip():
            self.stack[-1].append(text)

    def start(self, kind: Any) -> None:
        name = kind if isinstance(kind, str) else next(iter(kind))
        if name in _MARKS:
            self.line.append(_MARKS[name]) if self.cell is None else None
        elif name == "Heading":
            self.end_block()
            self.line.append("*")
        elif name == "BlockQuote":
            self.end_block()
            self.stack.append([])
        elif name == "List":
            self.end_block() if not self.lists else None
            self.lists.append(kind["List"])
        elif name == "Item":
            if self.line and self.lists:
                self.line.append("\n")
            depth = max(len(self.lists) - 1, 0)
            number = self.lists[-1] if self.lists else None
            self.line.append("    " * depth + ("• " if number is None else f"{number}. "))
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
        if name in _MARKS:
            self.line.append(_MARKS[name]) if self.cell is None else None
        elif name == "Heading":
            self.line.append("*")
            self.end_block()
        elif name == "Paragraph" and not self.lists:
            self.end_block()
        elif name == "BlockQuote":
            self.end_block()
            inner = self.stack.pop()
            quoted = "\n".join("> " + line if line else ">" for line in "\n\n".join(inner).split("\n"))
            self.stack[-1].append(quoted)
        elif name == "List":
            self.lists.pop()
            if not self.lists:
                self.end_block()
        elif name == "CodeBlock" and self.code is not None:
            body = "".join(self.code)
            self.code = None
            self.stack[-1].append(f"```\n{code_safe(body.removesuffix(chr(10)))}\n```")
        elif name in ("Link", "Image"):
            self._link()
        elif name == "TableCell" and self.cell is not None and self.table:
            self.table[-1].append("".join(self.cell))
            self.cell = None
        elif name == "Table" and self.table is not None:
            rows, self.table = self.table, None
            self.stack[-1].append("```\n" + code_safe("\n".join(" | ".join(row) for row in rows)) + "\n```")

    def _link(self) -> None:
        target = self.links.pop() if self.links else ""
        at = len(self.line) - 1 - self.line[::-1].index("\0") if "\0" in self.line else len(self.line)
        label = "".join(self.line[at + 1:])
        del self.line[at:]
        if _LINKABLE.match(target) and "|" not in target:
            same = label == escape(target) or not label.strip()
            self.line.append(f"<{escape(target)}>" if same else f"<{escape(target)}|{label}>")
        elif target:
            self.line.append(f"{label} ({escape(target)})" if label else escape(target))
        else:
            self.line.append(label)

    def result(self) -> str:
        self.end_block()
        while len(self.stack) > 1:  # an unclosed quote (cannot happen with a parser, but never lose text)
            inner = self.stack.pop()
            self.stack[-1].extend(inner)
        return "\n\n".join(self.stack[0])


def to_mrkdwn(markdown: str) -> str:
    """One chunk of the model's Markdown as the text of a Slack message."""
    writer = _Writer()
    try:
        events = pyromark.events(markdown, options=_OPTIONS)
    except Exception:  # a parser failure must never lose a reply: send it as text
        return escape(markdown)
    for event in events:
        if event == "SoftBreak" or event == "HardBreak":
            writer.text("\n") if writer.code is None and writer.cell is None else writer.text(" ")
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
                writer.line.append(f"`{escape(code)}`" if "`" not in code else escape(code))
        elif "Html" in event or "InlineHtml" in event:
            writer.text(str(event.get("Html", event.get("InlineHtml"))))
        elif "TaskListMarker" in event:
            writer.line.append("☑ " if event["TaskListMarker"] else "☐ ")
    return writer.result()


def no_pings(text: str) -> str:
    """Text about to be sent with Slack's special sequences (``<!channel>``, ``<!here>``, ``<@U…>``,
    ``<#C…>``) shown as text, not acted on: a last guard for text that did not come through to_mrkdwn."""
    return _SPECIAL.sub(r"&lt;\1&gt;", text)
