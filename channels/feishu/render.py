"""Markdown -> Feishu message content (the JSON string `content` of im/v1/messages).

Feishu's rich text (`post`) renders Markdown itself in an `md` element (bold, italic, links, lists,
quotes, inline code, code blocks), so an answer is split under the limit and sent as one `md` element
per chunk. `<at user_id="all">` in an `md` element would notify a whole group: a `<` opening `at` is
written as the entity `&lt;`, which Feishu shows as `<`. Approval prompts are interactive cards whose
buttons carry the prompt's id, the choice and a per-prompt secret.
"""

from __future__ import annotations

import json
import re
from typing import Any

from clawgate.channels.kit.markdown import split_markdown

AT_TAG = re.compile(r"<(?=\s*/?\s*at\b)", re.I)


def neutral(markdown: str) -> str:
    """The Markdown with every `<at …>` tag made text, so an answer can mention nobody."""
    return AT_TAG.sub("&lt;", markdown)


class PostChunk(str):
    """One chunk of an answer, rendered: `content` is the post's JSON, `source` the Markdown it came from."""

    content: str
    source: str


def post_content(markdown: str) -> str:
    return json.dumps({"zh_cn": {"title": "", "content": [[{"tag": "md", "text": neutral(markdown)}]]}},
                      ensure_ascii=False)


def render(markdown: str, max_chars: int) -> list[str]:
    chunks: list[str] = []
    for part in split_markdown(markdown, max_chars):
        if not part.strip():
            continue
        chunk = PostChunk(part)
        chunk.content = post_content(part)
        chunk.source = part
        chunks.append(chunk)
    return chunks


def approval_card(text: str, approval_id: str, secret: str) -> str:
    """An interactive card: the prompt as Markdown, and Approve / Deny buttons whose `value` Feishu hands
    back in `card.action.trigger` with the presser's open_id."""

    def button(label: str, approve: bool, kind: str) -> dict[str, Any]:
        return {"tag": "button", "text": {"tag": "plain_text", "content": label}, "type": kind,
                "value": {"clawgate_approval": approval_id, "approve": approve, "secret": secret}}

    card = {"config": {"wide_screen_mode": True, "update_multi": True},
            "elements": [{"tag": "markdown", "content": neutral(str(text))},
                         {"tag": "action", "actions": [button("Approve", True, "primary"),
                                                       button("Deny", False, "danger")]}]}
    return json.dumps(card, ensure_ascii=False)


def outcome_card(text: str) -> str:
    """A prompt's card once answered: the text, the buttons gone."""
    return json.dumps({"config": {"wide_screen_mode": True, "update_multi": True},
                       "elements": [{"tag": "markdown", "content": neutral(str(text))}]}, ensure_ascii=False)
