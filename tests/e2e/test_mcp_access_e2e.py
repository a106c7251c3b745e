"""Who may call MCP tools, end to end over Telegram: the owner (4242) and an admitted guest (555).

A guest's run must not reach an MCP server unless the owner's config allows guests, and even
then a side-effecting call waits for the owner's yes (the prompt goes to the owner, never to the guest)."""

from __future__ import annotations

import json

from tests.fakes.anthropic.request_text import tool_results
from tests.fakes.anthropic_api import FakeAnthropic, text, tool_use
from tests.fakes.telegram_api import FakeTelegram
from tests.mcp_support import stdio_server_env
from tests.telegram_support import replies, telegram, tg_daemon  # noqa: F401
from tests.untrusted_support import unwrap

OWNER, GUEST = 4242, 555


def _daemon(tg_daemon, tmp_path, **server):
    return tg_daemon(owner=[str(OWNER)], allow_from=[str(GUEST)], dm_policy="allowlist",
                     env=stdio_server_env(tmp_path, **server))


def _buttons(fake: FakeTelegram) -> list[dict]:
    return [m for m in fake.sent if m.get("reply_markup")]


def test_a_guest_cannot_call_mcp_tools_unless_the_config_allows_it(tg_daemon, telegram: FakeTelegram,
                                                                   fake_model: FakeAnthropic, tmp_path) -> None:
    daemon = _daemon(tg_daemon, tmp_path, read_only_tools=["add"])
    fake_model.enqueue(tool_use("mcp_fake_write_note", {"text": "guest was here"}),
                       tool_use("mcp_fake_add", {"a": 1, "b": 2}), text("refused"))
    telegram.inject_message(GUEST, "write a note", user_id=GUEST)
    telegram.wait_for(lambda: "refused" in replies(telegram, GUEST), timeout=60)
    note, add = tool_results(fake_model.requests)[-2:]
    for result in (note, add):  # read-only or not: the server is the owner's
        assert "for the owner only" in result and "mcp.servers.fake.guests" in result
    assert not _buttons(telegram), "nobody is asked about a call guests may not make"
    assert not (tmp_path / "notes.txt").exists()
    audit = [json.loads(line) for line in (daemon.home / "state/audit.jsonl").read_text().splitlines()]
    assert [(a["tool"], a["status"]) for a in audit] == [("mcp_fake_write_note", "error"), ("mcp_fake_add", "error")]


def test_an_allowed_guests_side_effecting_call_waits_for_the_owner(tg_daemon, telegram: FakeTelegram,
                                                                   fake_model: FakeAnthropic, tmp_path) -> None:
    _daemon(tg_daemon, tmp_path, guests=True)
    fake_model.enqueue(tool_use("mcp_fake_write_note", {"text": "from the guest"}), text("written"))
    telegram.inject_message(GUEST, "write a note", user_id=GUEST)
    telegram.wait_for(lambda: len(_buttons(telegram)) == 1, timeout=60)
    [prompt] = _buttons(telegram)
    assert prompt["chat_id"] == OWNER and "write_note" in prompt["plain_text"]
    data = prompt["reply_markup"]["inline_keyboard"][0][0]["callback_data"]
    telegram.inject_callback(GUEST, GUEST, data, prompt["message_id"])  # the guest cannot approve it
    telegram.wait_for(lambda: len(telegram.callback_answers) == 1)
    assert not (tmp_path / "notes.txt").exists()
    telegram.inject_callback(OWNER, OWNER, data, prompt["message_id"])
    telegram.wait_for(lambda: "written" in replies(telegram, GUEST), timeout=60)
    assert (tmp_path / "notes.txt").read_text() == "from the guest\n"
    assert unwrap(tool_results(fake_model.requests)[-1]) == "noted: from the guest"
