"""IRC lines: parsing and writing messages with IRCv3 tags (RFC 1459 / modern IRC, message-tags spec).

No I/O here. A line is `[@tags] [:prefix] COMMAND params... [:trailing]`; tag values are escaped
(`\\:` `;`, `\\s` space, `\\\\` backslash, `\\r`, `\\n`). The 512-byte limit covers everything but the
tags, CR-LF included, and a relayed PRIVMSG carries the sender's `:nick!user@host ` prefix, which the
server adds: `text_budget` says how many bytes of text fit one line.
"""

from __future__ import annotations

from dataclasses import dataclass, field

LINE_LIMIT = 512  # bytes, CR-LF included, tags not counted
# the longest user@host a server may show for us before we learnt ours from our JOIN: 10 + ~ + 63
UNKNOWN_PREFIX_TAIL = "~" + "u" * 10 + "@" + "h" * 63
_UNESCAPE = {":": ";", "s": " ", "\\": "\\", "r": "\r", "n": "\n"}
CTCP = "\x01"


@dataclass(frozen=True)
class Message:
    command: str
    params: tuple[str, ...] = ()
    prefix: str = ""
    tags: dict[str, str] = field(default_factory=dict)

    @property
    def nick(self) -> str:
        return self.prefix.split("!", 1)[0]

    def param(self, index: int) -> str:
        return self.params[index] if len(self.params) > index else ""


def _unescape(value: str) -> str:
    out, chars = [], iter(value)
    for char in chars:
        if char == "\\":
            nxt = next(chars, "")
            out.append(_UNESCAPE.get(nxt, nxt))
        else:
            out.append(char)
    return "".join(out)


def parse(line: str) -> Message | None:
    """One received line (without CR-LF), or None for an empty one."""
    line = line.rstrip("\r\n")
    tags: dict[str, str] = {}
    if line.startswith("@"):
        raw, _, line = line[1:].partition(" ")
        for item in raw.split(";"):
            key, _, value = item.partition("=")
            if key:
                tags[key] = _unescape(value)
    line = line.lstrip(" ")
    prefix = ""
    if line.startswith(":"):
        prefix, _, line = line[1:].partition(" ")
    head, sep, trailing = line.partition(" :")
    params = head.split()
    if not params:
        return None
    if sep:
        params.append(trailing)
    return Message(params[0].upper(), tuple(params[1:]), prefix, tags)


def line(command: str, *params: str) -> str:
    """A line to send; the last parameter becomes trailing when it needs to. Refuses CR, LF and NUL,
    which would let text inject a second command."""
    parts = [command]
    for index, param in enumerate(params):
        if any(c in param for c in "\r\n\0"):
            raise ValueError("an IRC parameter cannot hold CR, LF or NUL")
        last = index == len(params) - 1
        if last and (not param or " " in param or param.startswith(":")):
            parts.append(":" + param)
        else:
            parts.append(param)
    return " ".join(parts)


def text_budget(own_prefix: str, command: str, target: str) -> int:
    """Bytes of text one `command target :text` line may carry once the server relays it with our prefix."""
    overhead = len(f":{own_prefix} {command} {target} :".encode()) + 2  # + CR-LF
    return LINE_LIMIT - overhead


def split_bytes(text: str, budget: int) -> list[str]:
    """`text` in pieces of at most `budget` UTF-8 bytes, cut at a space when one is near and never inside a
    character (a cut is made on character boundaries, so multibyte text stays intact)."""
    out: list[str] = []
    while len(text.encode()) > budget:
        size, cut = 0, 0
        for index, char in enumerate(text):
            size += len(char.encode())
            if size > budget:
                break
            cut = index + 1
        space = text.rfind(" ", 0, cut)
        if space > cut // 2:
            cut = space + 1
        out.append(text[:cut].rstrip(" ") or text[:cut])
        text = text[cut:]
    if text:
        out.append(text)
    return out


def ctcp(text: str) -> tuple[str, str] | None:
    """(command, argument) of a CTCP request (`\\x01VERSION\\x01`, `\\x01ACTION waves\\x01`), or None."""
    if not text.startswith(CTCP):
        return None
    body = text.strip(CTCP)
    command, _, argument = body.partition(" ")
    return command.upper(), argument


def casefold(name: str) -> str:
    """rfc1459 case mapping (`[]\\~` are the upper case of `{}|^`), as servers compare nicks and channels."""
    return name.lower().translate(str.maketrans("[]\\~", "{}|^"))


def addressed_text(text: str, nick: str) -> str | None:
    """The text after `nick: ` or `nick, ` at the start of a channel message (the mention removed), or None."""
    head = text[:len(nick) + 1]
    if len(text) > len(nick) and casefold(head[:-1]) == casefold(nick) and head[-1] in ":,":
        return text[len(nick) + 1:].strip()
    return None


__all__ = ["CTCP", "LINE_LIMIT", "UNKNOWN_PREFIX_TAIL", "Message", "addressed_text", "casefold", "ctcp", "line", "parse", "split_bytes",
           "text_budget"]
