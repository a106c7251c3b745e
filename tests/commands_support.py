"""Helpers of the chat-command tests: asking the running daemon about a session through the gateway's
own /status command (what a person would type), so a test waits for a state instead of a time."""

from __future__ import annotations

import asyncio

from tests.harness import DaemonProcess
from tests.waiting import wait_until


def status_of(daemon: DaemonProcess, session: str) -> str:
    """The /status answer for `session`, asked through the gateway chat (answered at once, never queued)."""
    async def ask() -> str:
        async with daemon.client() as client:
            answer = await client.request("chat.send", {"session": session, "text": "/status"})
            return str(answer["text"])
    return asyncio.run(ask())


def wait_queued(daemon: DaemonProcess, session: str, count: int = 1) -> None:
    """Until `count` messages of `session` wait behind its running one."""
    wait_until(lambda: f"{count} queued" in status_of(daemon, session), f"{count} message(s) queued in {session}")
