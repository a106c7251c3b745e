"""Markdown -> Slack mrkdwn, by md2mrkdwn, with Slack's three control characters escaped first.

Slack reads ``&``, ``<`` and ``>`` as markup (``<@U123>``, ``<!channel>``, ``<url|text>``) and asks
apps to send them as ``&amp;`` ``&lt;`` ``&gt;`` everywhere, code included. Escaping them before the
conversion keeps a model's ``a < b`` or ``<!channel>`` as text (no mass mention from a reply),
while the links md2mrkdwn writes afterwards (``<url|text>``) stay links. A ``>`` that opens a
Markdown blockquote (outside code) is left for the converter.
"""

from __future__ import annotations

import re

import md2mrkdwn

_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
_QUOTE = re.compile(r"^(\s{0,3}(?:>\s?)+)(.*)$")
_CONFIG = md2mrkdwn.MrkdwnConfig()
_CONVERTER = md2mrkdwn.MrkdwnConverter(_CONFIG)


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def escape_markdown(markdown: str) -> str:
    """Escape & < > line by line; blockquote markers outside fenced code are kept."""
    out: list[str] = []
    fence: str | None = None
    for line in markdown.split("\n"):
        opened = _FENCE.match(line)
        if fence is not None:
            if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence):
                fence = None
            out.append(_escape(line))
            continue
        if opened:
            fence = opened.group(1)
            out.append(_escape(line))
            continue
        quoted = _QUOTE.match(line)
        if quoted:
            out.append(quoted.group(1) + _escape(quoted.group(2)))
        else:
            out.append(_escape(line))
    return "\n".join(out)


_SPECIAL = re.compile(r"<([!@#^][^>]*)>")


def no_pings(text: str) -> str:
    """Text about to be sent with Slack's special sequences (``<!channel>``, ``<!here>``, ``<@U…>``,
    ``<#C…>``) shown as text, not acted on. to_mrkdwn never writes them (it escapes every ``<``), but
    the kit's status line is sent as it is, and it quotes a tool's arguments, which the model chose."""
    return _SPECIAL.sub(r"&lt;\1&gt;", text)


def to_mrkdwn(markdown: str) -> str:
    """One chunk of the model's Markdown as the text of a Slack message."""
    return _CONVERTER.convert(escape_markdown(markdown))
