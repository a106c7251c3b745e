"""An in-memory platform adapter and a kit around it, for the kit's unit tests (no network, no daemon)."""

from __future__ import annotations

import asyncio
import sqlite3
from typing import Any, Callable

from clawgate.agent.bus import InboundMessage
from clawgate.agent.core.events import EventHub
from clawgate.channels.kit import AccessSettings, Capabilities, ChannelKit, ChannelServices, PlatformAdapter, Target
from clawgate.channels.kit.pairing import PairingStore
from clawgate.agent.core.schema import STATE, migrate
from clawgate.channels.kit.store import ChannelStore
from clawgate.config.agents import Agent, Place


class Inbox:
    def __init__(self) -> None:
        self.messages: list[InboundMessage] = []

    def publish_inbound(self, msg: InboundMessage) -> bool:
        if any(m.id == msg.id for m in self.messages):
            return False
        self.messages.append(msg)
        return True

    async def publish_inbound_async(self, msg: InboundMessage) -> bool:
        return self.publish_inbound(msg)

    async def durable(self) -> None:
        return None


class MemoryAdapter(PlatformAdapter):
    """Scripted: `connect_script` / `run_script` are what connect() and run() do, call by call."""

    name = "memory"
    settings_model = AccessSettings
    capabilities = Capabilities(max_chars=20)

    def __init__(self, settings: Any, kit: ChannelKit) -> None:
        super().__init__(settings, kit)
        self.connects = 0
        self.runs = 0
        self.connect_script: list[BaseException | None] = []
        self.run_script: list[BaseException | None] = []
        self.sent: list[tuple[Target, str]] = []
        self.send_script: list[BaseException | None] = []

    async def connect(self) -> None:
        self.connects += 1
        step = self.connect_script.pop(0) if self.connect_script else None
        if step is not None:
            raise step

    async def run(self) -> None:
        self.runs += 1
        step = self.run_script.pop(0) if self.run_script else None
        if step is not None:
            raise step
        await asyncio.Event().wait()

    async def disconnect(self) -> None:
        return None

    def render(self, markdown: str) -> list[str]:
        return self.kit.markdown.split_markdown(markdown, self.capabilities.max_chars)

    async def send_text(self, target: Target, text: str) -> str:
        step = self.send_script.pop(0) if self.send_script else None
        if step is not None:
            raise step
        self.sent.append((target, text))
        return str(len(self.sent))


class Sleeps:
    """An injected sleep that records what was asked and returns at once (yielding to the loop)."""

    def __init__(self) -> None:
        self.asked: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.asked.append(seconds)
        await asyncio.sleep(0)


def make_kit(name: str = "memory", settings: AccessSettings | None = None,
             adapter: Callable[[Any, ChannelKit], PlatformAdapter] = MemoryAdapter,
             route: Callable[[Place], Agent] | None = None) -> tuple[ChannelKit, Any, Inbox]:
    db = sqlite3.connect(":memory:", isolation_level=None)
    migrate(db, STATE)
    inbox = Inbox()
    services = ChannelServices(intake=inbox, commands=lambda name, key, args, user, **how: f"/{name} answered",
                               command_list=[("new", "start over")], check_session_key=lambda key: key,
                               resolve_approval=lambda approval_id, yes: True, events=EventHub(),
                               busy=lambda key: False, route=route)
    settings = settings or AccessSettings(dm_policy="open")
    kit = ChannelKit(name, settings, services, ChannelStore(db, name), PairingStore(db))
    made = adapter(settings, kit)
    kit.attach(made)
    return kit, made, inbox


async def settle(predicate: Callable[[], bool], what: str) -> None:
    from tests.waiting import wait_until_async

    await wait_until_async(predicate, what)


