"""The model's Markdown as Slack mrkdwn: escapes resolved (mrkdwn has none), & < > always as entities."""

from __future__ import annotations

from clawgate.channels.slack.mrkdwn import to_mrkdwn


def test_markdown_escapes_are_resolved_not_shown() -> None:
    assert to_mrkdwn(r"not on the exec allowlist \(tools\.exec\.allowlist\)") == \
        "not on the exec allowlist (tools.exec.allowlist)"


def test_slacks_control_characters_are_entities_everywhere() -> None:
    out = to_mrkdwn("a < b & c > d <!channel> <@U123> `x<y&z` <b>hi</b>\n\n```\n<!here> & >\n```")
    assert "<" not in out.replace("&lt;", "") and ">" not in out.replace("&gt;", "")
    assert "&lt;!channel&gt; &lt;@U123&gt;" in out and "`x&lt;y&amp;z`" in out and "&lt;!here&gt; &amp; &gt;" in out


def test_formatting_becomes_mrkdwn() -> None:
    out = to_mrkdwn("# Title\n\n**bold**, *italic*, ~~gone~~ and [the docs](https://example.org/a?b=1&c=2)\n\n"
                    "- one\n- two\n\n> quoted\n\n| a | b |\n|---|---|\n| 1 | 2 |")
    assert out.split("\n\n") == ["*Title*", "*bold*, _italic_, ~gone~ and <https://example.org/a?b=1&amp;c=2|the docs>",
                                 "• one\n• two", "> quoted", "```\na | b\n1 | 2\n```"]


def test_a_code_block_cannot_be_closed_by_the_text_inside_it() -> None:
    out = to_mrkdwn("````\nbefore ``` *after*\n````")
    assert out == "```\nbefore ``&lt;U+0060&gt; *after*\n```"  # the escape is text, never Slack markup
