"""How Teams shows a bot's HTML message (`textFormat: "xml"`): the text a person reads, and its formatting."""

from __future__ import annotations

from html.parser import HTMLParser

_BLOCKS = {"p", "li", "pre", "blockquote", "h1", "h2", "h3", "h4", "h5", "h6", "tr", "ul", "ol", "table"}
_KINDS = {"b": "bold", "strong": "bold", "i": "italic", "em": "italic", "s": "strike", "del": "strike"}


class _Reader(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.kinds: set[str] = set()
        self.code: list[str] = []
        self._pre = 0
        self._in_code: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "br":
            self.out.append("\n")
        elif tag == "pre":
            self._pre += 1
            self.kinds.add("pre")
            self._in_code = []
        elif tag == "code" and not self._pre:
            self.kinds.add("code")
        elif tag in _KINDS:
            self.kinds.add(_KINDS[tag])

    def handle_endtag(self, tag: str) -> None:
        if tag == "pre":
            self._pre -= 1
            if self._in_code is not None:
                self.code.append("".join(self._in_code).removesuffix("\n"))
                self._in_code = None
        if tag in _BLOCKS:
            self.out.append("\n")

    def handle_data(self, data: str) -> None:
        self.out.append(data)
        if self._in_code is not None:
            self._in_code.append(data)


def _read(text: str) -> _Reader:
    reader = _Reader()
    reader.feed(text)
    reader.close()
    return reader


def plain_of(text: str) -> str:
    """The message as read: tags gone, entities undone, blocks on their own lines."""
    lines = "".join(_read(text).out).split("\n")
    return "\n".join(line for line in lines if line.strip()).strip()


def formats_of(text: str) -> set[str]:
    return _read(text).kinds


def code_of(text: str) -> str:
    """The text of the message's code blocks, joined."""
    return "".join(_read(text).code)


__all__ = ["code_of", "formats_of", "plain_of"]
