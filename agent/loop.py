"""The AgentLoop: inbound message -> (context -> model -> tools)* -> reply on the bus.

It stays small on purpose. Everything else plugs in around it: tools (registry), what the
model sees (context builder and its runtime contributors), who watches (event hub
subscribers), and how replies leave (the bus). Sessions run concurrently under a global cap
and strictly serially within a session (lanes).

Crash safety comes from the session log: a user turn is recorded once per inbound id; each
tool call is journalled (intent before, done after); so a message replayed after a restart
continues where its log stopped — a completed call is never executed again, and a call with an
intent but no result is resolved as its tool declares (agent/recovery/tool_calls.py): run again,
checked and finished, or reported unknown to the model and, under the answer, to the user.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from clawgate.config.schema import AgentSettings
from clawgate.workspace.guard import WorkspaceGuard
from clawgate.workspace.users import OWNER, Workspaces

from .bus import InboundMessage, MessageBus, OutboundMessage
from .context.builder import ContextBuilder, Mode
from .core.errors import WriteRefused
from .core.events import DeltaBuffer, EventHub
from .core.lanes import Lanes
from .providers.base import ModelResponse, Provider, ProviderError
from .session import Session, SessionManager
from .trust.taint import Taint
from .recovery.tool_calls import crash_point, resolve, unknown_notice, unknown_outcomes
from .tools import ToolContext, ToolOutcome, ToolRegistry

log = logging.getLogger(__name__)

CANCELLED_QUEUED = "Cancelled before it started (stopped by /stop)."
TRUNCATED_CALL = (
    "Not run: this tool call was cut off by the output limit before its arguments were complete. "
    "Make it smaller: write large files in parts (write_file for the first part, then edit_file to append)."
)


@dataclass
class Verdict:
    """What a before_final hook decides about an answer: keep the run going (it appended a turn
    for the model), or replace the answer's text (e.g. with a report); None from a hook: accept."""

    resume: bool = False
    text: str | None = None


class AgentLoop:
    def __init__(self, *, bus: MessageBus, sessions: SessionManager, provider: Provider, tools: ToolRegistry,
                 context: ContextBuilder, events: EventHub, settings: AgentSettings, workspace: WorkspaceGuard,
                 workspaces: Workspaces | None = None) -> None:
        """`workspaces` gives each guest a workspace of their own (the daemon always passes it);
        without it every run works in `workspace`."""
        self.bus = bus
        self.sessions = sessions
        self.provider = provider
        self.tools = tools
        self.context = context
        self.events = events
        self.settings = settings
        self.workspace = workspace
        self.workspaces = workspaces
        self.lanes: Lanes[str, InboundMessage] = Lanes(self._handle, settings.max_concurrent)
        self._stopping: dict[str, str | None] = {}  # session -> the stop command's message (its answer goes there)
        self._responding: dict[str, InboundMessage] = {}  # session -> the message being answered
        # Extension points, so capabilities live beside the loop rather than inside it:
        # reply_filters may suppress a reply (a heartbeat's bare HEARTBEAT_OK);
        # after_run hooks run in the session's lane once a reply is queued (consolidation).
        self.reply_filters: list[Callable[[InboundMessage, str, str], bool]] = []
        self.after_run: list[Callable[[Session, InboundMessage], Awaitable[None]]] = []
        # after_turn hooks run once a turn's tool calls ran; one may end the run with a final text
        # (drift control's hard limits). before_final hooks see the answer given without tools
        # (the completeness check).
        self.after_turn: list[Callable[[Session, InboundMessage, ModelResponse], Awaitable[str | None]]] = []
        self.before_final: list[Callable[[Session, InboundMessage, str], Awaitable[Verdict | None]]] = []
        # skip_if gates drop a message before any model call, without a reply (a wake-up whose news
        # an earlier run already told).
        self.skip_if: list[Callable[[Session, InboundMessage], bool]] = []

    # intake ------------------------------------------------------------------
    async def run(self) -> None:
        while True:
            msg = await self.bus.next_inbound()
            self.lanes.submit(msg.session_key, msg)

    def busy(self, session_key: str) -> bool:
        return self.lanes.busy(session_key)

    def queued(self, session_key: str) -> int:
        """Messages of this session waiting behind the running one."""
        return max(self.lanes.pending(session_key) - (1 if self.lanes.busy(session_key) else 0), 0)

    def stop_current(self, session_key: str, *, user: str | None = None, reply_to: str | None = None) -> bool:
        """Cancel the session's running turn cleanly (the user asked); queued messages still run.
        Only a turn being answered can be stopped, never the bookkeeping after it. `user`: only a turn
        run for this person (OWNER or "<channel>:<sender>", see run_user); None: whoever's it is.
        `reply_to`: the platform message of the stop command, which the "Stopped." answers."""
        running = self._responding.get(session_key)
        if running is None or (user is not None and self.person_of(running) != user):
            return False
        self._stopping[session_key] = reply_to
        if not self.lanes.cancel_current(session_key):
            self._stopping.pop(session_key, None)
            return False
        return True

    def cancel_queued(self, session_key: str, user: str, *, reply_to: str | None = None) -> int:
        """Take this person's messages waiting in the session's queue out of it, each answered at once
        with a notice (never run, never in the conversation); returns how many."""
        taken = self.lanes.take_queued(session_key, lambda msg: self.person_of(msg) == user)
        for msg in taken:
            deliver = msg.metadata.get("deliver", {"channel": msg.channel, "chat_id": msg.chat_id})
            if deliver is None:  # a message that asked for no reply is only marked answered
                self.bus.settle(msg.id)
                continue
            self.bus.publish_outbound(OutboundMessage(
                channel=deliver["channel"], chat_id=str(deliver["chat_id"]), text=CANCELLED_QUEUED, kind="notice",
                session_key=msg.session_key, in_reply_to=msg.id, metadata=_reply_metadata(msg, reply_to)),
                answers=msg.id)
        return len(taken)

    def person_of(self, msg: InboundMessage) -> str:
        """Whose message it is (the person whose /stop may cancel it): run_user's answer."""
        return run_user(msg, self.sessions.get(msg.session_key))

    # one message -------------------------------------------------------------
    async def _handle(self, key: str, msg: InboundMessage) -> None:
        started = time.perf_counter()
        session: Session | None = None
        answers: str | None = None
        refused = False
        self._responding[key] = msg
        try:
            # Inside the try: a session that cannot be opened (a bad key, an unreadable log) must
            # still answer, or the message stays unanswered and replays on every start.
            session = self.sessions.get(key)
            text, kind = await self._answer(session, msg)
        except asyncio.CancelledError:
            if key not in self._stopping:
                raise  # shutting down: leave the message unanswered so it is replayed on start
            self._note(session, "cancelled", run_id=msg.id)
            text, kind, answers = "Stopped.", "notice", self._stopping.get(key)
        except WriteRefused as exc:  # a fleet worker that lost the session: the new holder answers, not this one
            log.warning("run %s of session %s stopped here: %s", msg.id, key, exc)
            refused = True
        except Exception as exc:  # a bug or an I/O failure still gets the person an answer
            log.exception("run %s of session %s failed", msg.id, key)
            self._note(session, "run_failed", run_id=msg.id, error=f"{type(exc).__name__}: {exc}"[:300])
            text, kind = (f"Something went wrong while working on this ({type(exc).__name__}); the details are "
                          "in the daemon log. Try again, or rephrase the request."), "error"
        finally:
            self._responding.pop(key, None)
            self._stopping.pop(key, None)
        if refused:
            return
        await self._reply(msg, text, kind, answers)
        self.events.emit("run_end", session=key, run_id=msg.id, kind=kind,
                         duration_ms=round((time.perf_counter() - started) * 1000, 1))
        if session is None:
            return
        for hook in self.after_run:
            try:
                await hook(session, msg)
            except Exception:
                log.exception("after-run hook %s failed for %s", getattr(hook, "__name__", hook), key)

    @staticmethod
    def _note(session: Session | None, name: str, **fields: Any) -> None:
        """Record how a run ended, if the log can take it: the reply matters more than the note."""
        if session is None:
            return
        try:
            session.append("event", name=name, **fields)
        except WriteRefused as exc:
            log.warning("%s not recorded: %s", name, exc)
        except Exception:
            log.exception("could not record %s in session %s", name, session.key)

    async def _answer(self, session: Session, msg: InboundMessage) -> tuple[str, str]:
        if any(skip(session, msg) for skip in self.skip_if):
            return "", "skipped"
        attempts = await self.bus.begin_attempt_async(msg.id, session.progress)
        if attempts > self.settings.max_message_attempts:
            session.append("event", name="poison_message", run_id=msg.id, attempts=attempts)
            return (f"This message was set aside: processing it was interrupted {attempts - 1} times in a row "
                    "without progress (the daemon crashed or was killed each time). Send it again in a simpler "
                    "form, or check the logs."), "error"
        return await self.respond(session, msg, msg.metadata.get("mode", "normal"))

    async def _reply(self, msg: InboundMessage, text: str, kind: str, answers: str | None = None) -> None:
        """Queue the reply where the message asks (metadata "deliver"), or nowhere. `answers`: the
        platform message of a command this reply also answers (a /stop's "Stopped.")."""
        deliver = msg.metadata.get("deliver", {"channel": msg.channel, "chat_id": msg.chat_id})
        if deliver is None or kind == "skipped" or not all(f(msg, text, kind) for f in self.reply_filters):
            self.bus.settle(msg.id)
            return
        out = OutboundMessage(channel=deliver["channel"], chat_id=str(deliver["chat_id"]), text=text,
                              session_key=msg.session_key, in_reply_to=msg.id, kind=kind,
                              metadata=_reply_metadata(msg, answers))
        await self.bus.publish_outbound_async(out, answers=msg.id)

    async def respond(self, session: Session, msg: InboundMessage, mode: Mode = "normal") -> tuple[str, str]:
        """Run the tool loop for `msg` and return (final text, kind); calls a restart left with an
        unknown outcome are named under the answer, so the person knows to check them."""
        text, kind = await self._respond(session, msg, mode)
        if kind == "reply":
            text += unknown_notice(unknown_outcomes(session, msg.id))
        return text, kind

    async def _respond(self, session: Session, msg: InboundMessage, mode: Mode) -> tuple[str, str]:
        recovering = msg.id in session.inbound_seqs
        if recovering:
            finished = session.final_answer(msg.id)
            if finished is not None:
                return finished, "reply"
        else:
            origin = {"deliver": msg.metadata["deliver"]} if msg.metadata.get("deliver") else {}
            if msg.attachments:  # a photo the model sees (session.user_blocks)
                origin["attachments"] = msg.attachments
            person = run_user(msg, session)  # whose run: in a shared conversation it sees only its own work
            session.append("user", text=msg.text, inbound_id=msg.id, channel=msg.channel, chat_id=msg.chat_id,
                           sender_id=msg.sender_id, owner=acts_for_owner(msg), user=person, **origin,
                           context=self.context.runtime_block(session, channel=msg.channel, chat_id=msg.chat_id,
                                                             sender_id=msg.sender_id, meta=msg.metadata, person=person))
        # Triggered runs (cron, heartbeat, resume) act for the person they deliver to: approvals
        # and the message tool go there, not to the trigger's own channel name.
        where = msg.metadata.get("deliver") or {"channel": msg.channel, "chat_id": msg.chat_id}
        spaces = self.workspaces.of(session.key) if self.workspaces is not None else None  # the session's agent's
        user = run_user(msg, session) if spaces is not None else OWNER  # ctx.user names whose `workspace` it is
        ctx = ToolContext(session_key=session.key, channel=where["channel"], chat_id=str(where["chat_id"]),
                          sender_id=msg.sender_id, run_id=msg.id, send=self.bus.publish_outbound, owner=acts_for_owner(msg),
                          workspace=self.workspace if spaces is None else spaces.guard(user), user=user,
                          scratch=None if spaces is None else spaces.scratch(user),
                          taint=Taint.of_message(msg.text, msg.metadata))
        if recovering:  # what the run took in before a restart still taints it
            ctx.taint.replay(_run_records(session, msg.id))
        if recovering and session.pending_tool_calls():
            await self._run_tools(session, session.pending_tool_calls(), ctx, recovering=True)

        for _ in range(self.settings.max_iterations):
            request = self.context.build(session, mode)
            if msg.metadata.get("model"):  # a producer may ask for its own model (a cheaper heartbeat)
                request.model = str(msg.metadata["model"])
            deltas = self._delta_sink(session.key, msg.id)
            try:
                response = await self.provider.complete(request, on_text=deltas)
            except ProviderError as exc:
                session.append("event", name="provider_error", run_id=msg.id, error=str(exc))
                return str(exc), "error"
            finally:
                deltas.flush()
            session.append("assistant", content=response.content or [{"type": "text", "text": "(no answer)"}],
                           run_id=msg.id, usage=response.usage)
            self.events.emit("turn_end", session=session.key, run_id=msg.id, usage=response.usage,
                             latency_ms=round(response.latency_ms, 1), tool_calls=len(response.tool_calls))
            calls = response.tool_calls
            if not calls:
                final = await self._final(session, msg, response.text.strip() or "(The model returned an empty answer.)")
                if final is None:
                    continue
                return final, "reply"
            if response.stop_reason == "max_tokens":
                # The output limit cut the call off mid-arguments: never run half a call.
                session.append("tool_results", run_id=msg.id, results=[
                    {"tool_use_id": c["id"], "content": TRUNCATED_CALL, "is_error": True} for c in calls])
                continue
            await self._run_tools(session, calls, ctx, recovering=recovering)
            for hook in self.after_turn:
                if (stop := await hook(session, msg, response)) is not None:
                    return stop, "reply"
        session.append("event", name="iteration_limit", run_id=msg.id, limit=self.settings.max_iterations)
        return (f"I stopped after {self.settings.max_iterations} model calls without finishing this request, "
                "so the work is incomplete. Reply 'continue' to let me keep going, or narrow the request."), "reply"

    async def _final(self, session: Session, msg: InboundMessage, answer: str) -> str | None:
        """The answer after the before_final hooks; None when one gave the model more to do."""
        for hook in self.before_final:
            verdict = await hook(session, msg, answer)
            if verdict is not None and verdict.resume:
                return None
            if verdict is not None and verdict.text is not None:
                answer = verdict.text
        return answer

    async def _run_tools(self, session: Session, calls: list[dict[str, Any]], ctx: ToolContext, *, recovering: bool) -> None:
        # Calls run in order, unless every tool of the turn may run alongside the others (spawn).
        if self.tools.concurrent(calls):
            results = list(await asyncio.gather(*(self._run_tool(session, c, ctx, recovering) for c in calls)))
        else:
            results = [await self._run_tool(session, call, ctx, recovering) for call in calls]
        session.append("tool_results", results=results, run_id=ctx.run_id)

    async def _run_tool(self, session: Session, call: dict[str, Any], ctx: ToolContext, recovering: bool) -> dict[str, Any]:
        outcome = await resolve(self.tools, self.events, session, call, ctx) if recovering else None
        if outcome is not None:  # a result recorded before the restart taints the run as it did then
            ctx.taint.take_in(outcome.content, call["name"])
        if outcome is None:
            # A call whose outcome matters after a crash keeps its intent through a power cut.
            durable = self.tools.has_side_effects(call["name"]) or self.tools.recovery(call["name"]) != "rerun"
            session.append("tool_intent", durable=durable, id=call["id"], name=call["name"], input=call.get("input"))
            if durable:  # the intent survives a power cut before the effect can happen
                await session.flush()
            crash_point(f"after_intent:{call['name']}")
            outcome = await self.tools.execute(call, ctx)
            crash_point(f"after_effect:{call['name']}")
            session.append("tool_done", durable=durable, id=call["id"], content=outcome.content,
                           is_error=outcome.is_error, status=outcome.status)
        return {"tool_use_id": call["id"], "content": outcome.content, "is_error": outcome.is_error}

    def _delta_sink(self, session_key: str, run_id: str) -> DeltaBuffer:
        return DeltaBuffer(lambda text: self.events.emit("text_delta", session=session_key, run_id=run_id, text=text),
                           lambda: self.events.emit("text_restart", session=session_key, run_id=run_id))


def acts_for_owner(msg: InboundMessage) -> bool:
    """Set by whoever published the message (a channel that knows its owners, a trigger that knows
    whose job it runs), never by what the person wrote: absent means a guest."""
    return msg.metadata.get("owner") is True


# Messages no person typed: the rights and workspace of their run come from the message's metadata
# or, failing that, from the last person heard from in the session.
INTERNAL_CHANNELS = frozenset({"cron", "heartbeat", "recovery", "background", "subagent", "drift", "hook"})


def run_user(msg: InboundMessage, session: Session) -> str:
    """Whose workspace a run works in: OWNER for the owner, "<channel>:<sender>" for a guest. Set by the
    publisher (metadata "user": a cron job's creator, a sub-agent's person), else the person who wrote
    the message, else (a message nobody typed) the last person heard from in the session. Never the
    owner's for a guest's run: a guest with no known identity gets a workspace of the session's own."""
    if acts_for_owner(msg):
        return OWNER
    named = msg.metadata.get("user")
    if isinstance(named, str) and named:
        return named
    if msg.channel not in INTERNAL_CHANNELS:
        where = msg.metadata.get("deliver") or {"channel": msg.channel}
        return f"{where['channel']}:{msg.sender_id}"
    for record in reversed(session.records):
        if record.get("kind") == "user" and isinstance(record.get("user"), str) and record.get("user"):
            return str(record["user"])
    return f"session:{session.key}"


def session_user(session: Session) -> str:
    """The person a session's runs last acted for, as recorded with each user turn (OWNER for the owner).
    A log from before per-person workspaces: the owner only if its last user turn was the owner's."""
    for record in reversed(session.records):
        if record.get("kind") == "user" and isinstance(record.get("user"), str):
            return str(record["user"])
    return OWNER if session.acts_for_owner() else f"session:{session.key}"


def _run_records(session: Session, run_id: str) -> list[dict[str, Any]]:
    """The records a run appended after its user turn (runs of a session never interleave)."""
    for index in range(len(session.records) - 1, -1, -1):
        record = session.records[index]
        if record.get("kind") == "user" and record.get("inbound_id") == run_id:
            return session.records[index + 1:]
    return []


def _reply_metadata(msg: InboundMessage, answers: str | None = None) -> dict[str, Any]:
    """What a channel needs to place a reply (cron, heartbeat: where it came from); `command_message`: the
    platform message of the command the reply answers (a /stop), which a platform that binds answers to
    commands (Discord's interactions) answers with it."""
    keep = ("message_id", "thread_id", "reply_to", "cron", "heartbeat", "hook")
    meta = {k: msg.metadata[k] for k in keep if k in msg.metadata}
    if answers is not None:
        meta["command_message"] = answers
    return meta
