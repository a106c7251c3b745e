"""No answer is lost on any channel: a 30,000-character answer of HTML-heavy Markdown (a table full of
`&` and `<`, whose escaped and marked-up form is several times the text) arrives whole and in order."""

from __future__ import annotations

import re

from tests.conformance.harness import PlatformHarness
from tests.conformance.test_conformance import settle_window
from tests.fakes.anthropic_api import FakeAnthropic, text
from tests.waiting import wait_past, wait_until


def html_heavy_answer(chars: int = 30_000) -> tuple[str, list[str]]:
    head = "# Report\n\n| row | check | value |\n|---|---|---|\n"
    rows, markers, size = [], [], len(head)
    while size < chars:
        marker = f"row{len(markers):04d}"
        row = f"| {marker} | a&b <c> & d<e | x < y & z |\n"
        rows.append(row)
        markers.append(marker)
        size += len(row)
    return head + "".join(rows), markers


def test_a_30000_character_html_heavy_answer_arrives_whole(platform: PlatformHarness, channel_daemon,
                                                           fake_model: FakeAnthropic) -> None:
    markdown, markers = html_heavy_answer()
    fake_model.enqueue(text(markdown))
    channel_daemon()
    chat = platform.dm_chat(platform.owner)
    platform.send_dm(platform.owner, "the whole report please")

    def rows() -> list[str]:
        return re.findall(r"row\d{4}", "\n".join(platform.replies(chat)))

    wait_until(lambda: markers[-1] in rows(), "the last row", timeout=180)
    wait_past(settle_window())
    assert rows() == markers  # every row once, in order
    assert not any("could not be delivered" in r for r in platform.replies(chat))
    # (how `<c>` and `&` look on each platform is the formatting cases' concern, not this one's)
