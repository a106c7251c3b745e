"""Markdown -> Telegram chunks: formatting as entities, and splitting under the 4096 limit. No I/O."""

from __future__ import annotations

import random

from telegramify_markdown import convert

from clawgate.channels.telegram.render import MAX_CHARS, render, split_markdown, tg_length


def test_short_markdown_is_one_chunk_with_entities() -> None:
    [chunk] = render("Use **bold**, _italics_ and `code`.\n\n[a link](https://example.com/a_b?x=1&y=2)")
    assert chunk.text == "Use bold, italics and code.\n\na link"
    kinds = {(e["type"], chunk.text[e["offset"]:e["offset"] + e["length"]]) for e in chunk.entities}
    assert kinds == {("bold", "bold"), ("italic", "italics"), ("code", "code"), ("text_link", "a link")}
    assert [e["url"] for e in chunk.entities if e["type"] == "text_link"] == ["https://example.com/a_b?x=1&y=2"]


def test_markup_characters_from_the_model_are_text_not_markup() -> None:
    for shown in ("if a < b && c > d: <b>not bold</b>", "Usage: tool <input> <output>", "List<String> items",
                  "<div>\nraw block\n</div>"):
        [chunk] = render(shown)
        assert (chunk.text, chunk.entities) == (shown, [])
    [chunk] = render("`<kept>` and <https://example.com>")
    assert chunk.text == "<kept> and https://example.com"
    assert [e["type"] for e in chunk.entities] == ["code", "text_link"]


def test_empty_reply_still_says_something() -> None:
    assert [c.text for c in render("  \n\n ")] == ["(empty reply)"]


def test_split_prefers_paragraph_boundaries() -> None:
    paragraphs = [f"P{i} " + "word " * 30 for i in range(12)]  # ~155 chars each
    pieces = split_markdown("\n\n".join(p.strip() for p in paragraphs), limit=500)
    assert all(tg_length(p) <= 500 for p in pieces)
    for piece in pieces:  # no paragraph was cut: every piece is whole paragraphs
        for para in piece.split("\n\n"):
            assert para.startswith("P") and para.endswith("word")
    assert "\n\n".join(pieces) == "\n\n".join(p.strip() for p in paragraphs)


def test_an_oversized_paragraph_is_split_at_lines_then_words() -> None:
    lines = [f"line {i} " + "x" * 50 for i in range(30)]
    pieces = split_markdown("\n".join(lines), limit=400)
    assert all(tg_length(p) <= 400 for p in pieces)
    assert "\n".join(pieces).split("\n") == lines  # cut only between lines
    words = " ".join(f"w{i}" for i in range(400))
    pieces = split_markdown(words, limit=300)
    assert " ".join(pieces) == words and all(tg_length(p) <= 300 for p in pieces)
    blob = "y" * 1000
    assert "".join(split_markdown(blob, limit=300)) == blob


def test_code_blocks_stay_whole_when_they_fit() -> None:
    code = "```python\n" + "\n".join(f"x{i} = {i}" for i in range(30)) + "\n```"
    text = "intro " * 60 + "\n\n" + code + "\n\n" + "outro " * 60
    pieces = split_markdown(text, limit=500)
    holder = [p for p in pieces if "x0 = 0" in p]
    assert len(holder) == 1 and "x29 = 29" in holder[0] and holder[0].count("```") == 2


def test_code_block_with_blank_lines_is_one_block() -> None:
    code = "```\na\n\n\nb\n```"
    assert split_markdown("para\n\n" + code + "\n\nend", limit=16) == ["para", code, "end"]


def test_an_oversized_code_block_is_refenced_per_part() -> None:
    code = "```sh\n" + "\n".join(f"echo {i:04d}" for i in range(200)) + "\n```"
    pieces = split_markdown(code, limit=500)
    assert len(pieces) > 1
    for piece in pieces:
        assert tg_length(piece) <= 500 and piece.startswith("```sh\n") and piece.endswith("\n```")
    chunks = render(code, limit=500)
    assert all(c.entities and c.entities[0]["type"] == "pre" for c in chunks)
    assert "\n".join(c.text for c in chunks).split("\n") == [f"echo {i:04d}" for i in range(200)]


def test_length_is_counted_in_utf16_units() -> None:
    emoji = "😀" * 3000  # 3000 code points, 6000 UTF-16 units
    chunks = render(emoji)
    assert len(chunks) == 2 and all(tg_length(c.text) <= MAX_CHARS for c in chunks)
    assert "".join(c.text for c in chunks) == emoji


def test_rendered_chunks_keep_all_the_text_in_order() -> None:
    body = "\n\n".join(f"**Point {i}.** " + "some detail " * 40 for i in range(40))
    chunks = render(body)
    assert len(chunks) > 1 and all(tg_length(c.text) <= MAX_CHARS for c in chunks)
    whole, _ = convert(body)
    assert " ".join(" ".join(c.text.split()) for c in chunks) == " ".join(whole.split())
    for chunk in chunks:  # entities stay inside their own chunk
        assert all(e["offset"] >= 0 and e["offset"] + e["length"] <= tg_length(chunk.text) for e in chunk.entities)


def test_random_markdown_always_fits() -> None:
    rng = random.Random(7)
    tokens = ["**", "*", "_", "`", "```", "```py\n", "\n```", "~~", "||", "> ", "- ", "# ", "word", " ", "\n",
              "\n\n", "[l](http://x.y)", "&", "<", "é", "😀", "x" * 120]
    for _ in range(300):
        text = "".join(rng.choice(tokens) for _ in range(rng.randint(1, 400)))
        for chunk in render(text, limit=300):
            assert chunk.text.strip() and tg_length(chunk.text) <= 300
