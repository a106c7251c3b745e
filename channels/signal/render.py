"""Markdown -> Signal: plain text plus `textStyle` ranges (start:length:STYLE in UTF-16 code units).

Signal shows no markup: bold, italic, strikethrough and monospace are ranges sent beside the text
(signal-cli's `send --text-style`), so what the model wrote as `**x**` reads as a bold x and every
other character reads as written. No I/O here.
"""

from __future__ import annotations

import pyromark

from clawgate.channels.kit.markdown import split_markdown

MAX_CHARS = 2_000  # Signal clients show at most this much of one message (longer goes as a text attachment)
SPLIT_AT = 1_800  # Markdown per piece: a link's target added in parentheses lengthens the text

_STYLE_OF = {"Strong": "BOLD", "Emphasis": "ITALIC", "Strikethrough": "STRIKETHROUGH", "Heading": "BOLD"}
_BLOCKS = {"Paragraph", "Heading", "CodeBlock", "BlockQuote", "List", "TableHead", "TableRow", "Table"}
_OPTIONS = pyromark.Options.ENABLE_STRIKETHROUGH | pyromark.Options.ENABLE_TABLES


class StyledText(str):
    """One message: its text, with the `textStyle` ranges signal-cli takes (`styles`)."""

    styles: tuple[str, ...]

    def __new__(cls, text: str, styles: tuple[str, ...] = ()) -> "StyledText":
        obj = super().__new__(cls, text)
        obj.styles = styles
        return obj


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def to_signal(markdown: str) -> StyledText:
    """The text a Signal user reads and its style ranges; a link's target in parentheses after its text."""
    out: list[str] = []
    at = 0  # UTF-16 units written so far
    open_: list[tuple[str, int]] = []
    styles: list[tuple[int, int, str]] = []
    links: list[str] = []

    def write(text: str) -> None:
        nonlocal at
        out.append(text)
        at += utf16_len(text)

    def end_block(sep: str) -> None:
        """End a block with `sep` ("\n" or "\n\n"), counting the newlines already there."""
        text = "".join(out)
        have = len(text) - len(text.rstrip("\n"))
        if text and have < len(sep):
            write("\n" * (len(sep) - have))

    for event in pyromark.events(markdown, options=_OPTIONS):
        if event in ("SoftBreak", "HardBreak"):
            write("\n")
        elif not isinstance(event, dict):
            continue
        elif "Text" in event:
            write(str(event["Text"]))
        elif "Code" in event:
            start = at
            write(str(event["Code"]))
            styles.append((start, at - start, "MONOSPACE"))
        elif "Html" in event or "InlineHtml" in event:  # raw HTML the model wrote is text: shown as written
            write(str(event.get("Html", event.get("InlineHtml"))))
        elif "Start" in event:
            start = event["Start"]
            name = start if isinstance(start, str) else next(iter(start))
            if name == "Item":
                write("• ")
            elif name == "Link":
                links.append(str(start["Link"].get("dest_url") or ""))
            elif name == "CodeBlock":
                open_.append(("MONOSPACE", at))
            if name in _STYLE_OF:
                open_.append((_STYLE_OF[name], at))
        elif "End" in event:
            end = event["End"]
            name = end if isinstance(end, str) else next(iter(end))
            if name == "CodeBlock" and out and out[-1].endswith("\n"):  # the fence's own last newline
                out[-1] = out[-1][:-1]
                at -= 1
            if name in _STYLE_OF or name == "CodeBlock":
                style, begin = open_.pop()
                if at > begin:
                    styles.append((begin, at - begin, style))
            if name == "Link" and links:
                target = links.pop()
                text = "".join(out)
                if target and not text.endswith(target) and not target.startswith("mailto:"):
                    write(f" ({target})")
            if name == "Item":
                end_block("\n")
            elif name in _BLOCKS:
                end_block("\n\n")
    text = "".join(out).rstrip()
    length = utf16_len(text)
    ranges = tuple(f"{s}:{min(n, length - s)}:{style}" for s, n, style in sorted(styles) if s < length)
    return StyledText(text, ranges)


def render(markdown: str) -> list[StyledText]:
    """Chunks under Signal's limit, each styled on its own (no style spans two messages)."""
    out: list[StyledText] = []
    for piece in split_markdown(markdown, SPLIT_AT):
        chunk = to_signal(piece)
        if utf16_len(chunk) > MAX_CHARS:  # markup-light text longer once links are spelled out
            out += [to_signal(part) for part in split_markdown(piece, SPLIT_AT // 2)]
        elif chunk.strip():
            out.append(chunk)
    return [c for c in out if c.strip()]
