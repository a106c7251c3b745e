"""Markdown -> Slack mrkdwn, written from a CommonMark parser's events (pyromark, pulldown-cmark).

Why a parser and not text substitution: mrkdwn has no backslash escapes, so `\\(` or `\\*` that Markdown
uses to mean a literal character must be resolved, not passed on (users saw `\\(tools\\.exec\\.allowlist\\)`);
the parser hands over the text with its escapes resolved and its formatting as events; the walk is the
kit's for marker platforms (channels/kit/marks.py), and this module says what Slack writes its own way:
`<url|text>` links, `•` bullets, and its three control characters escaped.

Slack reads ``&``, ``<`` and ``>`` as markup (``<@U123>``, ``<!channel>``, ``<url|text>``) and asks apps to
send them as ``&amp;`` ``&lt;`` ``&gt;`` everywhere, code included: every text this writes is escaped so,
and only the links it writes itself are markup (no mass mention from a reply). A literal ``*`` or ``_``
in the text is left as it is: mrkdwn has no way to escape it, and it formats only in matched pairs at
word boundaries.
"""

from __future__ import annotations

import re

from clawgate.channels.kit.marks import MarkerStyle, to_markers

_LINKABLE = re.compile(r"^(https?|mailto):", re.IGNORECASE)
_SPECIAL = re.compile(r"<([!@#^][^>]*)>")


def escape(text: str) -> str:
    """Slack's three control characters as the entities Slack asks for."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _link(label: str, target: str) -> str:
    """`<url|label>` for a web or mail link (`<url>` when the label is the url); anything else as text, so
    a target like `!channel` never becomes Slack markup."""
    if _LINKABLE.match(target) and "|" not in target:
        same = label == escape(target) or not label.strip()
        return f"<{escape(target)}>" if same else f"<{escape(target)}|{label}>"
    if target:
        return f"{label} ({escape(target)})" if label else escape(target)
    return label


SLACK = MarkerStyle(escape=escape, bullet="• ", indent="    ", link=_link)


def to_mrkdwn(markdown: str) -> str:
    """One chunk of the model's Markdown as the text of a Slack message."""
    return to_markers(markdown, SLACK)


def no_pings(text: str) -> str:
    """Text about to be sent with Slack's special sequences (``<!channel>``, ``<!here>``, ``<@U…>``,
    ``<#C…>``) shown as text, not acted on: a last guard for text that did not come through to_mrkdwn."""
    return _SPECIAL.sub(r"&lt;\1&gt;", text)
