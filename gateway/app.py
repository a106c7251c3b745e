"""The composition root: the one place that names concrete classes and wires them together.

Everything else receives what it needs through its constructor — channels get their settings
and the narrow Services, triggers their parts, gateway methods the Services — so no part holds
"the daemon". Start-up order matters for crash safety: state first, pending inbound and
outbound messages replayed before any channel takes new input, the ready line only when every
part serves. Shutdown is the exact reverse (an AsyncExitStack): triggers, then channels stop
taking input, running turns get a moment to finish, replies drain, then clients and files close.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, Callable

from clawgate.agent.approvals import ApprovalBroker
from clawgate.agent.core.audit import AuditLog
from clawgate.agent.jobs.background import BackgroundJobs
from clawgate.agent.bus import SqliteBus
from clawgate.agent.core.durability import Durability
from clawgate.agent.checkpoints import CheckpointService, ReplayProvider, ToolReplay
from clawgate.agent.commands import CommandRouter
from clawgate.agent.context.compaction import Compactor
from clawgate.agent.supervision.completeness import CompletenessCheck
from clawgate.agent.context.consolidation import Consolidator
from clawgate.agent.context.builder import ContextBuilder
from clawgate.agent.control import SessionControl, TaskControl
from clawgate.agent.supervision.drift_control import CheckpointRestorer, DriftControl
from clawgate.agent.supervision.drift_restore import DriftRestore
from clawgate.agent.core.events import EventHub
from clawgate.agent.loop import AgentLoop, run_user, session_user
from clawgate.agent.mcp import McpManager
from clawgate.agent.memory.store import Memory
from clawgate.agent.providers import Provider, UnconfiguredProvider
from clawgate.agent.providers.breaker import OnChange
from clawgate.agent.recovery.restart import TaskTracker, resume_tasks
from clawgate.agent.core.redact import register_secrets
from clawgate.agent.context.restatement import Restatement
from clawgate.agent.services import Services
from clawgate.agent.session import SessionManager
from clawgate.agent.core.statedb import open_state_db
from clawgate.agent.jobs.subagents import Subagents
from clawgate.agent.status import Status
from clawgate.agent.tasks.store import TaskStore
from clawgate.agent.tools import ToolRegistry
from clawgate.agent.triggers.cron_tool import CronTool
from clawgate.agent.tools.mounts import mount_status
from clawgate.agent.tools.sandbox import SandboxPolicy, sandbox_status
from clawgate.agent.jobs.spawn_tool import Spawn
from clawgate.agent.toolset import default_tools
from clawgate.agent.core.trace import TraceWriter
from clawgate.agent.triggers import CronService, CronStore, Triggers
from clawgate.agent.triggers.heartbeat import Heartbeat
from clawgate.agent.usage.ledger import MeteredProvider, UsageLedger
from clawgate.agent.usage.store import UsageStore
from clawgate.channels.base import Channel
from clawgate.channels.gateway_chat import GatewayChatChannel
from clawgate.channels.telegram import build as build_telegram
from clawgate.config.paths import Paths
from clawgate.config.schema import Settings
from clawgate.config.token import gateway_token
from clawgate.workspace.guard import WorkspaceGuard
from clawgate.workspace.users import Workspaces

from . import __version__
from . import fleet
from .api import build_methods
from .dispatcher import Dispatcher
from .instance import remove_pid_file
from .limits import open_files_per_cache, raise_open_file_limit
from .runtime import event_loop_name, settle_heap
from .server import GatewayServer

log = logging.getLogger("clawgate")
TURN_GRACE_SECONDS = 5.0
DELIVERY_GRACE_SECONDS = 3.0


def make_provider(settings: Settings, *, on_breaker: OnChange | None = None) -> Provider:
    """Anthropic (when a key is set), then an OpenAI-compatible endpoint (when configured), in order,
    each behind its circuit breaker (`on_breaker` hears it open and close)."""
    from clawgate.agent.providers.anthropic import AnthropicProvider
    from clawgate.agent.providers.chain import ProviderChain

    anthropic, compat = settings.providers.anthropic, settings.providers.openai_compat
    providers: list[Provider] = []
    if anthropic.api_key:
        providers.append(AnthropicProvider(anthropic, stream=settings.agent.stream))
    if compat is not None:
        from clawgate.agent.providers.openai_compat import OpenAICompatProvider  # and httpx: only when configured

        register_secrets([compat.api_key])
        providers.append(OpenAICompatProvider(compat, stream=settings.agent.stream))
    if not providers:
        return UnconfiguredProvider()
    breaker = settings.providers.breaker
    return ProviderChain(providers, threshold=breaker.failure_threshold if breaker.enabled else None,
                         cooldown=breaker.cooldown_seconds, on_breaker=on_breaker)


class App:
    """Builds every part in __init__ (no I/O beyond opening state), runs them in `run`."""

    def __init__(self, paths: Paths, settings: Settings, *, provider: Provider | None = None,
                 restorer: CheckpointRestorer | None = None) -> None:
        self.paths, self.settings = paths, settings
        agent = settings.agent
        paths.ensure()
        if not settings.gateway.token:  # the gateway is never open: generate (once) and persist a token
            settings.gateway.token = gateway_token(paths, settings, create=True)
            register_secrets([settings.gateway.token])
        workspace = WorkspaceGuard(Path(agent.workspace).expanduser() if agent.workspace else paths.default_workspace)
        # each guest works in a workspace of their own; exec's HOME/TMPDIR are per person (workspace/users.py)
        workspaces = Workspaces(workspace, paths.guest_workspaces, paths.exec_scratch)
        fsync = settings.state.fsync

        # state and the bus. Durable writes are flushed in batches off the event loop (group commit,
        # agent/core/durability.py): the database commits without its own fsync, the barrier fsyncs the WAL.
        self.durability = Durability(enabled=fsync)
        self.db = open_state_db(paths.database, fsync=False)
        # [fleet] redis_url: the bus is Redis Streams shared by the fleet's processes (gateway/fleet.py)
        self.fleet = fleet.build(settings)
        self.bus = self.fleet.bus if self.fleet is not None else SqliteBus(self.db, self.durability)
        self.events = EventHub()
        # Busy sessions keep their log and trace open (raised from the usual 1,024 open files).
        keep_open = open_files_per_cache(raise_open_file_limit())
        self.trace = TraceWriter(paths.traces, max_open=keep_open)
        self.events.subscribe(self.trace)
        self.audit = AuditLog(paths.audit_log)
        self.sessions = SessionManager(paths.sessions, fsync=fsync, durability=self.durability, max_open=keep_open)
        self.tasks = TaskStore(paths.tasks, fsync=fsync, durability=self.durability)
        # every real model call is counted per day and session (agent/usage/ledger.py), saved in batches
        self.usage = UsageLedger(UsageStore(self.db), flush_seconds=settings.state.usage_flush_seconds)
        model = provider or make_provider(settings, on_breaker=lambda kind, fields: self.events.emit(kind, **fields))
        self.unconfigured = isinstance(model, UnconfiguredProvider)
        self.provider: Provider = MeteredProvider(model, self.usage)

        # the agent: tools, context, loop
        approvals = ApprovalBroker(self.events, mode=settings.tools.approval_mode,
                                   timeout=settings.tools.approval_timeout_seconds)
        exec_sandbox = SandboxPolicy.for_paths(paths, settings.tools.exec.sandbox_read_paths)
        # slow work off the session's lane (docs/background.md); results join the session before its next model call
        self.background = BackgroundJobs(settings.background, index_path=paths.state / "background.json",
                                         sessions=self.sessions, events=self.events, audit=self.audit,
                                         busy=lambda key: self.loop.busy(key), fsync=fsync)
        self.background.intake = self.bus
        tools = ToolRegistry(default_tools(settings, sessions=paths.sessions, tasks=self.tasks,
                                           written_ledger=paths.written_ledger, exec_sandbox=exec_sandbox,
                                           background=self.background),
                             events=self.events, audit=self.audit, approvals=approvals)
        context = ContextBuilder(workspace.root, tools=tools.definitions, model=agent.model, max_tokens=agent.max_tokens,
                                 compactor=Compactor(keep=agent.compact_keep_messages,
                                                     chunk_chars=int(agent.context_tokens * 4 * agent.compact_chunk_ratio)),
                                 active_tasks=lambda: [task.status_line() for task in self.tasks.active()])
        context.guest_root = lambda session: None if not (user := session_user(session)) else workspaces.guard(user).root
        # checkpoints: a projection of the session log plus snapshots; restored/forked branches replay
        # recorded answers and tool results (the loop sees a provider and a registry that may answer from the tape)
        self.checkpoints = CheckpointService(
            folder=paths.checkpoints, workspace=workspace.root, sessions=self.sessions, tasks=self.tasks,
            events=self.events, settings=settings.checkpoints, version=__version__,
            busy=lambda key: self.loop.busy(key), invalidate=context.invalidate, fsync=fsync,
            durability=self.durability, roots=lambda user: workspaces.guard(user).root)
        self.sessions.observers += [self.checkpoints.tapes.on_append, self.checkpoints.on_append]
        tools.interceptors.append(ToolReplay(self.checkpoints.tapes, self.sessions.loaded))
        replaying = ReplayProvider(self.provider, self.checkpoints.tapes, self.sessions.loaded)
        self.loop = AgentLoop(bus=self.bus, sessions=self.sessions, provider=replaying, tools=tools,
                              context=context, events=self.events, settings=agent, workspace=workspace,
                              workspaces=workspaces)
        tracker = TaskTracker(self.tasks, remind_after=agent.task_reminder_turns, events=self.events)
        self.events.subscribe(tracker.on_event)
        tools.result_hooks.append(tracker.remind)
        context.contributors.append(self._task_status_line)
        restate = Restatement(agent.name, self.tasks.current, after_turns=agent.restate_after_turns)
        context.contributors.append(restate)
        context.followups.append(restate)
        context.injectors.append(self.background.inject)
        self.loop.skip_if.append(self.background.skip_wake)
        # drift control after each turn; the completeness check before a multi-step answer goes out
        drift = settings.drift
        self.embedder = None
        if drift.embedding_url:  # optional: its HTTP client is imported only when configured
            from clawgate.agent.memory.embeddings import EmbeddingRelevance

            self.embedder = EmbeddingRelevance(drift.embedding_url, drift.embedding_model,
                                               min_similarity=drift.embedding_min_similarity)
        # rung (b), back to the last good checkpoint: decided in the turn, carried out after the run (in its lane)
        self.drift_restore = DriftRestore(self.checkpoints, self.sessions, self.bus, self.events,
                                          paths.checkpoints / "drift", fsync=fsync) if settings.checkpoints.enabled else None
        self.loop.after_turn.append(DriftControl(drift, provider=self.provider, model=agent.model, tasks=self.tasks,
                                                 context=context, events=self.events,
                                                 restorer=restorer or self.drift_restore, embedder=self.embedder))
        self.loop.before_final.append(CompletenessCheck(settings.reflection, provider=self.provider, model=agent.model,
                                                        tasks=self.tasks, tools=tools.definitions, events=self.events,
                                                        side_effects=tools.has_side_effects))
        self.loop.after_run.append(Consolidator(
            provider=self.provider, context=context, memory=Memory(workspace.root), settings=agent, events=self.events,
            memory_for=lambda session, msg: Memory(workspaces.guard(run_user(msg, session)).root)))
        if self.drift_restore is not None:  # after consolidation, which still works on the run's session
            self.loop.after_run.append(self.drift_restore.after_run)
        self.loop.after_run.append(self.background.after_run)

        # triggers: producers on the bus
        session_control = SessionControl(self.loop, self.sessions, context, self.background)
        cron = CronService(CronStore(self.db, history=settings.cron.history), self.bus, self.events, settings.cron,
                           result_of=self._run_result, busy=session_control.busy)
        self.events.subscribe(cron.on_event)
        tools.add(CronTool(cron))
        # sub-agents: children run the same loop on their own logs, with fewer tools and a budget
        self.subagents = Subagents(settings.subagents, parent=self.loop, sessions=self.sessions, bus=self.bus,
                                   events=self.events, pending=paths.subagents, fsync=fsync)
        if settings.subagents.enabled:
            tools.add(Spawn(self.subagents))
        # MCP tool servers: each one's tools join the registry once it is up (docs/mcp.md)
        self.mcp = McpManager(settings.mcp, tools, workspace=workspace.root, logs=paths.logs)
        heartbeat = Heartbeat(settings.heartbeat, workspace=workspace.root, tasks=self.tasks, sessions=self.sessions,
                              bus=self.bus, events=self.events, busy=session_control.busy)
        self.loop.reply_filters.append(heartbeat.reply_filter)
        self.triggers = Triggers(cron=cron, heartbeat=heartbeat, cron_settings=settings.cron,
                                 heartbeat_settings=settings.heartbeat)

        # what the outside may use
        self.status = Status()
        task_control = TaskControl(self.tasks, session_control, self.events)
        self.services = Services(
            intake=self.bus, sessions=session_control, tasks=task_control, approvals=approvals, cron=cron,
            events=self.events, status=self.status,
            commands=CommandRouter(agent_name=agent.name, sessions=session_control, tasks=task_control,
                                   status=self.status, checkpoints=self.checkpoints, usage=self.usage),
            checkpoints=self.checkpoints, usage=self.usage,
        )

        # the gateway and the channels
        self.server = GatewayServer(settings.gateway, build_methods(self.services))
        self.events.subscribe(self.server.on_event)
        gateway_chat = GatewayChatChannel(self.server, self.db)
        self.server.backlog = gateway_chat  # a (re)connecting client catches up on the replies it missed
        self.channels: dict[str, Channel] = {"gateway": gateway_chat}
        if (telegram := build_telegram(settings.channels.telegram, self.services, self.db,
                                       workspace=workspace.root, workspaces=workspaces)) is not None:
            self.channels["telegram"] = telegram
        self.dispatcher = Dispatcher(self.bus, self.channels)
        self._describe_status(workspace)
        if self.fleet is not None:
            fleet.wire(self, self.fleet)

        self._core: list[asyncio.Task[Any]] = []
        self._stopped = asyncio.Event()
        self.failed = False

    def _describe_status(self, workspace: WorkspaceGuard) -> None:
        add = self.status.add
        add("version", lambda: __version__)
        add("pid", os.getpid)
        add("home", lambda: str(self.paths.home))
        add("workspace", lambda: str(workspace.root))
        add("provider", lambda: self.provider.name)
        add("model", lambda: self.settings.agent.model)
        add("channels", lambda: sorted(self.channels))
        add("activeSessions", self.services.sessions.active)
        add("queues", self.bus.counts)
        add("clients", lambda: sum(1 for c in self.server.connections if not c.closed))
        add("sandbox", lambda: sandbox_status().line())
        add("execMounts", lambda: mount_status().line())
        add("eventLoop", event_loop_name)
        add("usage", self.usage.snapshot)
        add("providers", lambda: getattr(self.provider, "breaker_states", list)())
        add("backgroundJobs", self.background.running)
        if self.settings.mcp.servers:
            add("mcp", self.mcp.status)

    def _task_status_line(self, session: Any) -> str | None:
        task = self.tasks.current(session.key)
        return f"task: {task.status_line()}" if task else None

    def _run_result(self, session_key: str, run_id: str) -> str:
        return self.sessions.get(session_key).run_result(run_id) if self.sessions.exists(session_key) else ""

    # lifecycle -----------------------------------------------------------------------------
    async def run(self) -> bool:
        """Serve until SIGTERM/SIGINT (or a core loop dies); returns True when it stopped on a failure."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._stopped.set)
        async with AsyncExitStack() as stack:
            await self._start(stack)
            host = self.settings.gateway.host
            print(f"clawgate gateway ready on ws://{host}:{self.server.port} (provider: {self.provider.name})",
                  flush=True)
            loop.run_in_executor(None, _warm, getattr(self.provider, "warm", None))
            sandbox = sandbox_status()
            (log.info if sandbox.available else log.warning)("%s", sandbox.line())
            mounts = mount_status()
            (log.info if mounts.available else log.warning)("%s", mounts.line())
            if self.unconfigured:
                log.warning("no model provider configured: set ANTHROPIC_API_KEY and restart; chats will be told how")
            await self._stopped.wait()
            log.info("shutting down")
        return self.failed

    async def _start(self, stack: AsyncExitStack) -> None:
        """Start in dependency order, registering each part's undo; the stack unwinds in reverse."""
        for close in (self.db.close, self.checkpoints.store.close, self.audit.close, self.trace.close, self.sessions.close):
            stack.callback(close)
        stack.callback(_quietly_sync, self.durability)  # runs before the files close
        stack.callback(self.usage.close)  # after the last turn ran, before the database closes
        stack.push_async_callback(self.provider.close)
        if self.embedder is not None:
            stack.push_async_callback(self.embedder.close)
        await self.server.start()
        stack.push_async_callback(self.server.stop)
        for channel in self.channels.values():  # released last, after the final replies went out
            stack.push_async_callback(_quietly, f"channel {channel.name} close", channel.close)
        pruned = self.bus.prune(self.settings.state.keep_days)
        if pruned:
            log.info("forgot %d answered/delivered queue row(s) older than %g days", pruned, self.settings.state.keep_days)
        if self.settings.checkpoints.enabled:
            self.checkpoints.prune()
        if self.fleet is not None:  # before the loop: it stops after the turns ended, and hands its partitions back
            stack.callback(self.fleet.close)
            await self.fleet.start()
            stack.push_async_callback(self.fleet.stop)
        inbound, outbound = self.bus.replay_pending()
        if inbound or outbound:
            log.info("recovered %d unanswered message(s) and %d undelivered repl(ies) from before the restart", inbound, outbound)
        if self.drift_restore is not None and (settled := self.drift_restore.recover()):  # before tasks resume
            log.info("finished %d drift restore(s) interrupted by the restart: %s", len(settled), ", ".join(settled))
        # in a fleet, a task's run resumes where its partition's pending entry is claimed (agent/fleet/bus.py)
        resumed = [] if self.fleet is not None else resume_tasks(self.tasks, self.sessions, self.bus,
                                                                  max_resumes=self.settings.agent.max_task_resumes)
        if resumed:
            log.info("resuming %d interrupted task(s): %s", len(resumed), ", ".join(resumed))
        if children := self.subagents.resume():
            log.info("resuming %d background sub-agent(s): %s", len(children), ", ".join(children))
        interrupted = self.background.recover()
        if interrupted:
            log.warning("background job(s) %s were running when the daemon stopped; their sessions are told "
                        "the outcome is unknown (not re-run)", ", ".join(interrupted))
        stack.push_async_callback(self.background.close)  # after the turns stopped (the stack unwinds in reverse)
        await self.mcp.start()  # before the loop: replayed messages see the servers' tools
        stack.push_async_callback(_quietly, "mcp servers stop", self.mcp.stop)
        self._core = [asyncio.create_task(self.loop.run(), name="agent"),
                      asyncio.create_task(self.dispatcher.run(), name="dispatcher")]
        for task in self._core:
            task.add_done_callback(self._on_core_task_end)
        stack.push_async_callback(self._stop_core)
        stack.push_async_callback(self.subagents.close)  # before the turns' grace: children resume from their logs
        for name, channel in self.channels.items():
            try:
                await channel.start()
            except Exception as exc:
                log.error("channel %s did not start: %s", name, exc)
            stack.push_async_callback(_quietly, f"channel {name} stop", channel.stop)
        self.triggers.start()  # last: overdue cron runs fire into a fully started daemon
        stack.callback(self.triggers.stop)
        self._write_pid(stack)

    def _write_pid(self, stack: AsyncExitStack) -> None:
        """For people and scripts; the single-instance guarantee is the lock (gateway/instance.py)."""
        pid_file = self.paths.pid_file
        pid_file.write_text(str(os.getpid()))
        pid_file.chmod(0o600)
        stack.callback(remove_pid_file, pid_file)  # never another daemon's pid file

    async def _stop_core(self) -> None:
        """Let running turns finish briefly (they resume from their logs if cut), drain replies."""
        try:
            await asyncio.wait_for(self.loop.lanes.join(), timeout=TURN_GRACE_SECONDS)
        except asyncio.TimeoutError:
            log.info("shutdown: interrupting running turns; they resume from their logs on next start")
            await self.loop.lanes.close()
        try:
            await asyncio.wait_for(self.dispatcher.lanes.join(), timeout=DELIVERY_GRACE_SECONDS)
        except asyncio.TimeoutError:
            await self.dispatcher.lanes.close()
        for task in self._core:
            task.cancel()
        await asyncio.gather(*self._core, return_exceptions=True)

    def _on_core_task_end(self, task: "asyncio.Task[Any]") -> None:
        """The intake and delivery loops never end on their own; if one dies, a daemon that
        looks alive but serves nothing is worse than an exit a supervisor can restart."""
        if task.cancelled():
            return
        log.critical("core task %s stopped unexpectedly (%r); shutting down so it can be restarted",
                     task.get_name(), task.exception())
        self.failed = True
        self._stopped.set()


async def _quietly(what: str, step: Any) -> None:
    """One part failing to stop must not keep the others from stopping."""
    try:
        await step()
    except Exception:
        log.exception("%s failed", what)


def _quietly_sync(durability: Durability) -> None:
    """The last batch of durable writes, flushed before the files close; a failure is logged, not raised."""
    try:
        durability.sync_now()
    except OSError as exc:
        log.error("could not flush state files at shutdown: %s", exc)


def _warm(provider_warm: Callable[[], None] | None) -> None:
    """Imports that would stall the event loop on first use, done in a thread after the ready line:
    the model SDK (about a second) and httpx (web_fetch; not needed to start)."""
    try:
        if provider_warm is not None:
            provider_warm()
    finally:
        import httpx  # noqa: F401

        settle_heap()  # what is imported by now lives as long as the daemon
