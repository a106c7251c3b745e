"""Sub-agents (orchestrator-workers): a child run with its own transcript, prompt, tools and budget.

Why a child at all: the searching, trying and debugging of a sub-task should not fill the main
agent's context; the main agent needs the conclusion. So a child runs the ordinary tool loop
(agent/loop.py, reused, not copied) on its OWN session log — key `sub-<digest>@<parent>`,
derived from the parent session and the spawn call's id — with the context builder's
"subagent" prompt (platform rules, AGENTS.md/TOOLS.md, the runtime line: no memory, no
skills), fewer tools (never cron, message, task or memory writes; spawn only while the depth
limit allows), and a turn and token budget. Only its final answer, capped, goes back.

Crash safety comes from the child's log, like any run's: its first record (`subagent_start`)
holds the budget, its last (`subagent_result`, fsynced) the answer handed back. Running the
same spawn call again (the parent replayed after a restart) finds the same child: a finished
child returns its recorded answer and is never re-run; an unfinished one continues from its
log (completed tool calls are never repeated). Background children are also listed in
state/subagents/ until their report is on the bus, so a restart resumes them.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Callable

from clawgate.config.schema import SubagentSettings

from ..bus import InboundMessage, MessageBus
from ..context.builder import ContextBuilder
from ..core.events import EventHub
from ..core.fsio import atomic_write_text
from ..loop import AgentLoop
from ..providers.base import ModelResponse, text_of
from ..session import InvalidSessionKey, Record, Session, SessionManager, check_session_key, session_file_name
from ..tools import Tool, ToolContext, ToolError, ToolOutcome, ToolRegistry
from ..trust.untrusted import wrap_untrusted

log = logging.getLogger(__name__)
CHANNEL = "subagent"  # the channel name of a background child's report on the bus
# Tools a child never gets: outward messages, schedules, the parent's plan, the memory that steers
# every session, skills (its prompt has no index). spawn is added back while the depth allows.
WITHHELD = {"spawn": "the depth limit (subagents.max_depth) does not let a sub-agent start sub-agents",
            "cron": "sub-agents cannot schedule jobs", "message": "sub-agents cannot send messages; put it in your answer",
            "task": "sub-agents do not keep task plans; the main agent does", "memory_append": "sub-agents do not write memory",
            "memory_replace": "sub-agents do not write memory", "load_skill": "sub-agents do not load skills"}
TRIGGER_CHANNELS = ("cron", "heartbeat", "recovery", CHANNEL)
BACKGROUND_PER_SLOT = 4  # background children that may wait for a slot, per slot (subagents.max_concurrent)


@dataclass
class ChildSpec:
    """One spawn call: who asked, for whom, what, and within which budget (also the pending file)."""

    parent_key: str
    parent_run: str
    call_id: str
    task: str
    depth: int  # the child's depth: 1 for a child of the main agent
    turns: int
    tokens: int
    channel: str
    chat_id: str
    sender_id: str
    owner: bool
    background: bool = False
    user: str = ""  # whose workspace the parent run worked in (workspace/users.py); the child's too
    tainted: str = ""  # the untrusted content the parent run had taken in: the child starts tainted

    @property
    def key(self) -> str:
        return child_key(self.parent_key, self.call_id)


@dataclass
class ChildResult:
    key: str
    summary: str
    status: str  # done | budget | error
    turns: int
    usage: dict[str, int]
    replayed: bool = False  # recorded before a restart, not run again


def child_key(parent: str, call_id: str) -> str:
    """The child's session key: stable for a (parent session, call id), so a replay finds it again."""
    digest = hashlib.sha256(f"{parent}\n{call_id}".encode()).hexdigest()[:12]
    try:
        return check_session_key(f"sub-{digest}@{parent}")
    except InvalidSessionKey:  # a parent key near the length limit
        return f"sub-{digest}"


class ChildRegistry(ToolRegistry):
    """The parent's tools minus the withheld ones; calling one of those gets a clear refusal.
    Approvals a child asks for are shown on the main session, where someone is watching."""

    def __init__(self, tools: list[Tool], *, root_of: Callable[[str], str], **parts: Any) -> None:
        super().__init__(tools, **parts)
        self.root_of = root_of

    async def _approve(self, tool: Tool, args: Any, ctx: ToolContext, reason: str) -> tuple[bool, str]:
        ctx = replace(ctx, session_key=self.root_of(ctx.session_key))
        return await super()._approve(tool, args, ctx, f"{reason} (asked by a sub-agent)")

    async def _execute(self, name: str, raw_args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        if self.get(name) is None and name in WITHHELD:
            return ToolOutcome(f"error: {name} is not available to a sub-agent: {WITHHELD[name]}\n"
                               "fix: do the work with your own tools, or say in your answer what the main agent "
                               "should do", True, "denied")
        return await super()._execute(name, raw_args, ctx)


class Subagents:
    """Runs children for the spawn tool; built by the composition root from the main loop's parts."""

    def __init__(self, settings: SubagentSettings, *, parent: "AgentLoop", sessions: SessionManager, bus: MessageBus,
                 events: EventHub, pending: Path, fsync: bool = True) -> None:
        self.settings = settings
        self.parent = parent
        self.sessions = sessions
        self.bus = bus
        self.events = events
        self.pending = pending
        self.fsync = fsync
        self._loops: dict[int, AgentLoop] = {}
        self._slots: dict[int, asyncio.Semaphore] = {}
        self._background: dict[str, asyncio.Task[None]] = {}
        self._parents: dict[str, str] = {}  # background child -> its parent session

    # budgets -----------------------------------------------------------------------------
    def budget(self, turns: int | None, tokens: int | None) -> tuple[int, int]:
        """A call may ask for less than the configured budget, never more."""
        cap = self.settings
        return min(turns or cap.max_turns, cap.max_turns), min(tokens or cap.max_tokens, cap.max_tokens)

    # running -----------------------------------------------------------------------------
    async def run(self, spec: ChildSpec) -> ChildResult:
        """Run (or resume, or recall) the child of `spec` and return what goes back to the parent."""
        session = self.sessions.get(spec.key)
        recorded = _recorded(session)
        if recorded is not None:
            result = _result_of(spec.key, recorded, replayed=True)
            self._ended(spec, result)
            return result
        if _start_record(session) is None:
            session.append("event", durable=True, name="subagent_start", parent=spec.parent_key, parent_run=spec.parent_run,
                           call_id=spec.call_id, depth=spec.depth, task=spec.task, background=spec.background,
                           budget={"turns": spec.turns, "tokens": spec.tokens}, owner=spec.owner)
        self.events.emit("subagent_start", session=spec.parent_key, run_id=spec.parent_run, child=spec.key,
                         depth=spec.depth, background=spec.background, task=spec.task[:200],
                         budget={"turns": spec.turns, "tokens": spec.tokens})
        msg = InboundMessage(id=_run_id(spec), channel=spec.channel, chat_id=spec.chat_id, sender_id=spec.sender_id,
                             session_key=spec.key, text=spec.task,
                             metadata={"owner": spec.owner, "user": spec.user, "tainted": spec.tainted})
        async with self._slot(spec.depth):
            try:
                text, kind = await self._loop(spec.depth).respond(session, msg, "subagent")
            except asyncio.CancelledError:
                raise  # shutdown or /stop: the log stays, and the next run of this call resumes it
            except Exception as exc:  # a bug in the child still hands the parent an answer
                log.exception("sub-agent %s failed", spec.key)
                text, kind = f"The sub-agent failed ({type(exc).__name__}: {str(exc)[:200]}); its work is incomplete.", "error"
        stopped = any(r.get("name") == "subagent_budget" and r.get("run_id") == msg.id for r in session.records[-8:])
        turns, usage = run_usage(session, msg.id)
        status = "budget" if stopped else ("error" if kind == "error" else "done")
        record = session.append("event", durable=True, name="subagent_result", run_id=msg.id, status=status,
                                text=self._cap(text, spec.key), turns=turns, usage=usage)
        result = _result_of(spec.key, record, replayed=False)
        self._ended(spec, result)
        return result

    def start_background(self, spec: ChildSpec) -> None:
        """List the child as pending (durably), then run it off the parent's lane; it reports on the bus."""
        path = self.pending / f"{spec.key.split('@', 1)[0]}.json"
        limit = BACKGROUND_PER_SLOT * self.settings.max_concurrent
        if spec.key not in self._background and not path.exists() and len(self._background) >= limit:
            # a run talked into spawning without end (a web page's instructions) meets a wall, not a bill
            raise ToolError(f"{len(self._background)} background sub-agents are already running (the limit is {limit})",
                            "wait for their reports before starting more, or run this one without background")
        if not path.exists():
            self.pending.mkdir(mode=0o700, parents=True, exist_ok=True)  # user-only, like all state
            atomic_write_text(path, json.dumps(asdict(spec)), fsync=self.fsync)
        self._launch(spec, path)

    def resume(self, include: Callable[[str], bool] = lambda session: True) -> list[str]:
        """On start: continue every background child that has not reported yet. `include`: the
        parent sessions to resume for (a fleet's worker: those of a partition it just took)."""
        resumed = []
        for path in sorted(self.pending.glob("sub-*.json")) if self.pending.is_dir() else []:
            try:
                spec = ChildSpec(**json.loads(path.read_text()))
            except FileNotFoundError:
                continue  # reported meanwhile by the process running it
            except (OSError, ValueError, TypeError) as exc:
                log.error("background sub-agent file %s is unreadable (%s); moved aside", path, exc)
                path.rename(path.with_suffix(".corrupt"))
                continue
            if not include(spec.parent_key) or spec.key in self._background:
                continue
            self._launch(spec, path)
            resumed.append(spec.key)
        return resumed

    def running(self) -> list[str]:
        """The background children running here (their session keys)."""
        return sorted(self._background)

    def release(self, include: Callable[[str], bool]) -> list[str]:
        """These parents' work moved to another process (a fleet's partition was lost): stop their
        background children here; their pending files resume them where the work went."""
        stopped = [key for key in self._background if include(self._parents.get(key, key))]
        for key in stopped:
            self._background.pop(key).cancel()
            self._parents.pop(key, None)
        return stopped

    async def close(self) -> None:
        """Shutdown: stop background children; their logs and pending files resume them next start."""
        tasks = list(self._background.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _launch(self, spec: ChildSpec, path: Path) -> None:
        if spec.key in self._background:  # the parent's spawn replayed while the child already runs
            return
        task = asyncio.create_task(self._run_background(spec, path), name=f"subagent:{spec.key}")
        self._background[spec.key] = task
        self._parents[spec.key] = spec.parent_key
        task.add_done_callback(lambda done: self._forget(spec.key, done))

    def _forget(self, key: str, task: "asyncio.Task[None]") -> None:
        if self._background.get(key) is task:  # not a newer run of the same child (its partition came back)
            del self._background[key]
            self._parents.pop(key, None)

    async def _run_background(self, spec: ChildSpec, path: Path) -> None:
        try:
            result = await self.run(spec)
        except asyncio.CancelledError:
            raise
        except Exception:  # e.g. a child log that cannot be written: keep it pending for the next start
            log.exception("background sub-agent %s failed; it is retried on the next start", spec.key)
            return
        # The report's id is fixed, so a restart between publishing and unlisting is a duplicate, dropped.
        self.bus.publish_inbound(InboundMessage(
            id=f"subagent:{spec.key}", channel=CHANNEL, chat_id=spec.chat_id, sender_id=spec.sender_id,
            session_key=spec.parent_key, text=report_text(spec, result),
            metadata={"owner": spec.owner, "user": spec.user, "subagent": {"child": spec.key, "status": result.status},
                      "deliver": None if spec.channel in TRIGGER_CHANNELS else {"channel": spec.channel, "chat_id": spec.chat_id}},
        ))
        path.unlink(missing_ok=True)

    def _ended(self, spec: ChildSpec, result: ChildResult) -> None:
        """Link the child's transcript from the parent's log, and tell the event stream."""
        transcript = f"sessions/{session_file_name(result.key)}"
        try:
            self.sessions.get(spec.parent_key).append(
                "event", name="subagent_end", child=result.key, transcript=transcript, call_id=spec.call_id,
                status=result.status, turns=result.turns, usage=result.usage, replayed=result.replayed)
        except Exception:
            log.exception("could not link sub-agent %s from session %s", result.key, spec.parent_key)
        self.events.emit("subagent_end", session=spec.parent_key, run_id=spec.parent_run, child=result.key,
                         status=result.status, summary_chars=len(result.summary), turns=result.turns, usage=result.usage,
                         replayed=result.replayed, background=spec.background)

    def _cap(self, text: str, key: str) -> str:
        cap = self.settings.summary_chars
        if len(text) <= cap:
            return text
        return text[:cap] + f"\n[… {len(text) - cap} more characters in the sub-agent's transcript, session {key}]"

    def _slot(self, depth: int) -> asyncio.Semaphore:
        """One cap per nesting level, so a child waiting for its own children never starves them."""
        if depth not in self._slots:
            self._slots[depth] = asyncio.Semaphore(self.settings.max_concurrent)
        return self._slots[depth]

    def _loop(self, depth: int) -> "AgentLoop":
        """The loop children of this depth run in: the main loop's parts, fewer tools, the budget hook."""
        if depth not in self._loops:
            main = self.parent
            tools = ChildRegistry([t for n in main.tools.names if n not in WITHHELD and (t := main.tools.get(n))],
                                  events=main.tools.events, audit=main.tools.audit, approvals=main.tools.approvals,
                                  result_cap=main.tools.result_cap, root_of=self.root_of)
            # the child's spawn is the parent's own tool class at the child's depth (the adapter imports us)
            spawn = main.tools.get("spawn")
            if depth < self.settings.max_depth and spawn is not None:
                tools.add(type(spawn)(self, depth=depth))  # type: ignore[call-arg]
            context = ContextBuilder(main.context.workspace, tools=tools.definitions, model=main.context.model,
                                     max_tokens=main.context.max_tokens, caps=main.context.caps,
                                     compactor=main.context.compactor)
            context.guest_root = main.context.guest_root  # a guest's child is told the guest's workspace path
            context.agent_of = main.context.agent_of  # and a child of another agent its agent's workspace and model
            context.allowed_tools = main.context.allowed_tools  # and its agent's tools only
            tools.allowed = main.tools.allowed
            settings = main.settings.model_copy(update={"max_iterations": self.settings.max_turns + 1})
            loop = AgentLoop(bus=main.bus, sessions=self.sessions, provider=main.provider, tools=tools, context=context,
                             events=main.events, settings=settings, workspace=main.workspace,
                             workspaces=main.workspaces)
            loop.after_turn.append(self._over_budget)
            self._loops[depth] = loop
        return self._loops[depth]

    def root_of(self, key: str) -> str:
        """The main session a (possibly nested) child works for, from the children's start records."""
        for _ in range(self.settings.max_depth + 1):
            start = _start_record(self.sessions.get(key)) if self.sessions.exists(key) else None
            if start is None or not start.get("parent"):
                return key
            key = str(start["parent"])
        return key

    async def _over_budget(self, session: Session, msg: InboundMessage, response: ModelResponse) -> str | None:
        """After each turn with tools: stop the child, with a summary saying so, once its budget is spent."""
        start = _start_record(session) or {}
        budget = start.get("budget") or {}
        turns, usage = run_usage(session, msg.id)
        max_turns = int(budget.get("turns") or self.settings.max_turns)
        max_tokens = int(budget.get("tokens") or self.settings.max_tokens)
        if turns < max_turns and usage["total"] < max_tokens:
            return None
        spent = (f"{turns} of {max_turns} model calls" if turns >= max_turns
                 else f"{usage['total']} of {max_tokens} tokens")
        session.append("event", name="subagent_budget", run_id=msg.id, turns=turns, tokens=usage["total"])
        last = _last_words(session, msg.id)
        return (f"Budget exceeded: the sub-agent was stopped after {spent} before it finished, so its work is "
                f"incomplete." + (f" Its last words: {last}" if last else ""))


def report_text(spec: ChildSpec, result: ChildResult) -> str:
    """What the parent model reads when a background child is done."""
    return (f"[sub-agent report] The background sub-agent {result.key} you started ({result.status}; {result.turns} "
            f"model calls, {result.usage.get('total', 0)} tokens) for the task: {spec.task[:300]}\n\n"
            f"{wrap_untrusted(f'sub-agent {result.key}', result.summary)}\n"
            "Continue from here: tell the user what matters of this result.")


def tool_result(result: ChildResult) -> str:
    """What a waiting spawn call returns: a one-line header (the transcript's address) and the summary."""
    how = "recorded before a restart, not run again; " if result.replayed else ""
    head = (f"[sub-agent {result.key}: {result.status}; {how}{result.turns} model calls, {result.usage.get('total', 0)} "
            f"tokens; transcript: sessions/{session_file_name(result.key)}]")
    return head + "\n" + wrap_untrusted(f"sub-agent {result.key}", result.summary)


def run_usage(session: Session, run_id: str) -> tuple[int, dict[str, int]]:
    """Model calls and tokens of one child run, counted from its log (so a resumed child keeps its count)."""
    turns, usage = 0, {"input": 0, "output": 0, "total": 0}
    for record in session.records:
        if record["kind"] == "assistant" and record.get("run_id") == run_id:
            turns += 1
            used = record.get("usage") or {}
            prompt = sum(int(used.get(k) or 0) for k in ("input_tokens", "cache_read_input_tokens",
                                                          "cache_creation_input_tokens"))
            usage["input"] += prompt
            usage["output"] += int(used.get("output_tokens") or 0)
    usage["total"] = usage["input"] + usage["output"]
    return turns, usage


def _run_id(spec: ChildSpec) -> str:
    return f"spawn:{spec.call_id}"


def _start_record(session: Session) -> Record | None:
    for record in session.records[:4]:
        if record["kind"] == "event" and record.get("name") == "subagent_start":
            return record
    return None


def _recorded(session: Session) -> Record | None:
    for record in reversed(session.records):
        if record["kind"] == "event" and record.get("name") == "subagent_result":
            return record
    return None


def _result_of(key: str, record: Record, *, replayed: bool) -> ChildResult:
    return ChildResult(key=key, summary=str(record.get("text") or "(no answer)"), status=str(record.get("status") or "done"),
                       turns=int(record.get("turns") or 0), usage=dict(record.get("usage") or {}), replayed=replayed)


def _last_words(session: Session, run_id: str) -> str:
    for record in reversed(session.records):
        if record["kind"] == "assistant" and record.get("run_id") == run_id:
            if said := text_of(record["content"]).strip():
                return said[:1000]
    return ""
