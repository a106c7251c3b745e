"""Markdown for Discord: chunks under 2,000 characters, formatting kept, what Discord misreads rewritten."""

from __future__ import annotations

from clawgate.channels.discord.render import MAX_CHARS, for_discord, render


def test_long_reply_is_chunked_under_the_limit_with_code_blocks_whole() -> None:
    code = "```python\n" + "\n".join(f"print({i})" for i in range(60)) + "\n```"
    paragraphs = [f"Paragraph {i}: " + "word " * 60 for i in range(25)]
    markdown = "\n\n".join(paragraphs[:12] + [code] + paragraphs[12:])
    assert len(markdown) > 10_000 - 2_000

    chunks = render(markdown)

    assert len(chunks) >= 5
    assert all(0 < len(chunk) <= MAX_CHARS for chunk in chunks)
    holding = [c for c in chunks if "print(0)" in c]
    assert len(holding) == 1 and holding[0].count("```") == 2  # the code block travels whole, fenced
    joined = " ".join(chunks)
    assert all(f"Paragraph {i}:" in joined for i in range(25))


def test_an_over_long_code_block_is_refenced_in_every_chunk() -> None:
    code = "```\n" + "\n".join("x = 1  # " + "y" * 60 for _ in range(100)) + "\n```"
    chunks = render(code)
    assert len(chunks) >= 3
    assert all(c.startswith("```") and c.rstrip().endswith("```") and len(c) <= MAX_CHARS for c in chunks)


def test_tables_go_into_a_code_block_and_deep_headings_become_bold() -> None:
    out = for_discord("#### Results\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\nafter")
    assert out.startswith("**Results**\n")
    assert "```\n| a | b |\n|---|---|\n| 1 | 2 |\n```" in out
    assert out.rstrip().endswith("after")


def test_discord_native_markdown_is_left_as_written() -> None:
    text = "# Title\n\n**bold** *it* ~~gone~~ `code` [link](https://example.org)\n\n> quote\n\n- a\n- b"
    assert for_discord(text) == text


def test_underscore_strong_and_images_are_rewritten() -> None:
    assert for_discord("__strong__ and _em_") == "**strong** and _em_"  # __x__ would underline on Discord
    assert for_discord("see ![chart](https://example.org/c.png)") == "see [chart](https://example.org/c.png)"


def test_mentions_are_not_escaped_but_empty_input_still_gives_a_message() -> None:
    assert for_discord("ping @everyone <@123>") == "ping @everyone <@123>"  # no pings: allowed_mentions
    assert render("") == ["(empty reply)"]
    assert render("\n\n   \n") == ["(empty reply)"]


def test_a_code_block_holding_three_backticks_cannot_be_closed_early() -> None:
    """Discord ends a code block at the first ``` (it knows no longer fences): the third backtick is shown
    as <U+0060>, so the rest stays code and nothing after it formats."""
    out = for_discord("````sh\necho ``` *not bold* ```` done\n````\n\n__strong__")
    assert out.startswith("```sh\necho ``<U+0060> *not bold* ``<U+0060><U+0060> done\n```\n")
    assert out.rstrip().endswith("**strong**")
