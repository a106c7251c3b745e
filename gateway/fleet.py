"""Fleet mode's wiring: the one place the daemon joins a fleet (docs/fleet.md).

Without `[fleet] redis_url` nothing here runs and nothing of redis is imported: `build` returns
None and the daemon is the single process it always was. With it, `build` reaches Redis (or
raises FleetUnavailable: one line, the daemon does not start) and `wire` connects the parts the
App built to the fleet: the session log and task store refuse writes for partitions this worker
no longer holds, runs of lost partitions stop, connections that may exist once per bot run under
a singleton lease, cron and heartbeat runs are claimed once across the fleet, what a restart left
behind is recovered per partition by the worker that takes it (PartitionRecovery), and pending
approvals are listed and answered fleet-wide.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, Callable, Protocol

from clawgate.agent.bus import OutboundMessage
from clawgate.agent.core.errors import WriteRefused
from clawgate.channels.base import Channel
from clawgate.channels.gateway_chat import GatewayChatChannel
from clawgate.config.schema import Settings

from .agent_scope import TokenBudget

if TYPE_CHECKING:
    from clawgate.agent.checkpoints import CheckpointService
    from clawgate.agent.fleet.node import FleetNode
    from clawgate.agent.jobs.background import BackgroundJobs
    from clawgate.agent.jobs.subagents import Subagents
    from clawgate.agent.loop import AgentLoop
    from clawgate.agent.services import Services
    from clawgate.agent.triggers import Triggers

    from .server import GatewayServer
    from .wiring import State

log = logging.getLogger("clawgate.fleet")
PRUNE_CLAIM_SECONDS = 3600.0  # the checkpoint prune at start: once per fleet per hour, sparing younger files


class App(Protocol):
    """The parts of the daemon the fleet wires (gateway/app.py's App has them): the composition root
    builds the parts and hands itself over as this, so the fleet depends on the parts, never on app.py."""

    settings: Settings
    state: "State"
    loop: "AgentLoop"
    background: "BackgroundJobs"
    subagents: "Subagents"
    checkpoints: "CheckpointService"
    triggers: "Triggers"
    services: "Services"
    server: "GatewayServer"
    channels: dict[str, Channel]

    def recover(self, include: Callable[[str], bool] | None) -> None:
        """What a restart left behind, for the sessions `include` names."""
        ...


def build(settings: Settings) -> "FleetNode | None":
    if not settings.fleet.redis_url:
        return None
    from clawgate.agent.fleet.node import FleetNode  # redis only in fleet mode

    return FleetNode(settings.fleet, keep_days=settings.state.keep_days, port=settings.gateway.port)


def wire(app: "App", node: "FleetNode") -> "PartitionRecovery":
    """Returns the per-partition recovery, armed by the app where a lone process recovers everything."""
    app.state.sessions.guard = node.guard
    app.state.tasks.guard = node.guard
    node.stop_sessions = lambda keys: _stop(app, keys)
    recovery = PartitionRecovery(app, node)
    gained, lost, busy = node.partitions.on_gained, node.partitions.on_lost, node.partitions.busy

    def on_gained(n: int, lease: Any) -> None:
        """Sessions of a partition another worker had may have moved on: read them again, then
        finish what a restart (or the worker's death) left of them, here and only here."""
        for key in app.state.sessions.loaded_keys():
            if node.bus.partition(key) == n and not app.loop.busy(key):
                app.state.sessions.forget(key)
        app.state.tasks.reload()
        gained(n, lease)
        recovery.gained(n)

    def on_lost(n: int) -> None:
        lost(n)
        recovery.lost(n)

    node.partitions.on_gained, node.partitions.on_lost = on_gained, on_lost
    node.partitions.busy = lambda n: busy(n) or recovery.busy(n)
    node.partitions.lasting = recovery.busy
    app.background.index.share()  # each process keeps the entries of its partitions' sessions
    app.checkpoints.collect_grace_seconds = PRUNE_CLAIM_SECONDS  # others write snapshots while one collects
    app.loop.skip_if.append(lambda session, msg: node.bus.stale(msg.id))
    app.mail_exclusive = node.singletons.hold  # a watched mailbox (hook of kind imap): one IMAP login per fleet
    if app.hooks_server is not None:  # a hook's burst and rate hold for the fleet, not per process
        from clawgate.agent.fleet.rates import SharedRate

        app.hooks_server.shared_rate = SharedRate(node.r, node.keys).take
    if isinstance(budget := app.provider.budget, TokenBudget):  # an agent's daily_tokens: for the fleet, not per process
        from clawgate.agent.fleet.counters import SharedCounter

        budget.shared = SharedCounter(node.r, node.keys)
    for channel in app.channels.values():  # a chat channel's adapter reaches it through its kit
        channel.exclusive = node.singletons.hold
        if (kit := getattr(channel, "kit", None)) is not None:
            kit.exclusive = node.singletons.hold
    # a due time is held for a lease's length until its run is recorded: one whose process dies first is taken again
    app.triggers.cron.claim = lambda what: node.runs.take(f"cron:{what}", node.ttl)
    app.triggers.cron.settle = lambda what: node.runs.settle(f"cron:{what}", 86400)
    app.triggers.cron.claim_wait = node.ttl
    app.triggers.cron.fleet_start = lambda: node.fleet_started  # @reboot: once per start of the fleet
    node.periodic.append(app.triggers.cron.resync)  # a job added or changed on another process
    app.triggers.heartbeat.claim = lambda what: node.claim(what, max(60.0, app.settings.heartbeat.interval_seconds * 2))
    app.services.status.add("fleet", node.status)
    _relay(app, node)
    _singletons(app, node)
    return recovery


class PartitionRecovery:
    """A restart's recovery (drift restores, background sub-agents, background jobs: App.recover) for
    the sessions of one partition, on the worker that takes it, once: not on every process of the
    fleet. Partitions taken before the app reaches its recovery point wait for it (`arm`); what was
    started for a partition stops here when the partition is lost, and its next holder recovers it."""

    def __init__(self, app: "App", node: "FleetNode") -> None:
        self.app, self.node = app, node
        self.armed = False
        self.waiting: list[int] = []

    def of(self, n: int) -> Callable[[str], bool]:
        """The sessions of partition n (a sub-agent's go with its parent's)."""
        return lambda key: self.node.bus.partition(key) == n

    def gained(self, n: int) -> None:
        if self.armed:
            self.recover(n)
        else:
            self.waiting.append(n)

    def arm(self) -> None:
        """The app is at the point where a lone process recovers: recover the partitions held so far."""
        self.armed = True
        waiting, self.waiting = self.waiting, []
        for n in waiting:
            if self.node.partitions.lease_of(n) is not None:
                self.recover(n)

    def recover(self, n: int) -> None:
        try:
            self.app.recover(self.of(n))
        except WriteRefused as exc:  # lost the partition again while recovering it: its next holder recovers it
            log.warning("fleet: recovery of partition %d stopped: %s", n, exc)
        except Exception:  # one partition's leftovers must not stop the worker; the next holder tries again
            log.exception("fleet: recovery of partition %d failed", n)

    def lost(self, n: int) -> None:
        if n in self.waiting:
            self.waiting.remove(n)
        jobs = self.app.background.release(self.of(n))
        children = self.app.subagents.release(self.of(n))
        if jobs or children:
            log.warning("fleet: stopped background work of partition %d here (%s): its partition moved to another "
                        "worker, which reports or resumes it", n, ", ".join(jobs + children))

    def busy(self, n: int) -> bool:
        """Background work of partition n running here: the partition is not handed over while it runs."""
        of = self.of(n)
        return (any(of(job["session"]) for job in self.app.background.running())
                or any(of(key) for key in self.app.subagents.running()))


def _singletons(app: "App", node: "FleetNode") -> None:
    """A chat channel's once-per-bot connection runs in one process (its kit's `exclusive`, set above);
    the others forward their platform calls to it, and learn of its approval prompts for their runs so
    a press or `/approve` arriving there is taken (docs/fleet.md "Singletons")."""
    from clawgate.agent.fleet.calls import Calls

    calls = Calls(node.r, node.keys, node.node, node.ttl)
    kits = [kit for channel in app.channels.values() if (kit := getattr(channel, "kit", None)) is not None]
    open_in_fleet = OpenInFleet(node)
    for kit in kits:
        kit.forward = calls
        # "typing…" goes on while the session's message waits for its answer anywhere in the fleet: the
        # process that took it in keeps it up while another process runs the turn
        _busy_in_fleet(kit, open_in_fleet)
    app.services.status.add("fleetCalls", lambda: {"forwarded": calls.forwarded, "served": calls.served})
    relayed = node.relay.on_event

    def on_event(event: dict[str, Any]) -> None:
        relayed(event)
        for kit in kits:
            kit.prompts.on_remote_event(event)

    node.relay.on_event = on_event


class OpenInFleet:
    """Whether a session's message still waits for its answer anywhere in the fleet, for a kit's typing
    loop (a synchronous check every few seconds). Answered from the last reading and read again in the
    background, so a Redis that is away never holds up the event loop: the answer lags one check at
    most, a message just taken in counts as open until read, and a failed read as answered (typing
    stops; the reply still comes)."""

    def __init__(self, node: "FleetNode") -> None:
        self.node = node
        self.known: dict[str, bool] = {}
        self._reading: dict[str, int] = {}  # key -> the generation its read in flight started in
        self._generation: dict[str, int] = {}

    def taken_in(self, key: str) -> None:
        """A new message for `key`: what was read before it no longer says anything."""
        self.known.pop(key, None)
        self._generation[key] = self._generation.get(key, 0) + 1

    def __call__(self, key: str) -> bool:
        if key not in self._reading:
            self._reading[key] = self._generation.get(key, 0)
            asyncio.ensure_future(self._read(key))
        return self.known.get(key, True)

    async def _read(self, key: str) -> None:
        try:
            open_now = bool(await self.node.r.scard(self.node.keys.open_set(key)))
        except Exception as exc:  # Redis away, or the process stopping
            log.debug("fleet: cannot tell whether %s is answered (%s)", key, exc)
            open_now = False
        if self._reading.pop(key, None) == self._generation.get(key, 0):  # else a newer message came meanwhile
            self.known[key] = open_now


def _busy_in_fleet(kit: Any, open_in_fleet: OpenInFleet) -> None:
    """The kit's typing goes on while the message waits anywhere in the fleet, not only here."""
    here, started = kit.progress.busy, kit.progress.started

    def taken_in(key: str, *args: Any) -> None:
        open_in_fleet.taken_in(key)
        started(key, *args)

    kit.progress.busy = lambda key: here(key) or open_in_fleet(key)
    kit.progress.started = taken_in


def _relay(app: "App", node: "FleetNode") -> None:
    """Runs on any worker, clients on any process: events, replies and control cross over."""
    from clawgate.agent.fleet.approvals import SharedApprovals  # redis only in fleet mode

    relay, server = node.relay, app.server
    app.state.events.subscribe(relay.event)
    shared = SharedApprovals(node.sync, node.keys.approvals, node.keys.nodes, node.node, app.services.approvals.timeout)
    app.state.events.subscribe(shared.on_event)
    relay.on_event = server.on_event
    relay.on_chat = lambda target, payload: server.broadcast("chat", payload, target) and None
    gateway = app.channels.get("gateway")
    if isinstance(gateway, GatewayChatChannel):
        app.channels["gateway"] = RelayedGatewayChat(gateway, node)
    control, approvals = app.services.sessions, app.services.approvals
    local_stop, local_resolve, local_pending = control.stop, approvals.resolve, approvals.pending

    def stop(key: str, *, user: str | None = None, reply_to: str | None = None) -> bool:
        """Here, or on the worker running it (a guest's stop reaches only what is theirs there too)."""
        if local_stop(key, user=user, reply_to=reply_to):
            return True
        holder = node.holder(key)
        if holder is None or holder == node.node:
            return False
        relay.control(op="stop", session=key, user=user, reply_to=reply_to)
        return True

    def resolve(approval_id: str, approved: bool) -> bool:
        """Here, or relayed to the worker whose run waits for it (found in the shared list)."""
        if local_resolve(approval_id, approved):
            return True
        holder = shared.holder(approval_id)
        if holder is None or holder == node.node:
            return False
        relay.control(op="approve", id=approval_id, approved=approved)
        return True

    def pending() -> list[dict[str, Any]]:
        """Every worker's (approvals.list and the web page's approvals panel on any process)."""
        here = local_pending()
        known = {str(request["id"]) for request in here}
        return here + [request for request in shared.pending() if str(request["id"]) not in known]

    def on_control(message: dict[str, Any]) -> None:
        if message.get("op") == "stop":
            key, user, reply_to = str(message.get("session")), message.get("user"), message.get("reply_to")
            user = user if isinstance(user, str) else None
            control.stop_background(key, user=user)
            local_stop(key, user=user, reply_to=reply_to if isinstance(reply_to, str) else None)
        elif message.get("op") == "approve":
            local_resolve(str(message.get("id")), bool(message.get("approved")))

    control.stop, approvals.resolve, approvals.pending = stop, resolve, pending  # type: ignore[method-assign]
    relay.on_control = on_control


class RelayedGatewayChat(Channel):
    """The gateway chat channel in a fleet: the worker that ran the turn numbers the reply in the
    shared database (so `resume` finds it on any process), shows it to its own clients and relays
    it to the clients of the others. Delivered once relayed: a client away at that moment catches
    up with `resume` (docs/fleet.md)."""

    name = "gateway"

    def __init__(self, inner: GatewayChatChannel, node: "FleetNode") -> None:
        self.inner, self.node = inner, node

    async def start(self) -> None:
        await self.inner.start()

    async def stop(self) -> None:
        await self.inner.stop()

    async def send(self, msg: OutboundMessage) -> None:
        target, payload = self.inner.number(msg)
        await self.inner.keep(msg, target, payload)
        self.inner.server.broadcast("chat", payload, target)
        self.node.relay.chat(target, payload)


def _stop(app: "App", keys: list[str]) -> None:
    """The partition moved: its runs here stop (their writes would be refused); the new holder resumes them."""
    for key in keys:
        app.loop.lanes.drop_queued(key)
        if app.loop.lanes.cancel_current(key):
            log.warning("fleet: stopped the run of session %s here: its partition moved to another worker", key)
