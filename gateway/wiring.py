"""The agent's parts, built one subsystem at a time: each `build_*` takes what the earlier ones
returned and returns what the later ones need, so the order of construction is the order of reading.

gateway/app.py calls them in sequence (state, model and usage, approvals, the conversation and
its checkpoints, supervision, jobs and triggers, services), then installs the loop's hooks from the
one table in `hook_pipeline`. The offline CLI commands (gateway/offline.py) use the same builders
for the parts they open without the daemon, so there is one wiring, not one per command.
Nothing here starts anything: no task, no socket, no thread; only files and the database are opened.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from clawgate.agent.approvals import ApprovalBroker
from clawgate.agent.bus import MessageBus, SqliteBus
from clawgate.agent.checkpoints import CheckpointService, ReplayProvider, ToolReplay
from clawgate.agent.commands import CommandRouter
from clawgate.agent.context.builder import ContextBuilder
from clawgate.agent.context.compaction import Compactor
from clawgate.agent.context.consolidation import Consolidator
from clawgate.agent.control import SessionControl, TaskControl
from clawgate.agent.core.audit import AuditLog
from clawgate.agent.core.durability import Durability
from clawgate.agent.core.events import EventHub
from clawgate.agent.core.redact import register_secrets
from clawgate.agent.core.statedb import open_state_db
from clawgate.agent.core.trace import TraceWriter
from clawgate.agent.jobs.background import BackgroundJobs
from clawgate.agent.jobs.spawn_tool import Spawn
from clawgate.agent.jobs.subagents import Subagents
from clawgate.agent.loop import AgentLoop, run_user, session_user
from clawgate.agent.mcp import McpManager
from clawgate.agent.memory.store import Memory
from clawgate.agent.providers import Provider, UnconfiguredProvider
from clawgate.agent.providers.breaker import OnChange
from clawgate.agent.recovery.restart import TaskTracker
from clawgate.agent.services import Services
from clawgate.agent.session import Session, SessionManager
from clawgate.agent.health import Health
from clawgate.agent.supervision.completeness import CompletenessCheck
from clawgate.agent.supervision.drift_control import CheckpointRestorer, DriftControl
from clawgate.agent.supervision.drift_restore import DriftRestore
from clawgate.agent.tasks.restatement import Restatement
from clawgate.agent.tasks.store import TaskStore
from clawgate.agent.tools import ToolRegistry
from clawgate.agent.tools.sandbox import SandboxPolicy
from clawgate.agent.toolset import default_tools
from clawgate.agent.tools.message import Message
from clawgate.agent.tools.shell import Exec
from clawgate.agent.triggers import CronService, CronStore, Triggers
from clawgate.agent.triggers.cron_tool import CronTool
from clawgate.agent.triggers.heartbeat import Heartbeat
from clawgate.agent.usage.ledger import MeteredProvider, UsageLedger
from clawgate.agent.usage.store import UsageStore
from clawgate.config.agents import Roster
from clawgate.config.loader import roster_of
from clawgate.config.paths import Paths
from clawgate.config.schema import Settings
from clawgate.workspace.guard import WorkspaceGuard
from clawgate.workspace.users import Workspaces

from . import __version__
from .agent_scope import (agent_identity, agent_place, allowed_tools, approval_mode, chat_of_agent, check_model,
                          exec_allowlist, heartbeat_deliver, mcp_users, person_root, token_budget)
from .device_links import DeviceLinks
from .home_setup import write_workspace
from .limits import open_files_per_cache, raise_open_file_limit

if TYPE_CHECKING:
    from clawgate.agent.memory.embeddings import EmbeddingRelevance


# state ---------------------------------------------------------------------------------------
def build_workspaces(paths: Paths, settings: Settings) -> Workspaces:
    """The owner's workspace and, beside it, one per guest (exec's HOME/TMPDIR per person: workspace/users.py);
    every agent but the default has its own of each (docs/agents.md), a new one made from `clawgate init`'s
    templates."""
    roster = roster_of(paths, settings)
    default = roster.default
    for agent in roster.agents.values():
        if not agent.default and not agent.workspace.exists():
            write_workspace(agent.workspace)

    def folders(ident: str) -> tuple[Path, Path, Path]:
        known = roster.agents.get(ident)  # a session of an agent since removed: still its own folder, never another's
        root = known.workspace if known is not None else paths.home / "agents" / ident / "workspace"
        return root, paths.home / "agents" / ident / "workspaces", paths.exec_scratch / "agents" / ident

    return Workspaces(WorkspaceGuard(default.workspace), paths.guest_workspaces, paths.exec_scratch,
                      agents=folders if len(roster.agents) > 1 else None)


@dataclass
class State:
    """Everything that is stored: the database (bus, cron, usage), session logs, tasks, traces, the audit log."""

    workspaces: Workspaces
    durability: Durability
    db: sqlite3.Connection
    bus: MessageBus  # SqliteBus, or in a fleet the Redis Streams bus (gateway/fleet.py)
    events: EventHub
    trace: TraceWriter
    audit: AuditLog
    sessions: SessionManager
    tasks: TaskStore
    usage: UsageLedger
    roster: Roster  # the agents and the bindings routing chats to them (config/agents.py)

    @property
    def workspace(self) -> WorkspaceGuard:
        return self.workspaces.owner


def build_state(paths: Paths, settings: Settings) -> State:
    """Durable writes are flushed in batches off the event loop (group commit, agent/core/durability.py):
    the database commits without its own fsync, the barrier fsyncs the WAL. Busy sessions keep their log
    and trace open (the open-file limit is raised from the usual 1,024 for that)."""
    fsync = settings.state.fsync
    durability = Durability(enabled=fsync)
    db = open_state_db(paths.database, fsync=False)
    keep_open = open_files_per_cache(raise_open_file_limit())
    return State(
        workspaces=build_workspaces(paths, settings), durability=durability, db=db, bus=SqliteBus(db, durability),
        events=EventHub(), trace=TraceWriter(paths.traces, max_open=keep_open), audit=AuditLog(paths.audit_log),
        sessions=SessionManager(paths.sessions, fsync=fsync, durability=durability, max_open=keep_open,
                                max_idle=settings.state.sessions_in_memory,
                                max_idle_records=settings.state.records_in_memory),
        tasks=TaskStore(paths.tasks, fsync=fsync, durability=durability),
        # every real model call is counted per day and session (agent/usage/ledger.py), saved in batches
        usage=UsageLedger(UsageStore(db), flush_seconds=settings.state.usage_flush_seconds),
        roster=roster_of(paths, settings))


# the model -------------------------------------------------------------------------------------
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


def build_model(settings: Settings, state: State, provider: Provider | None = None) -> tuple[MeteredProvider, bool]:
    """The configured providers (or the one given, in tests), metered for usage; True when none is configured."""
    model = provider or make_provider(settings, on_breaker=lambda kind, fields: state.events.emit(kind, **fields))
    return (MeteredProvider(model, state.usage, budget=token_budget(state.roster, state.usage)),
            isinstance(model, UnconfiguredProvider))


def build_approvals(settings: Settings, state: State) -> ApprovalBroker:
    broker = ApprovalBroker(state.events, mode=settings.tools.approval_mode,
                            timeout=settings.tools.approval_timeout_seconds)
    broker.mode_of = approval_mode(state.roster)  # an agent's own tools.approval_mode
    return broker


# the conversation: tools, context, checkpoints, the loop ---------------------------------------------
class SessionActivity:
    """Which sessions have a turn running or queued. The background jobs and the checkpoints need to
    ask before the loop exists (they are part of its tools and its provider); the loop is bound here
    once built, and until then no session is busy (no turn can run without the loop)."""

    def __init__(self) -> None:
        self._loop: AgentLoop | None = None

    def bind(self, loop: AgentLoop) -> None:
        self._loop = loop

    def busy(self, session_key: str) -> bool:
        return self._loop is not None and self._loop.busy(session_key)


def build_checkpoints(paths: Paths, settings: Settings, workspaces: Workspaces, sessions: SessionManager,
                      tasks: TaskStore, events: EventHub, *, busy: Callable[[str], bool],
                      invalidate: Callable[[str], None], durability: Durability | None = None,
                      repair: bool = True) -> CheckpointService:
    """A projection of the session logs plus workspace snapshots, per person. The daemon repairs a
    corrupt store; offline commands (`repair=False`) report it instead."""
    return CheckpointService(
        folder=paths.checkpoints, workspace=workspaces.owner.root, sessions=sessions, tasks=tasks, events=events,
        settings=settings.checkpoints, version=__version__, busy=busy, invalidate=invalidate,
        fsync=settings.state.fsync, durability=durability, repair=repair,
        roots=lambda where: person_root(workspaces, where))


@dataclass
class Conversation:
    """The loop and what it runs on: the tool registry, the context builder, checkpoints, background jobs."""

    loop: AgentLoop
    tools: ToolRegistry
    context: ContextBuilder
    checkpoints: CheckpointService
    background: BackgroundJobs


def build_conversation(paths: Paths, settings: Settings, state: State, provider: Provider,
                       approvals: ApprovalBroker) -> Conversation:
    """Restored or forked branches replay recorded answers and tool results: the loop sees a provider
    and a registry that may answer from the checkpoints' tape."""
    agent, fsync = settings.agent, settings.state.fsync
    workspaces, sessions, tasks, events = state.workspaces, state.sessions, state.tasks, state.events
    activity = SessionActivity()
    # slow work off the session's lane (docs/background.md); results join the session before its next model call
    background = BackgroundJobs(settings.background, index_path=paths.state / "background.json", sessions=sessions,
                                events=events, audit=state.audit, busy=activity.busy, fsync=fsync)
    background.intake = state.bus
    exec_sandbox = SandboxPolicy.for_paths(paths, settings.tools.exec.sandbox_read_paths)
    tools = ToolRegistry(default_tools(settings, sessions=paths.sessions, tasks=tasks,
                                       written_ledger=paths.written_ledger, exec_sandbox=exec_sandbox,
                                       background=background, outbox_files=paths.state / "outbox-files",
                                       browser_state=paths.state / "browser"),
                         events=events, audit=state.audit, approvals=approvals)
    if len(state.roster.agents) > 1 and isinstance(message := tools.get("message"), Message):
        message.may_post = chat_of_agent(state.roster, sessions)
    if isinstance(exec_tool := tools.get("exec"), Exec):
        exec_tool.allowlist_of = exec_allowlist(state.roster)  # an agent's own tools.exec_allowlist
    context = ContextBuilder(workspaces.owner.root, tools=tools.definitions, model=agent.model,
                             max_tokens=agent.max_tokens,
                             compactor=Compactor(keep=agent.compact_keep_messages,
                                                 chunk_chars=int(agent.context_tokens * 4 * agent.compact_chunk_ratio)),
                             active_tasks=lambda: [task.status_line() for task in tasks.active()])
    context.guest_root = lambda session: (None if not (user := session_user(session))
                                          else workspaces.of(session.key).guard(user).root)
    context.agent_of = agent_place(workspaces, state.roster, agent)
    if len(state.roster.agents) > 1 or any(a.config.tools.allow is not None or a.config.tools.mcp_servers is not None
                                           for a in state.roster.agents.values()):
        context.allowed_tools = tools.allowed = allowed_tools(state.roster, tools)
    checkpoints = build_checkpoints(paths, settings, workspaces, sessions, tasks, events, busy=activity.busy,
                                    invalidate=context.invalidate, durability=state.durability)
    sessions.evicted += [context.invalidate, checkpoints.forget_track]  # per-session caches leave with the session
    if (forget_body := getattr(provider, "forget_session", None)) is not None:  # the request-body cache's entry
        sessions.evicted.append(forget_body)
    replaying = ReplayProvider(provider, checkpoints.tapes, sessions.loaded)
    loop = AgentLoop(bus=state.bus, sessions=sessions, provider=replaying, tools=tools, context=context, events=events,
                     settings=agent, workspace=workspaces.owner, workspaces=workspaces)
    activity.bind(loop)
    return Conversation(loop=loop, tools=tools, context=context, checkpoints=checkpoints, background=background)


# supervision: what watches a run ---------------------------------------------------------------------
@dataclass
class Supervision:
    """Task tracking and restatement, drift control after each turn, the completeness check before a
    multi-step answer goes out, consolidation into memory after the run, the drift restore rung."""

    tracker: TaskTracker
    restatement: Restatement
    drift: DriftControl
    completeness: CompletenessCheck
    consolidation: Consolidator
    drift_restore: DriftRestore | None  # rung (b), back to the last good checkpoint (checkpoints enabled)
    embedder: "EmbeddingRelevance | None"  # optional drift relevance by embeddings (its HTTP client closes at stop)


def build_supervision(paths: Paths, settings: Settings, state: State, provider: Provider, talk: Conversation, *,
                      restorer: CheckpointRestorer | None = None) -> Supervision:
    agent, drift, fsync = settings.agent, settings.drift, settings.state.fsync
    tasks, events, workspaces = state.tasks, state.events, state.workspaces
    embedder = None
    if drift.embedding_url:  # optional: its HTTP client is imported only when configured
        from clawgate.agent.memory.embeddings import EmbeddingRelevance

        embedder = EmbeddingRelevance(drift.embedding_url, drift.embedding_model,
                                      min_similarity=drift.embedding_min_similarity)
    # rung (b) is decided in the turn and carried out after the run (in its lane)
    drift_restore = DriftRestore(talk.checkpoints, state.sessions, state.bus, events, paths.checkpoints / "drift",
                                 fsync=fsync) if settings.checkpoints.enabled else None
    restatement = Restatement(agent.name, tasks.current_for, after_turns=agent.restate_after_turns)
    if len(state.roster.agents) > 1:
        identity = agent_identity(state.roster, agent)
        restatement.name_of = lambda key: identity(key)[0]
    supervision = Supervision(
        tracker=TaskTracker(tasks, remind_after=agent.task_reminder_turns, events=events, sessions=state.sessions),
        restatement=restatement,
        drift=DriftControl(drift, provider=provider, model=agent.model, tasks=tasks, context=talk.context,
                           events=events, restorer=restorer or drift_restore, embedder=embedder),
        completeness=CompletenessCheck(settings.reflection, provider=provider, model=agent.model, tasks=tasks,
                                       tools=talk.tools.definitions, events=events,
                                       side_effects=talk.tools.has_side_effects),
        consolidation=Consolidator(
            provider=provider, context=talk.context, memory=Memory(workspaces.owner.root), settings=agent,
            events=events,
            memory_for=lambda session, msg: Memory(workspaces.of(session.key).guard(run_user(msg, session)).root)),
        drift_restore=drift_restore, embedder=embedder)
    if len(state.roster.agents) > 1 or settings.agents:  # each agent's checks on its runs use its model
        supervision.drift.model_of = check_model(state.roster, agent, drift.model, "drift_model")
        supervision.completeness.model_of = check_model(state.roster, agent, settings.reflection.model,
                                                        "completeness_model")
    return supervision


# work that starts by itself or beside the conversation --------------------------------------------
@dataclass
class Producers:
    """Everything besides a person that puts work on the bus or the registry: cron and the heartbeat
    (the triggers), sub-agents, MCP tool servers; and the control of sessions they share."""

    sessions: SessionControl
    cron: CronService
    heartbeat: Heartbeat
    triggers: Triggers
    subagents: Subagents
    mcp: McpManager


def build_producers(paths: Paths, settings: Settings, state: State, talk: Conversation) -> Producers:
    """Cron jobs and sub-agents bring their tools (`cron`, `spawn`); MCP servers' tools join the
    registry once each server is up (docs/mcp.md)."""
    sessions = SessionControl(talk.loop, state.sessions, talk.context, talk.background)
    cron = CronService(CronStore(state.db, history=settings.cron.history), state.bus, state.events, settings.cron,
                       result_of=lambda key, run_id: run_result(state.sessions, key, run_id), busy=sessions.busy)
    talk.tools.add(CronTool(cron))
    # sub-agents: children run the same loop on their own logs, with fewer tools and a budget
    subagents = Subagents(settings.subagents, parent=talk.loop, sessions=state.sessions, bus=state.bus,
                          events=state.events, pending=paths.subagents, fsync=settings.state.fsync)
    if settings.subagents.enabled:
        talk.tools.add(Spawn(subagents))
    mcp = McpManager(settings.mcp, talk.tools, workspace=state.workspace.root, logs=paths.logs,
                     users=mcp_users(state.roster, settings.mcp.servers))  # each agent's in its own workspace
    heartbeat = Heartbeat(settings.heartbeat, workspace=state.workspace.root, tasks=state.tasks,
                          sessions=state.sessions, bus=state.bus, events=state.events, busy=sessions.busy,
                          agents={agent.session_key(settings.heartbeat.session): agent.workspace  # each its own
                                  for agent in state.roster.agents.values() if not agent.default},
                          agent_deliver=heartbeat_deliver(state.roster, settings.heartbeat.session))
    triggers = Triggers(cron=cron, heartbeat=heartbeat, cron_settings=settings.cron,
                        heartbeat_settings=settings.heartbeat)
    return Producers(sessions=sessions, cron=cron, heartbeat=heartbeat, triggers=triggers, subagents=subagents, mcp=mcp)


def run_result(sessions: SessionManager, session_key: str, run_id: str) -> str:
    """A finished run's answer, for cron's run history."""
    return sessions.get(session_key).run_result(run_id) if sessions.exists(session_key) else ""


# what the outside may use ----------------------------------------------------------------------------
def build_services(settings: Settings, state: State, approvals: ApprovalBroker, talk: Conversation,
                   producers: Producers) -> Services:
    """The narrow surface channels and gateway methods get (agent/services.py), chat commands included."""
    status = Health()
    tasks = TaskControl(state.tasks, producers.sessions, state.events)
    commands = CommandRouter(agent_name=settings.agent.name, sessions=producers.sessions, tasks=tasks, status=status,
                             checkpoints=talk.checkpoints, usage=state.usage)
    if len(state.roster.agents) > 1:  # each agent answers /start and /status with its own name and model
        commands.identity = agent_identity(state.roster, settings.agent)
    return Services(intake=state.bus, sessions=producers.sessions, tasks=tasks, approvals=approvals,
                    cron=producers.cron, events=state.events, status=status, commands=commands,
                    checkpoints=talk.checkpoints, usage=state.usage, agents=state.roster,
                    device_links=DeviceLinks(settings.channels))


# the loop's hooks: one table ------------------------------------------------------------------------
@dataclass(frozen=True)
class Hook:
    """One extension of the loop: the list it joins (`point`), the callable, and why it sits where it does."""

    point: str
    fn: Callable[..., Any]
    why: str


def hook_pipeline(state: State, talk: Conversation, watch: Supervision, producers: Producers,
                  on_event: Callable[[Any], None]) -> list[Hook]:
    """Every hook of the daemon, in the order it runs at its point. Within a point the order is the
    order below; the points themselves run where the loop calls them (agent/loop.py)."""
    checkpoints, background, tracker = talk.checkpoints, talk.background, watch.tracker
    hooks: list[Hook | None] = [
        # events, in order: written down, then acted on, then shown
        Hook("events", state.trace, "every event to the session's trace file first"),
        Hook("events", tracker.on_event, "a turn's end counts toward the current task's reminder"),
        Hook("events", producers.cron.on_event, "a cron run's end is recorded with its status"),
        Hook("events", on_event, "gateway clients see an event after the daemon acted on it"),
        # every record appended to a session log
        Hook("sessions.observers", checkpoints.tapes.on_append,
             "the tape records a model answer or tool result before a checkpoint can name it"),
        Hook("sessions.observers", checkpoints.on_append, "a checkpoint after the records it covers"),
        # around each tool call
        Hook("tools.interceptors", ToolReplay(checkpoints.tapes, state.sessions.loaded),
             "a restored or forked branch answers tool calls from the tape instead of running them"),
        Hook("tools.result_hooks", tracker.remind,
             "a task change is announced, a stale task reminded, on the tool result"),
        # what the context adds to each request
        Hook("context.contributors", task_status_line(state.tasks), "the current task's state heads each user turn"),
        Hook("context.contributors", watch.restatement, "then, on long tasks, who the agent is and the goal"),
        Hook("context.followups", watch.restatement, "the restatement again before every later request of the run"),
        Hook("context.injectors", background.inject, "background results join before the next model call"),
        # the loop's own points
        Hook("loop.skip_if", background.skip_wake, "a wake-up whose result an earlier run already told: no model call"),
        Hook("loop.after_turn", watch.drift, "drift control after each turn with tools (it may end the run)"),
        Hook("loop.before_final", watch.completeness, "a multi-step answer is checked before it goes out"),
        Hook("loop.after_run", watch.consolidation, "memory first, while the run's session is still as it ran"),
        Hook("loop.after_run", watch.drift_restore.after_run,
             "a restore decided in the run is carried out once consolidation is done with the session")
        if watch.drift_restore is not None else None,
        Hook("loop.after_run", background.after_run,
             "a result that came during the run's last model call wakes the session, last"),
        Hook("loop.reply_filters", producers.heartbeat.reply_filter,
             "a heartbeat's bare HEARTBEAT_OK (or its error) reaches nobody"),
    ]
    return [hook for hook in hooks if hook is not None]


def install_hooks(hooks: list[Hook], state: State, talk: Conversation) -> None:
    """Each point is one list (or the event hub's subscribe); a hook naming an unknown point is a wiring bug."""
    points: dict[str, Callable[[Any], Any]] = {
        "events": state.events.subscribe,
        "sessions.observers": state.sessions.observers.append,
        "tools.interceptors": talk.tools.interceptors.append,
        "tools.result_hooks": talk.tools.result_hooks.append,
        "context.contributors": talk.context.contributors.append,
        "context.followups": talk.context.followups.append,
        "context.injectors": talk.context.injectors.append,
        "loop.skip_if": talk.loop.skip_if.append,
        "loop.after_turn": talk.loop.after_turn.append,
        "loop.before_final": talk.loop.before_final.append,
        "loop.after_run": talk.loop.after_run.append,
        "loop.reply_filters": talk.loop.reply_filters.append,
    }
    for hook in hooks:
        points[hook.point](hook.fn)


def task_status_line(tasks: TaskStore) -> Callable[[Session, str | None], str | None]:
    """The context line naming the current task of the run's person and where it stands."""
    def line(session: Session, person: str | None) -> str | None:
        task = tasks.current_for(session, person)
        return f"task: {task.status_line()}" if task else None
    return line
