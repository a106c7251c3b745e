"""A 30,000-character answer in an encrypted Matrix room arrives whole: the real daemon, a real Synapse,
an E2E matrix-nio client as the person. HTML-heavy Markdown (a table full of `&` and `<`) makes the
HTML copy several times the text, and encryption adds a third: sized by the text alone, the events
went over Synapse's 65,536 bytes (M_TOO_LARGE) and the answer was lost."""

from __future__ import annotations

import re

from tests.fakes.anthropic_api import FakeAnthropic, text
from tests.matrix_support import humans, log_tail, matrix_bot, mx_daemon  # noqa: F401
from tests.servers.matrix_proxy import MatrixProxy

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


def test_a_part_the_homeserver_refuses_as_too_large_is_split_and_sent(
        mx_daemon, matrix_bot, humans, fake_model: FakeAnthropic) -> None:
    """The homeserver may measure more than the adapter did (a proxy answers the first send with
    M_TOO_LARGE, as Synapse does over 65,536 bytes): that part is halved and sent, nothing is lost."""
    port = int(matrix_bot.server.base_url.rsplit(":", 1)[1])
    proxy = MatrixProxy(port).start()
    try:
        alice = humans("alice")
        daemon = mx_daemon(dm_policy="open", homeserver=proxy.base_url)
        bot = matrix_bot.user.user_id
        room = alice.dm(bot)
        alice.wait(lambda: bot in alice.members(room), "the bot to join the DM", describe=log_tail(daemon))
        markdown, markers = big_answer(6_000)  # one part by the adapter's measure
        fake_model.enqueue(text(markdown))
        proxy.fail_next_send(413, {"errcode": "M_TOO_LARGE", "error": "event too large"})
        alice.send(room, "the short report please")

        def rows() -> list[str]:
            bodies = [e.body for e in alice.seen(room, bot) if e.content.get("msgtype") == NOTICE]
            return [m for body in bodies for m in re.findall(r"row\d{4}", body)]

        alice.wait(lambda: rows() == markers, "every row, after the refused part was split", timeout=120,
                   describe=log_tail(daemon))
        assert "refused as too large" in daemon.log_text()
        assert not any("could not be delivered" in e.body for e in alice.seen(room, bot))
    finally:
        proxy.stop()


def test_a_reply_resent_after_a_restart_waits_for_the_first_sync(mx_daemon, matrix_bot, humans,
                                                                 fake_model: FakeAnthropic) -> None:
    """Before its first /sync the client knows no rooms, and a send fails ("no such room"). A reply left
    undelivered at a crash is resent as the daemon starts: it waits for the sync instead of failing."""
    port = int(matrix_bot.server.base_url.rsplit(":", 1)[1])
    proxy = MatrixProxy(port).start()
    try:
        alice = humans("alice")
        # no quick retries inside the channel, and the dispatcher's next try far away: the reply waits for the restart
        daemon = mx_daemon(dm_policy="open", homeserver=proxy.base_url, send_retries=0,
                           env={"CLAWGATE_CHANNELS__DELIVERY_RETRY_SECONDS": "300"})
        bot = matrix_bot.user.user_id
        room = alice.dm(bot)
        alice.wait(lambda: bot in alice.members(room), "the bot to join the DM", describe=log_tail(daemon))
        proxy.fail_next_send(502, {"errcode": "M_UNKNOWN", "error": "bad gateway"})
        alice.send(room, "are you there?")
        alice.wait(lambda: "not delivered" in daemon.log_text(), "the first send to fail", describe=log_tail(daemon))
        daemon.kill()
        before = len(daemon.log_text())
        daemon.start()
        answers = alice.wait(lambda: [e for e in alice.seen(room, bot) if e.body == "echo: are you there?"],
                             "the reply resent after the restart", timeout=90, describe=log_tail(daemon))
        after = daemon.log_text()[before:]
        assert len(answers) == 1
        assert "not ready" not in after and "No such room" not in after and "not delivered" not in after, after[-3000:]
    finally:
        proxy.stop()
