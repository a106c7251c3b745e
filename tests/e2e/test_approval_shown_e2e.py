"""The gateway's own clients show a command awaiting approval as the channels do: every character that
displays differently from what it is (an override, a terminal escape, a zero-width space) written <U+XXXX>."""

from __future__ import annotations

import asyncio
import shlex

from clawgate.agent.core.visible import visible
from tests.fakes.anthropic_api import FakeAnthropic, text, tool_use
from tests.mcp_support import wait_pending_approval

# reads as "touch invoice_exe.txt" with the override; the escape sequence would clear a terminal's line
NAME = "invoice_\u202etxt.exe\x1b[2K\u200b"


async def test_the_web_page_and_the_terminal_get_the_visible_command(daemon_factory, fake_model: FakeAnthropic) -> None:
    daemon = daemon_factory({})
    fake_model.enqueue(tool_use("exec", {"argv": ["touch", NAME]}), text("Left alone."))
    async with daemon.client(subscribe=["main"]) as client:
        run = asyncio.ensure_future(client.chat("make the invoice file"))
        pending = await wait_pending_approval(daemon)
        command = "exec " + shlex.join(["touch", NAME])
        assert pending["summary"] == command  # what runs, unchanged
        assert pending["shown_summary"] == visible(command) == \
            "exec touch 'invoice_<U+202E>txt.exe<U+001B>[2K<U+200B>'"  # what the web page's card shows
        listed = daemon.cli("approvals", "list")
        assert listed.returncode == 0 and "invoice_<U+202E>txt.exe<U+001B>[2K<U+200B>" in listed.stdout
        assert "\u202e" not in listed.stdout and "\x1b" not in listed.stdout
        async with daemon.client() as owner:
            await owner.request("approvals.resolve", {"id": pending["id"], "approve": False})
        assert (await run)["text"] == "Left alone."
    assert not (daemon.workspace / NAME).exists()
