"""A 30,000-character answer in an encrypted Matrix room arrives whole: the real daemon, a real Synapse,
an E2E matrix-nio client as the person. HTML-heavy Markdown (a table full of `&` and `<`) makes the
HTML copy several times the text, and encryption adds a third: sized by the text alone, the events
went over Synapse's 65,536 bytes (M_TOO_LARGE) and the answer was lost."""

from __future__ import annotations

import re

from tests.fakes.anthropic_api import FakeAnthropic, text
from tests.matrix_support import humans, log_tail, matrix_bot, mx_daemon  # noqa: F401

NOTICE = "m.notice"


def big_answer(chars: int = 30_000) -> tuple[str, list[str]]:
    """Markdown of about `chars` characters: a heading, a table of escaped-heavy rows; and its row markers."""
    rows, markers = [], []
    head = "# Report\n\n| row | check | value |\n|---|---|---|\n"
    size, i = len(head), 0
    while size < chars:
        marker = f"row{i:04d}"
        row = f"| {marker} | a&b <c> & d<e | {'&lt;' * 3} x < y & z |\n"
        rows.append(row)
        markers.append(marker)
        size += len(row)
        i += 1
    return head + "".join(rows), markers


def test_a_30000_character_html_heavy_answer_arrives_whole_in_an_encrypted_room(
        mx_daemon, matrix_bot, humans, fake_model: FakeAnthropic, tmp_path) -> None:
    alice = humans("alice", store=tmp_path / "alice-keys")
    daemon = mx_daemon(dm_policy="open")
    bot = matrix_bot.user.user_id
    room = alice.encrypted_dm(bot)
    alice.wait(lambda: bot in alice.members(room), "the bot to join the encrypted DM", describe=log_tail(daemon))
    markdown, markers = big_answer()
    assert len(markdown) >= 30_000
    fake_model.enqueue(text(markdown))
    alice.send(room, "the full report please")

    def arrived() -> list[str]:
        bodies = [e.body for e in alice.seen(room, bot) if e.content.get("msgtype") == NOTICE]
        found = [m for body in bodies for m in re.findall(r"row\d{4}", body)]
        return found if found == markers else []

    alice.wait(arrived, "every row of the answer, in order", timeout=180, describe=log_tail(daemon))
    notices = [e for e in alice.seen(room, bot) if e.content.get("msgtype") == NOTICE]
    assert all(e.encrypted for e in notices) and len(notices) >= 2
    assert not any("could not be delivered" in e.body for e in notices)
    html = "".join(str(e.content.get("formatted_body", "")) for e in notices)
    assert "a&amp;b &lt;c&gt;" in html  # the HTML copy went too, escaped
    assert "M_TOO_LARGE" not in daemon.log_text()
