"""The one function that decides how a command is shown: every character that displays differently from
what it is becomes <U+XXXX>; everything else is left exactly as it is."""

from __future__ import annotations

import pytest

from clawgate.agent.core.visible import hidden, visible


@pytest.mark.parametrize("char", [
    *map(chr, range(0x202A, 0x202F)),  # bidirectional embeddings and overrides
    *map(chr, range(0x2066, 0x206A)),  # isolates
    *map(chr, range(0x200B, 0x2010)),  # zero-width space, joiners, marks
    *map(chr, range(0x2060, 0x2065)),  # word joiner, invisible operators
    "\ufeff", "\u00ad", "\u061c", "\U000e0041", "\U000e007f",  # BOM, soft hyphen, Arabic mark, tags
    "\x00", "\x1b", "\r", "\t", "\x7f", "\x85",  # control characters (a terminal escape, a carriage return)
    "\u00a0", *map(chr, range(0x2000, 0x200B)), "\u202f", "\u205f", "\u3000", "\u1680",  # look-alike spaces
    "\u2028", "\u2029", "\u3164", "\u115f", "\ufe0f", "\u034f", "\u2800", "\ue000", "\U0010ffff",
])
def test_every_hidden_character_is_written_as_its_code_point(char: str) -> None:
    assert hidden(char)
    assert visible(f"a{char}b") == f"a<U+{ord(char):04X}>b"


def test_what_displays_as_itself_is_left_alone() -> None:
    text = "rm -rf ./build && echo 'done' | tee \"log.txt\" # é ü ß 漢字 עברית 😀 <b> &amp; \\ ` * _\nline two"
    assert visible(text) == text


def test_an_override_can_no_longer_disguise_a_name() -> None:
    assert visible("cat /tmp/\u202etxt.exe") == "cat /tmp/<U+202E>txt.exe"


def test_a_literal_escape_in_the_text_cannot_pass_for_a_hidden_character() -> None:
    shown = visible("echo <U+202E> and \u202e")
    assert shown == "echo <U+003C>U+202E> and <U+202E>"  # the reader can tell which one was really there
