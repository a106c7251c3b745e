"""The composition root: the one place that names concrete classes and wires them together.

Everything else receives what it needs through its constructor — channels get their settings
and the narrow Services, triggers their parts, gateway methods the Services — so no part holds
"the daemon". `App.__init__` reads top to bottom as the order of construction: one `build_*` per
subsystem (gateway/wiring.py for the agent's parts; the gateway server and the channels here),
then the loop's hooks from one table (`wiring.hook_pipeline`). Start-up order matters for crash
safety: state first, pending inbound and outbound messages replayed before any channel takes new
input, the ready line only when every part serves. Shutdown is the exact reverse (an
AsyncExitStack): triggers, then channels stop taking input, running turns get a moment to finish,
replies drain, then clients and files close.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sqlite3
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from clawgate.agent.bus.outbox_files import sweep
from clawgate.agent.core.durability import Durability
from clawgate.agent.core.redact import register_secrets
from clawgate.agent.providers import Provider
from clawgate.agent.recovery.restart import resume_tasks
from clawgate.agent.services import Services
from clawgate.agent.supervision.drift_control import CheckpointRestorer
from clawgate.agent.tools.mounts import mount_status
from clawgate.agent.tools.sandbox import sandbox_status
from clawgate.agent.tools.send_file import SendFile
from clawgate.agent.triggers.hooks import build_hooks
from clawgate.channels.base import Channel
from clawgate.channels.gateway_chat import GatewayChatChannel
from clawgate.config.paths import Paths
from clawgate.config.schema import Settings
from clawgate.config.token import gateway_token
from clawgate.workspace.users import Workspaces

from . import __version__, chat_channels, fleet
from .api import build_methods
from .device_links import DeviceLinks
from .dispatcher import Dispatcher
from .instance import remove_pid_file
from .runtime import build_deferred_models, collect_from_now, event_loop_name
from .server import GatewayServer
from .warm_up import WarmUp
from .wiring import (State, build_approvals, build_conversation, build_model, build_producers, build_services,
                     build_state, build_supervision, hook_pipeline, install_hooks)

if TYPE_CHECKING:
    from .hooks_server import HooksServer

log = logging.getLogger("clawgate")
TURN_GRACE_SECONDS = 5.0
DELIVERY_GRACE_SECONDS = 3.0


def build_server(settings: Settings, services: Services) -> GatewayServer:
    """The WebSocket gateway: its methods are the Services, nothing more."""
    return GatewayServer(settings.gateway, build_methods(services))


def build_channels(settings: Settings, services: Services, server: GatewayServer, db: sqlite3.Connection,
                   workspaces: Workspaces) -> tuple[dict[str, Channel], chat_channels.Built | chat_channels.NoChannels]:
    """Every configured channel by name (the `[channels.*]` sections through the channel registry);
    the gateway's own chat is always there."""
    gateway_chat = GatewayChatChannel(server, db, keep_delivered=services.sessions.keep_delivered)
    server.backlog = gateway_chat  # a (re)connecting client catches up on the replies it missed
    built = chat_channels.build(settings.channels, services, db, workspace=workspaces.owner.root, workspaces=workspaces)
    return {"gateway": gateway_chat, **built.runners}, built


def build_hook_inputs(settings: Settings, services: Services, db: sqlite3.Connection) -> tuple[HooksServer | None, list[Any]]:
    """The enabled `[hooks.<name>]` tables: the webhook listener for the HTTP ones, a mail watch per mailbox
    (kind imap); both put calls on the intake like a channel. The listener's aiohttp server is imported only
    when a hook is configured (a daemon without hooks does not pay its start-up)."""
    if not any(table.enabled for table in settings.hooks.values()):
        return None, []
    from .hooks_server import HooksServer, build_mail_watches

    hooks = build_hooks(settings.hooks, services.agents)
    register_secrets([secret for hook in hooks.values() for secret in hook.settings.secrets])
    http = {name: hook for name, hook in hooks.items() if hook.settings.kind == "http"}
    server = HooksServer(http, services.intake, host=settings.gateway.hooks_host,
                         port=settings.gateway.hooks_port) if http else None
    mail = {name: hook for name, hook in hooks.items() if hook.settings.kind == "imap"}
    return server, build_mail_watches(mail, services.intake, db) if mail else []


def file_limits(channels: dict[str, Channel]) -> dict[str, int]:
    """channel -> the largest file its platform takes, for the channels that carry files."""
    limits = {}
    for name, channel in channels.items():
        caps = getattr(getattr(channel, "adapter", None), "capabilities", None)
        if caps is not None and caps.files and caps.max_file_bytes:
            limits[name] = caps.max_file_bytes
    return limits


class App:
    """Builds every part in __init__ (no I/O beyond opening state), runs them in `run`."""

    def __init__(self, paths: Paths, settings: Settings, *, provider: Provider | None = None,
                 restorer: CheckpointRestorer | None = None) -> None:
        self.paths, self.settings = paths, settings
        paths.ensure()
        if not settings.gateway.token:  # the gateway is never open: generate (once) and persist a token
            settings.gateway.token = gateway_token(paths, settings, create=True)
            register_secrets([settings.gateway.token])
        state = build_state(paths, settings)
        # [fleet] redis_url: the bus is Redis Streams shared by the fleet's processes (gateway/fleet.py)
        self.fleet = fleet.build(settings)
        if self.fleet is not None:
            state.bus = self.fleet.bus
            self.fleet.bus.local_durability = state.durability
        self.provider, self.unconfigured = build_model(settings, state, provider)
        approvals = build_approvals(settings, state)
        talk = build_conversation(paths, settings, state, self.provider, approvals)
        watch = build_supervision(paths, settings, state, self.provider, talk, restorer=restorer)
        producers = build_producers(paths, settings, state, talk)
        self.services = build_services(settings, state, approvals, talk, producers)
        self.server = build_server(settings, self.services)
        install_hooks(hook_pipeline(state, talk, watch, producers, self.server.on_event), state, talk)
        self.channels, self.chat_channels = build_channels(settings, self.services, self.server, state.db,
                                                           state.workspaces)
        if isinstance(links := self.services.device_links, DeviceLinks):  # a linked account starts at once
            links.runners = self.chat_channels.runners
        self.hooks_server, self.mail_watches = build_hook_inputs(settings, self.services, state.db)
        # a fleet's singleton lease (gateway/fleet.py): each watched mailbox is read by one process
        self.mail_exclusive: Callable[[str, Callable[[], Awaitable[None]]], Awaitable[None]] | None = None
        self.dispatcher = Dispatcher(state.bus, self.channels, base_delay=settings.channels.delivery_retry_seconds)
        if isinstance(send_file := talk.tools.get("send_file"), SendFile):  # the tool refuses what a channel cannot take
            send_file.limits = file_limits(self.channels)

        # what `run` starts and stops
        self.state, self.loop, self.checkpoints = state, talk.loop, talk.checkpoints
        self.bus, self.usage, self.background = state.bus, state.usage, talk.background
        self.drift_restore, self.embedder = watch.drift_restore, watch.embedder
        self.subagents, self.mcp, self.triggers = producers.subagents, producers.mcp, producers.triggers
        self._describe_status(state)
        self.fleet_recovery = fleet.wire(self, self.fleet) if self.fleet is not None else None
        self._core: list[asyncio.Task[Any]] = []
        self._warming: asyncio.Task[int] | None = None
        self._stopped = asyncio.Event()
        self.failed = False

    def _describe_status(self, state: State) -> None:
        """The sections of `status`, `/status` and `clawgate status`: each read when a snapshot is taken."""
        add = self.services.status.add
        add("version", lambda: __version__)
        add("pid", os.getpid)
        add("home", lambda: str(self.paths.home))
        add("workspace", lambda: str(state.workspace.root))
        add("provider", lambda: self.provider.name)
        add("model", lambda: self.settings.agent.model)
        add("channels", lambda: sorted(self.channels))
        add("channelStates", self.chat_channels.states)  # starting | running | retrying | failed | stopped
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
        if self.settings.agents:  # several agents: their ids, the default first (a session's agent is in its key)
            add("agents", lambda: list(state.roster.agents))
        hooks = [*(self.hooks_server.hooks.values() if self.hooks_server else ()), *(w.hook for w in self.mail_watches)]
        if hooks:
            add("hooks", lambda: [hook.public() for hook in hooks])

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
            # last, before any client is served: overdue cron runs fire into a fully started daemon
            self.triggers.start()
            collect_from_now()  # off while starting (gateway/cli/__init__.py)
            warm_up = WarmUp(getattr(self.provider, "warm", None))  # a thread the shutdown does not wait for
            warm_up.start()
            # tool arguments and method parameters are built here, not at import (gateway/runtime.py)
            self._warming = asyncio.create_task(build_deferred_models(), name="build deferred models")
            if self.unconfigured:
                log.warning("no model provider configured: set ANTHROPIC_API_KEY and restart; chats will be told how")
            await self._stopped.wait()
            warm_up.stop()
            log.info("shutting down")
        return self.failed

    async def _start(self, stack: AsyncExitStack) -> None:
        """Start in dependency order, registering each part's undo; the stack unwinds in reverse."""
        state = self.state
        for close in (state.db.close, self.checkpoints.store.close, state.audit.close, state.trace.close,
                      state.sessions.close):
            stack.callback(close)
        stack.callback(_quietly_sync, state.durability)  # runs before the files close
        stack.callback(self.usage.close)  # after the last turn ran, before the database closes
        stack.push_async_callback(self.provider.close)
        if self.embedder is not None:
            stack.push_async_callback(self.embedder.close)
        await self.server.start()
        stack.push_async_callback(self.server.stop)
        if isinstance(links := self.services.device_links, DeviceLinks):
            stack.push_async_callback(links.close)  # a pairing under way stops its login client
        for channel in self.channels.values():  # released last, after the final replies went out
            stack.push_async_callback(_quietly, f"channel {channel.name} close", channel.close)
        pruned = self.bus.prune(self.settings.state.keep_days)
        if pruned:
            log.info("forgot %d answered/delivered queue row(s) older than %g days", pruned, self.settings.state.keep_days)
        # a fleet's processes share the checkpoint store: one prunes it (at most hourly), not each
        if self.settings.checkpoints.enabled and (self.fleet is None or self.fleet.claim("checkpoints-prune",
                                                                                       fleet.PRUNE_CLAIM_SECONDS)):
            self.checkpoints.prune()
        if self.fleet is not None:  # before the loop: it stops after the turns ended, and hands its partitions back
            stack.callback(self.fleet.close)
            await self.fleet.start()
            stack.push_async_callback(self.fleet.stop)
        inbound, outbound = self.bus.replay_pending()
        if self.fleet is None and (orphans := sweep(self.paths.state / "outbox-files", self.bus.delivery_status)):
            log.info("removed %d stored file(s) no pending reply names", orphans)
        if inbound or outbound:
            log.info("recovered %d unanswered message(s) and %d undelivered repl(ies) from before the restart", inbound, outbound)
        # in a fleet, a task's run resumes where its partition's pending entry is claimed (agent/fleet/bus.py),
        # and the rest of a partition's recovery runs on the worker that takes it (gateway/fleet.py)
        if self.fleet_recovery is None:
            self.recover(None)
        else:
            self.fleet_recovery.arm()
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
        if self.hooks_server is not None:  # webhook calls are input like a channel's
            await self.hooks_server.start()
            stack.push_async_callback(_quietly, "webhook listener stop", self.hooks_server.stop)
        if self.mail_watches:  # watched mailboxes (hooks of kind imap): new mail is input too
            watching = [asyncio.create_task(self._watch(w), name=f"hook {w.hook.name}") for w in self.mail_watches]
            stack.push_async_callback(_cancel_all, watching)
        stack.callback(self.triggers.stop)  # started right after the ready line (`run`)
        self._write_pid(stack)

    def _watch(self, watch: Any) -> Awaitable[None]:
        """A watched mailbox is one IMAP login: in a fleet it runs where its singleton lease is held."""
        if self.mail_exclusive is None:
            return watch.run()
        return self.mail_exclusive(f"hook-mail:{watch.hook.name}", watch.run)

    def recover(self, include: Callable[[str], bool] | None) -> None:
        """What a restart left behind, for the sessions `include` names (None: all, a lone process):
        drift restores finished, tasks, sub-agents and background jobs resumed or reported, once."""
        if self.drift_restore is not None and (settled := self.drift_restore.recover(include)):  # before tasks resume
            log.info("finished %d drift restore(s) interrupted by the restart: %s", len(settled), ", ".join(settled))
        resumed = [] if self.fleet is not None else resume_tasks(self.state.tasks, self.state.sessions, self.bus,
                                                                  max_resumes=self.settings.agent.max_task_resumes)
        if resumed:
            log.info("resuming %d interrupted task(s): %s", len(resumed), ", ".join(resumed))
        every: Callable[[str], bool] = include or (lambda session: True)
        if children := self.subagents.resume(every):
            log.info("resuming %d background sub-agent(s): %s", len(children), ", ".join(children))
        interrupted = self.background.recover(every)
        if interrupted:
            log.warning("background job(s) %s were running when the daemon stopped; their sessions are told "
                        "the outcome is unknown (not re-run)", ", ".join(interrupted))

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


async def _cancel_all(tasks: list["asyncio.Task[Any]"]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def _quietly_sync(durability: Durability) -> None:
    """The last batch of durable writes, flushed before the files close; a failure is logged, not raised."""
    try:
        durability.sync_now()
    except OSError as exc:
        log.error("could not flush state files at shutdown: %s", exc)

