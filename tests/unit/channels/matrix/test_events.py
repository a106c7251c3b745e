"""The Matrix platform rules on event contents: mentions, threads, reply fallbacks, edits, reactions."""

from __future__ import annotations

from clawgate.channels.matrix import events as ev
from clawgate.channels.matrix.render import notice_content, to_html

BOT = "@claw:example.org"


def test_mentions_by_m_mentions_pill_id_and_display_name() -> None:
    assert ev.mentions({"body": "hi", "m.mentions": {"user_ids": [BOT]}}, BOT, "Claw")
    pill = f'<a href="https://matrix.to/#/{BOT}">Claw</a> hi'
    assert ev.mentions({"body": "x", "formatted_body": pill}, BOT, None)
    assert ev.mentions({"body": f"{BOT} what time is it"}, BOT, None)
    assert ev.mentions({"body": "claw, what time is it"}, BOT, "Claw")
    assert not ev.mentions({"body": "clawing at the door"}, BOT, "Claw")
    assert not ev.mentions({"body": "hello all", "m.mentions": {"user_ids": ["@other:example.org"]}}, BOT, "Claw")


def test_strip_mention_leaves_the_question() -> None:
    assert ev.strip_mention(f"{BOT}: what time is it", BOT, "Claw") == "what time is it"
    assert ev.strip_mention("Claw, summarise this", BOT, "Claw") == "summarise this"
    assert ev.strip_mention("ask claw about it", BOT, "Claw") == "ask about it"


def test_thread_reply_and_edit_relations() -> None:
    thread = {"m.relates_to": {"rel_type": "m.thread", "event_id": "$root", "is_falling_back": True,
                               "m.in_reply_to": {"event_id": "$last"}}}
    assert ev.thread_root(thread) == "$root" and ev.reply_to(thread) is None
    reply = {"m.relates_to": {"m.in_reply_to": {"event_id": "$q"}}}
    assert ev.thread_root(reply) is None and ev.reply_to(reply) == "$q"
    assert ev.is_edit({"m.relates_to": {"rel_type": "m.replace", "event_id": "$x"}})
    assert not ev.is_edit(reply)


def test_reply_fallback_is_removed() -> None:
    body = "> <@a:example.org> the question\n> second line\n\nmy answer"
    assert ev.strip_reply_fallback(body) == "my answer"
    assert ev.strip_reply_fallback("plain > text") == "plain > text"


def test_reaction_keys() -> None:
    assert ev.reaction_answer("👍") is True and ev.reaction_answer("👍🏽") is True
    assert ev.reaction_answer("👎️") is False
    assert ev.reaction_answer("🎉") is None


def test_mxc_parts() -> None:
    assert ev.mxc_parts("mxc://example.org/AbC_d-1") == ("example.org", "AbC_d-1")
    assert ev.mxc_parts("https://example.org/x") is None
    assert ev.mxc_parts("mxc://example.org/../etc") is None
    assert ev.mxc_parts("mxc://example.org:8448/abc") == ("example.org:8448", "abc")
    assert ev.mxc_parts("mxc://evil?x=/abc") is None and ev.mxc_parts("mxc://a#b/abc") is None


def test_notice_html_escapes_raw_html() -> None:
    content = notice_content("**bold** <script>x</script>", "bold <script>x</script>")
    assert content["msgtype"] == "m.notice" and content["format"] == "org.matrix.custom.html"
    assert "<strong>bold</strong>" in content["formatted_body"]
    assert "<script>" not in content["formatted_body"] and "&lt;script&gt;" in content["formatted_body"]
    assert "<table>" in to_html("| a | b |\n|---|---|\n| 1 | 2 |")
