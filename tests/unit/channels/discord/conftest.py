"""The Discord adapter against the fake Discord server, with a kit that records what it is handed.

The adapter is the unit here: its kit is a recorder (the real kit, and the real daemon, are
exercised by tests/conformance and tests/e2e/test_discord_e2e.py).
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from clawgate.channels.discord.adapter import DiscordAdapter
from clawgate.channels.discord.settings import DiscordSettings
from clawgate.agent.core.schema import STATE, migrate
from clawgate.channels.kit import ChannelStore, Incoming, Sender
from tests.fakes.discord_api import FakeDiscord

OWNER_LINE, REFUSED_LINE = "✅ Approved", "Only the owner can approve."


class RecordingKit:
    """What the adapter calls on the kit, kept; the owner is the fake's alice."""

    name = "discord"

    def __init__(self, owner_id: str, db: sqlite3.Connection | None = None) -> None:
        self.owner_id = owner_id
        if db is None:
            db = sqlite3.connect(":memory:", isolation_level=None)
            migrate(db, STATE)
        self.store = ChannelStore(db, "discord")  # the real store: the adapter keeps its cursors there
        self.log = logging.getLogger("clawgate.discord")
        self.incoming: list[Incoming] = []
        self.answers: list[tuple[str, Sender, bool]] = []
        self.where: str | None = None  # the chat of the last pressed prompt
        self.bot_name: str | None = None  # set by the adapter once connected

    async def receive(self, incoming: Incoming) -> None:
        self.incoming.append(incoming)

    async def approval_answer(self, approval_id: str, sender: Sender, approved: bool, *,
                              chat_id: str | None = None) -> str:
        self.answers.append((approval_id, sender, approved))
        self.where = chat_id
        return OWNER_LINE if sender.user_id == self.owner_id else REFUSED_LINE

    def command_names(self) -> list[tuple[str, str]]:
        return [("new", "Start a fresh conversation"), ("stop", "Cancel what the agent is doing"),
                ("status", "Is the agent working"), ("tasks", "List the long tasks of this chat")]


@pytest.fixture
def fake() -> Iterator[FakeDiscord]:
    # discord_py_pointed_here restores discord.py's class-wide URLs the adapter changes
    with FakeDiscord() as server, server.discord_py_pointed_here():
        yield server


def settings_for(fake: FakeDiscord, **extra: Any) -> DiscordSettings:
    # the fake sends every GUILD_CREATE right after READY: a 0.5 s wait for more is plenty (discord.py's default: 2 s)
    return DiscordSettings(token=fake.token, base_url=fake.base_url, connect_timeout_seconds=30,
                           **{"guild_ready_timeout_seconds": 0.5, **extra})


@pytest.fixture
async def connected(fake: FakeDiscord) -> AsyncIterator[tuple[DiscordAdapter, RecordingKit]]:
    kit = RecordingKit(fake.owner_user["id"])
    adapter = DiscordAdapter(settings_for(fake), kit)
    await adapter.connect()
    runner = asyncio.create_task(adapter.run())
    yield adapter, kit
    runner.cancel()
    await asyncio.gather(runner, return_exceptions=True)
    await adapter.disconnect()
