"""Wiring: build the bus, the agent, the channels and the gateway, run them, shut down cleanly.

Start-up order matters for crash safety: the store and the bus come first, pending inbound
and outbound messages are replayed before any channel takes new input, and the ready line
is printed only when every part is serving.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from pathlib import Path
from typing import Any

from agent.approvals import ApprovalBroker
from agent.audit import AuditLog
from agent.context import ContextBuilder
from agent.context_setup import install_context
from agent.events import EventHub
from agent.loop import AgentLoop
from agent.recovery import TaskTracker, resume_tasks
from agent.redact import register_secrets
from agent.providers import Provider, UnconfiguredProvider
from agent.providers.anthropic import AnthropicProvider
from agent.session import SessionManager
from agent.tasks import TaskStore
from agent.toolset import default_tools
from agent.trace import TraceWriter
from agent.triggers import Triggers
from agent.tools import ToolRegistry
from channels.base import Channel
from channels.gateway_chat import GatewayChatChannel
from channels.telegram import build as build_telegram
from config.paths import Paths
from config.schema import Settings
from config.token import gateway_token
from workspace.guard import WorkspaceGuard

from . import __version__
from .api import build_methods, uptime_since
from .api_tasks import register as register_task_methods
from .api_cron import register as register_cron_methods
from .bus import MessageBus
from .dispatcher import Dispatcher
from .server import GatewayServer
from .store import Store

log = logging.getLogger("clawgate")


def make_provider(settings: Settings) -> Provider:
    """Anthropic (when a key is set), then an OpenAI-compatible endpoint (when configured), in order."""
    from agent.providers.chain import ProviderChain
    from agent.providers.openai_compat import OpenAICompatProvider

    anthropic, compat = settings.providers.anthropic, settings.providers.openai_compat
    providers: list[Provider] = []
    if anthropic.api_key:
        providers.append(AnthropicProvider(anthropic, stream=settings.agent.stream))
    if compat is not None:
        register_secrets([compat.api_key])
        providers.append(OpenAICompatProvider(compat))
    if not providers:
        return UnconfiguredProvider()
    return providers[0] if len(providers) == 1 else ProviderChain(providers)


class Daemon:
    def __init__(self, paths: Paths, settings: Settings, *, provider: Provider | None = None) -> None:
        self.paths = paths
        self.settings = settings
        self.started_at = time.time()
        paths.ensure()
        if not settings.gateway.token:  # the gateway is never open: generate (once) and persist a token
            settings.gateway.token = gateway_token(paths, settings, create=True)
            register_secrets([settings.gateway.token])
        workspace_root = Path(settings.agent.workspace).expanduser() if settings.agent.workspace else paths.default_workspace
        self.workspace = WorkspaceGuard(workspace_root)
        self.store = Store(paths.database, fsync=settings.state.fsync)
        self.bus = MessageBus(self.store)
        self.events = EventHub()
        self.trace = TraceWriter(paths.traces)
        self.events.subscribe(self.trace)
        self.audit = AuditLog(paths.audit_log)
        self.approvals = ApprovalBroker(self.events, mode=settings.tools.approval_mode,
                                        timeout=settings.tools.approval_timeout_seconds)
        self.sessions = SessionManager(paths.sessions, fsync=settings.state.fsync)
        self.tasks = TaskStore(paths.tasks, fsync=settings.state.fsync)
        self.provider = provider or make_provider(settings)
        self.tools = ToolRegistry(default_tools(settings, self), events=self.events, audit=self.audit,
                                  approvals=self.approvals)
        self.context = ContextBuilder(self.workspace.root, tools=self.tools.definitions, model=settings.agent.model,
                                      max_tokens=settings.agent.max_tokens)
        self.agent = AgentLoop(bus=self.bus, sessions=self.sessions, provider=self.provider, tools=self.tools,
                               context=self.context, events=self.events, settings=settings.agent,
                               workspace=self.workspace)
        self.tracker = TaskTracker(self.tasks, remind_after=settings.agent.task_reminder_turns, events=self.events)
        self.events.subscribe(self.tracker.on_event)
        self.tools.result_hooks.append(self.tracker.remind)
        self.context.contributors.append(self._task_status_line)
        install_context(self)  # compaction, restatement, heartbeat task states, consolidation
        self.methods = build_methods(self)
        register_task_methods(self.methods, self)
        self.triggers = Triggers(self)  # cron jobs + heartbeat: producers on the bus
        register_cron_methods(self.methods, self)
        self.server = GatewayServer(settings.gateway, self.methods)
        self.events.subscribe(self.server.on_event)
        self.channels: dict[str, Channel] = {"gateway": GatewayChatChannel(self.server)}
        if (telegram_channel := build_telegram(self)) is not None:
            self.channels["telegram"] = telegram_channel
        self.dispatcher = Dispatcher(self.bus, self.channels)
        self._tasks: list[asyncio.Task[Any]] = []
        self._stopped = asyncio.Event()
        self.failed = False

    def _task_status_line(self, session: Any) -> str | None:
        task = self.tasks.current(session.key)
        return f"task: {task.status_line()}" if task else None

    def _on_core_task_end(self, task: "asyncio.Task[Any]") -> None:
        """The intake and delivery loops never end on their own; if one dies, a daemon that
        looks alive but serves nothing is worse than an exit a supervisor can restart."""
        if task.cancelled():
            return
        log.critical("core task %s stopped unexpectedly (%r); shutting down so it can be restarted",
                     task.get_name(), task.exception())
        self.failed = True
        self._stopped.set()

    def reset_session(self, key: str) -> str | None:
        archived = self.sessions.reset(key)
        self.context.invalidate(key)
        return archived

    def status(self) -> dict[str, Any]:
        return {
            "version": __version__,
            "uptime": uptime_since(self.started_at),
            "pid": os.getpid(),
            "home": str(self.paths.home),
            "workspace": str(self.workspace.root),
            "provider": self.provider.name,
            "model": self.settings.agent.model,
            "channels": sorted(self.channels),
            "activeSessions": self.agent.lanes.active_keys(),
            "queues": self.store.counts(),
            "clients": sum(1 for c in self.server.connections if not c.closed),
        }

    async def start(self) -> None:
        await self.server.start()
        pruned = self.store.prune(self.settings.state.keep_days)
        if pruned:
            log.info("forgot %d answered/delivered queue row(s) older than %g days", pruned, self.settings.state.keep_days)
        inbound, outbound = self.bus.replay_pending()
        if inbound or outbound:
            log.info("recovered %d unanswered message(s) and %d undelivered repl(ies) from before the restart", inbound, outbound)
        resumed = resume_tasks(self.tasks, self.sessions, self.bus, max_resumes=self.settings.agent.max_task_resumes)
        if resumed:
            log.info("resuming %d interrupted task(s): %s", len(resumed), ", ".join(resumed))
        self._tasks = [
            asyncio.create_task(self.agent.run(), name="agent"),
            asyncio.create_task(self.dispatcher.run(), name="dispatcher"),
        ]
        for task in self._tasks:
            task.add_done_callback(self._on_core_task_end)
        for name, channel in self.channels.items():
            try:
                await channel.start()
            except Exception as exc:
                log.error("channel %s did not start: %s", name, exc)
        self.triggers.start()  # last: overdue cron runs fire into a fully started daemon

    async def stop(self) -> None:
        """Stop taking input, let running turns finish briefly, then flush and close everything."""
        self.triggers.stop()
        for channel in list(self.channels.values()):
            try:
                await channel.stop()
            except Exception:
                log.exception("channel %s failed to stop", channel.name)
        try:
            await asyncio.wait_for(self.agent.lanes.join(), timeout=5)
        except asyncio.TimeoutError:
            log.info("shutdown: interrupting running turns; they resume from their logs on next start")
            await self.agent.lanes.close()
        try:
            await asyncio.wait_for(self.dispatcher.lanes.join(), timeout=3)
        except asyncio.TimeoutError:
            await self.dispatcher.lanes.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.server.stop()
        await self.provider.close()
        self.sessions.close()
        self.trace.close()
        self.audit.close()
        self.store.close()

    async def serve_forever(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._stopped.set)
        await self.start()
        self.paths.pid_file.write_text(str(os.getpid()))
        host = self.settings.gateway.host
        print(f"clawgate gateway ready on ws://{host}:{self.server.port} (provider: {self.provider.name})", flush=True)
        warm = getattr(self.provider, "warm", None)
        if warm is not None:
            asyncio.get_running_loop().run_in_executor(None, warm)
        if isinstance(self.provider, UnconfiguredProvider):
            log.warning("no model provider configured: set ANTHROPIC_API_KEY and restart; chats will be told how")
        await self._stopped.wait()
        log.info("shutting down")
        await self.stop()
        self.paths.pid_file.unlink(missing_ok=True)
