"""What a person is shown of a text that will act (an approval's command, its reason): every character as it is.

Why: a command is approved by reading it, so the text shown must be the text that runs. Some characters
display as something else or as nothing: bidirectional overrides and isolates reorder what follows
(`rm -rf /tmp/<U+202E>fdp.txt` reads as a harmless name), zero-width and other default-ignorable
characters vanish, control characters move the cursor or wipe a line in a terminal, and look-alike
spaces (no-break, en, ideographic ...) pass for a plain space while being another byte to the shell.
Each of them is written `<U+XXXX>` instead, so it can be seen and read. A literal `<U+XXXX>` already in
the text gets its `<` written `<U+003C>`, so an escape shown always means the character was there.

One function, used by every place that shows an approval (each channel's prompt, the gateway's web page
and terminal through the `shown_*` fields of the request). Newlines stay: a multi-line command shows as
lines. Platform markup (Slack's `<...>`, HTML) is the renderer's concern, after this.
"""

from __future__ import annotations

import re
import unicodedata

# Unicode's Default_Ignorable_Code_Point property (DerivedCoreProperties.txt), which `unicodedata` does not
# expose: characters a renderer shows as nothing, whatever their general category (Hangul fillers are
# letters, variation selectors and the combining grapheme joiner are marks).
_IGNORABLE = ((0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160), (0x17B4, 0x17B5),
              (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x206F), (0x3164, 0x3164),
              (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF), (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3),
              (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF))
_BLANK_SYMBOLS = {0x2800}  # BRAILLE PATTERN BLANK: a symbol that prints as a space
# Other, Format / Control / Surrogate / Private use / Unassigned; separators other than the plain space.
_HIDDEN_CATEGORIES = {"Cf", "Cc", "Cs", "Co", "Cn", "Zs", "Zl", "Zp"}
_LITERAL_ESCAPE = re.compile(r"<(?=U\+[0-9A-Fa-f]{4,6}>)")


def hidden(char: str) -> bool:
    """Whether `char` displays differently from what it is (nothing, a reordering, or a plain space)."""
    code = ord(char)
    if char in ("\n", " "):
        return False
    if unicodedata.category(char) in _HIDDEN_CATEGORIES or code in _BLANK_SYMBOLS:
        return True
    return any(low <= code <= high for low, high in _IGNORABLE)


def visible(text: str) -> str:
    """`text` with every hidden character written `<U+XXXX>` (see the module docstring); otherwise unchanged."""
    text = _LITERAL_ESCAPE.sub("<U+003C>", text)
    if all(not hidden(c) for c in text):
        return text
    return "".join(f"<U+{ord(c):04X}>" if hidden(c) else c for c in text)


__all__ = ["hidden", "visible"]
