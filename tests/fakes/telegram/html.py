"""Telegram HTML validation and the plain length Telegram checks against its limit.

Why separate: a faithful port of tdlib's ``parse_html`` (error wording included) is the
largest single piece of the fake and needs nothing else from it.
"""

from __future__ import annotations

_HTML_TAGS = frozenset(
    {
        "a",
        "b",
        "strong",
        "i",
        "em",
        "u",
        "ins",
        "s",
        "strike",
        "del",
        "code",
        "pre",
        "span",
        "tg-spoiler",
        "blockquote",
        "tg-emoji",
    }
)

_NAMED_ENTITIES = {"lt": "<", "gt": ">", "amp": "&", "quot": '"'}


class HtmlParseError(ValueError):
    """Raised for HTML that Telegram would refuse with "can't parse entities"."""


def _byte_offset(text: str, index: int) -> int:
    """Telegram reports parse errors as UTF-8 byte offsets, so convert a str index."""
    return len(text[:index].encode("utf-8"))


def _decode_entity(text: str, pos: int) -> tuple[str | None, int]:
    """Decode an HTML entity at ``text[pos] == '&'`` like tdlib does.

    Returns (character, next position) or (None, pos) if this is not an entity.
    """
    n = len(text)
    end = pos + 1
    if end < n and text[end] == "#":
        end += 1
        value = 0
        digits = 0
        if end < n and text[end] in "xX":
            end += 1
            while end < n and text[end] in "0123456789abcdefABCDEF":
                value = value * 16 + int(text[end], 16)
                end += 1
                digits += 1
        else:
            while end < n and text[end].isdigit() and text[end].isascii():
                value = value * 10 + int(text[end])
                end += 1
                digits += 1
        if digits == 0 or value == 0 or value > 0x10FFFF or 0xD800 <= value <= 0xDFFF:
            return None, pos
        char = chr(value)
    else:
        while end < n and text[end].isascii() and text[end].isalpha():
            end += 1
        name = text[pos + 1 : end]
        if name not in _NAMED_ENTITIES:
            return None, pos
        char = _NAMED_ENTITIES[name]
    if end < n and text[end] == ";":
        end += 1
    return char, end


def _parse_html(text: str, *, strict_ampersand: bool = True) -> str:
    """Validate Telegram-flavoured HTML and return the plain text it renders to.

    Mirrors tdlib's ``parse_html`` (error wording included) so the daemon sees the same
    failures it would get from Telegram. Raises HtmlParseError with the text that follows
    "Bad Request: can't parse entities: ".
    """
    out: list[str] = []
    stack: list[str] = []
    n = len(text)
    i = 0
    while i < n:
        c = text[i]
        if c == "&":
            char, nxt = _decode_entity(text, i)
            if char is None:
                if strict_ampersand:
                    raise HtmlParseError(
                        f'Unescaped "&" at byte offset {_byte_offset(text, i)}; '
                        'it must be written as "&amp;"'
                    )
                out.append("&")
                i += 1
            else:
                out.append(char)
                i = nxt
            continue
        if c != "<":
            out.append(c)
            i += 1
            continue

        begin = i
        begin_byte = _byte_offset(text, begin)
        i += 1
        if i >= n or text[i] != "/":
            # start tag
            while i < n and not text[i].isspace() and text[i] != ">":
                i += 1
            if i >= n:
                raise HtmlParseError(f"Unclosed start tag at byte offset {begin_byte}")
            tag = text[begin + 1 : i].lower()
            if tag not in _HTML_TAGS:
                raise HtmlParseError(
                    f'Unsupported start tag "{tag}" at byte offset {begin_byte}'
                )
            attrs: dict[str, str] = {}
            while i < n and text[i] != ">":
                while i < n and text[i].isspace():
                    i += 1
                if i >= n:
                    break
                if text[i] == ">":
                    break
                name_begin = i
                while i < n and not text[i].isspace() and text[i] not in "=>":
                    i += 1
                attr_name = text[name_begin:i].lower()
                if not attr_name:
                    raise HtmlParseError(
                        f'Empty attribute name in the tag "{tag}" at byte offset {begin_byte}'
                    )
                while i < n and text[i].isspace():
                    i += 1
                if i >= n or text[i] != "=":
                    if tag == "blockquote" and attr_name == "expandable":
                        attrs[attr_name] = ""
                        continue
                    raise HtmlParseError(
                        "Expected equal sign in declaration of an attribute of the tag "
                        f'"{tag}" at byte offset {begin_byte}'
                    )
                i += 1
                while i < n and text[i].isspace():
                    i += 1
                if i >= n:
                    raise HtmlParseError(f"Unclosed start tag at byte offset {begin_byte}")
                if text[i] not in "'\"":
                    token_begin = i
                    while i < n and (text[i].isalnum() or text[i] in ".-"):
                        i += 1
                    value = text[token_begin:i].lower()
                    if i < n and not text[i].isspace() and text[i] != ">":
                        raise HtmlParseError(
                            "Unexpected end of name token at byte offset "
                            f"{_byte_offset(text, token_begin)}"
                        )
                else:
                    quote = text[i]
                    i += 1
                    chars: list[str] = []
                    while i < n and text[i] != quote:
                        if text[i] == "&":
                            char, nxt = _decode_entity(text, i)
                            if char is None:
                                chars.append("&")
                                i += 1
                            else:
                                chars.append(char)
                                i = nxt
                        else:
                            chars.append(text[i])
                            i += 1
                    if i < n:
                        i += 1
                    value = "".join(chars)
                if i >= n:
                    raise HtmlParseError(f"Unclosed start tag at byte offset {begin_byte}")
                attrs[attr_name] = value
            if i >= n:
                raise HtmlParseError(f"Unclosed start tag at byte offset {begin_byte}")
            i += 1  # skip '>'
            if tag == "span" and attrs.get("class") != "tg-spoiler":
                raise HtmlParseError(
                    f'Tag "span" must have class "tg-spoiler" at byte offset {begin_byte}'
                )
            if tag == "tg-emoji" and not attrs.get("emoji-id", "").isdigit():
                raise HtmlParseError("Custom emoji entity must contain a valid custom emoji identifier")
            stack.append(tag)
        else:
            # end tag
            if not stack:
                raise HtmlParseError(f"Unexpected end tag at byte offset {begin_byte}")
            i += 1
            name_begin = i
            while i < n and not text[i].isspace() and text[i] != ">":
                i += 1
            end_name = text[name_begin:i].lower()
            while i < n and text[i].isspace():
                i += 1
            if i >= n or text[i] != ">":
                raise HtmlParseError(f"Unclosed end tag at byte offset {begin_byte}")
            i += 1
            expected = stack.pop()
            if end_name and end_name != expected:
                raise HtmlParseError(
                    f'Unmatched end tag at byte offset {begin_byte}, expected "</{expected}>", '
                    f'found "</{end_name}>"'
                )
    if stack:
        raise HtmlParseError(
            f'Can\'t find end tag corresponding to start tag "{stack[-1]}"'
        )
    return "".join(out)


def html_to_plain_length(html: str) -> int:
    """Length Telegram checks against the 4096 limit: tags removed, entities decoded, trimmed.

    Raises HtmlParseError (a ValueError) for HTML Telegram would refuse.
    """
    return len(_parse_html(html).strip())
