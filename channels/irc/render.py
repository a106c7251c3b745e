"""Markdown -> IRC: plain text lines (IRC shows no Markdown; links keep their target in parentheses).

No I/O here. IRC has no message of several lines: a chunk is sent as one PRIVMSG per line, and a line
longer than one PRIVMSG carries is wrapped. A wrap a person cannot tell from a line break of the text, so
`render` wraps lines itself (at what one PRIVMSG to the longest target carries, the adapter says) and ends a chunk at
each wrap: text that must be read exactly as one message (an approval prompt's command, which the kit
cuts into labelled parts until each fits one chunk: ChannelKit's fits) then never has a wrap inside.
"""

from __future__ import annotations

from clawgate.channels.irc.protocol import UNKNOWN_PREFIX_TAIL, split_bytes, text_budget
from clawgate.channels.kit.markdown import split_markdown, to_plain

MAX_CHARS = 1_200  # one chunk: a few IRC lines, so a chunk retried after a lost connection repeats little
LONGEST_TARGET = "t" * 64  # the longest channel name most networks allow (CHANNELLEN); nicks are shorter


def line_bytes(own_prefix: str | None) -> int:
    """Text bytes of one PRIVMSG to any target, sent as `own_prefix` (nick!user@host, once the server showed it to
    us by our JOIN); without it, as the longest nick!user@host."""
    return text_budget(own_prefix or "n" * 30 + "!" + UNKNOWN_PREFIX_TAIL, "PRIVMSG", LONGEST_TARGET)


def render(markdown: str, budget: int | None = None) -> list[str]:
    """Chunks of plain text, blank lines dropped (an empty PRIVMSG is an error on IRC), each line one PRIVMSG;
    a line over `budget` bytes (default: line_bytes(None)) is wrapped and each wrap ends a chunk."""
    budget = budget or line_bytes(None)
    out: list[str] = []
    for piece in split_markdown(markdown, MAX_CHARS):
        chunk: list[str] = []
        for row in to_plain(piece).splitlines():
            if not row.strip():
                continue
            *wrapped, last = split_bytes(row, budget)
            for part in wrapped:
                out.append("\n".join([*chunk, part]))
                chunk = []
            chunk.append(last)
        if chunk:
            out.append("\n".join(chunk))
    return out
