"""How WhatsApp shows a message's text: its formatting markers read the way the app reads them.

WhatsApp formats ```block```, `code`, *bold*, _italic_ and ~strike~ when the opening marker starts a
word (start of text, after a space or punctuation) and is followed by a non-space, and the closing
one ends a word and follows a non-space; anything else is shown as typed. What a person sees is the
text without the markers that formatted.
"""

from __future__ import annotations

import re

_BLOCK = re.compile(r"```(.+?)```", re.S)
_INLINE = re.compile(r"(?<![\w`])`([^`\n]+?)`(?![\w`])")
_MARKS = {"*": "bold", "_": "italic", "~": "strike"}


def _span(mark: str) -> re.Pattern[str]:
    m = re.escape(mark)
    return re.compile(rf"(?<![\w{m}]){m}(?=\S)([^\n]*?\S){m}(?![\w{m}])")


def _parse(text: str) -> tuple[str, set[str]]:
    kinds: set[str] = set()
    out: list[str] = []
    pos = 0
    for block in _BLOCK.finditer(text):  # code first: nothing inside it formats
        out.append(_inline(text[pos:block.start()], kinds))
        kinds.add("pre")
        out.append(block.group(1).removeprefix("\n").removesuffix("\n"))
        pos = block.end()
    out.append(_inline(text[pos:], kinds))
    return "".join(out), kinds


def _inline(text: str, kinds: set[str]) -> str:
    pieces: list[str] = []
    pos = 0
    for code in _INLINE.finditer(text):
        pieces.append(_marks(text[pos:code.start()], kinds))
        kinds.add("code")
        pieces.append(code.group(1))
        pos = code.end()
    pieces.append(_marks(text[pos:], kinds))
    return "".join(pieces)


def _marks(text: str, kinds: set[str]) -> str:
    for mark, kind in _MARKS.items():
        pattern = _span(mark)
        while (found := pattern.search(text)) is not None:
            kinds.add(kind)
            text = text[:found.start()] + found.group(1) + text[found.end():]
    return text


def plain_of(text: str) -> str:
    return _parse(text)[0]


def formats_of(text: str) -> set[str]:
    return _parse(text)[1]
