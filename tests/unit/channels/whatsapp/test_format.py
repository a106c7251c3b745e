"""Markdown as WhatsApp shows it: each construct in WhatsApp's own markers, read back the way the app reads them."""

from __future__ import annotations

from clawgate.channels.whatsapp.adapter import MAX_CHARS, render_chunks
from clawgate.channels.whatsapp.format import to_whatsapp
from tests.fakes.whatsapp import formats_of, plain_of


def test_each_construct_in_whatsapps_markers() -> None:
    assert to_whatsapp("**bold** _it_ ~~gone~~ `x = 1`") == "*bold* _it_ ~gone~ `x = 1`"
    assert to_whatsapp("# Heading\n\ntext") == "*Heading*\n\ntext"
    assert to_whatsapp("[the docs](https://example.org/a) and <https://example.org/b>") == \
        "the docs (https://example.org/a) and https://example.org/b"
    assert to_whatsapp("- one\n- two\n\n1. first\n2. second") == "- one\n- two\n\n1. first\n2. second"
    assert to_whatsapp("> quoted\n> still") == "> quoted\n> still"
    assert to_whatsapp("```python\nprint('hi')\n```") == "```\nprint('hi')\n```"
    assert to_whatsapp("| a | b |\n|---|---|\n| 1 | 2 |") == "```\na | b\n1 | 2\n```"


def test_escapes_are_resolved_and_literal_markers_read_as_written() -> None:
    shown = to_whatsapp(r"5 \* 3, snake\_case, \~tilde, a \` tick, back\\slash")
    assert shown == "5 * 3, snake_case, ~tilde, a ` tick, back\\slash"
    assert plain_of(shown) == shown and formats_of(shown) == set()


def test_a_code_block_cannot_be_closed_early() -> None:
    shown = to_whatsapp("````\nbefore ``` after\n````")
    assert shown == "```\nbefore ``<U+0060> after\n```"
    assert plain_of(shown) == "before ``<U+0060> after" and formats_of(shown) == {"pre"}


def test_long_replies_are_chunked_under_the_limit_with_blocks_whole() -> None:
    paragraphs = [f"Paragraph {i} **bold {i}** " + "word " * 150 for i in range(30)]
    code = "```\n" + "\n".join(f"line {i}" for i in range(50)) + "\n```"
    chunks = render_chunks("\n\n".join(paragraphs[:15] + [code] + paragraphs[15:]))
    assert len(chunks) > 1 and all(len(c.encode("utf-16-le")) // 2 <= MAX_CHARS for c in chunks)
    assert sum("line 0\n" in c and "line 49" in c for c in chunks) == 1
    assert all(c.count("*") % 2 == 0 for c in chunks)  # no bold opened in one message and closed in another
