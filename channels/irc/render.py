"""Markdown -> IRC: plain text lines (IRC shows no Markdown; links keep their target in parentheses).

No I/O here. A rendered chunk is a few lines of text; the adapter cuts each line to the bytes one
PRIVMSG may carry once the server has added our prefix (protocol.split_bytes), never inside a
character.
"""

from __future__ import annotations

from clawgate.channels.kit.markdown import split_markdown, to_plain

MAX_CHARS = 1_200  # one chunk: a few IRC lines, so a chunk retried after a lost connection repeats little


def render(markdown: str) -> list[str]:
    """Chunks of plain text, blank lines dropped (an empty PRIVMSG is an error on IRC)."""
    out = []
    for piece in split_markdown(markdown, MAX_CHARS):
        text = "\n".join(line for line in to_plain(piece).splitlines() if line.strip())
        if text:
            out.append(text)
    return out
