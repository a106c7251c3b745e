"""The correction ladder: an after-turn hook that measures drift and corrects it in order.

After every turn that ran tools, the run's view (agent/supervision/run_view.py) goes through the signals of
agent/supervision/drift.py. Then, in this order:
1. a hard limit reached (tool calls, wall time, history) stops the run with a report;
2. a signal climbs one rung of the ladder, recorded as a `drift_correction` event in the log:
   (a) a reflection turn — a separate, structured model call that sees the goal, the plan, the
       recent calls and the signal, and answers {on_track, assessment, next_action}; its answer
       is put in front of the working model as a runtime note;
   (b) go back to the last good checkpoint, when a `CheckpointRestorer` is wired in: the run ends with
       a short report, and the restore and a continuation follow after it (agent/supervision/drift_restore.py);
   (c) a context reset: goal, verified progress, learned constraints and failure patterns are
       saved into the task and the model's view restarts from them (the old turns stay on disk);
   and a signal that persists past the last rung stops the run with the report;
3. without a signal, a periodic reflection every `drift.reflect_every` turns.
Soft signals count from the last correction, so each rung gets a fair chance; the tool-call
limit and the ladder's position count from the start of the task (or of the run, without a
task); wall time counts per run.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Callable, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from clawgate.config.schema import DriftSettings

from . import structured
from ..bus import InboundMessage
from ..context.builder import ContextBuilder
from ..context.shared_view import is_shared, own_records, run_person
from .drift import BOOKKEEPING, Relevance, RunView, Signal, hard_limit, lexical_relevance, reflection_due, signals, summarise_failures
from ..core.events import EventHub
from ..loop import acts_for_owner
from ..providers.base import ModelResponse, Provider
from .run_view import Span, render_steps, run_user_text, span, start_index
from ..session import Session
from ..tasks.store import Task, TaskStore

log = logging.getLogger(__name__)
Rung = Literal["reflect", "restore", "reset"]
CONTINUATION_CHANNEL = "drift"  # the message that continues a run after a restore (agent/supervision/drift_restore.py)

REFLECT_SYSTEM = (
    "You review an AI agent's long-running work for drift: loops, side quests, growing scope. Judge only from "
    "the facts given. Answer with one JSON object and nothing else: "
    '{"on_track": true|false, "assessment": "<one or two sentences>", "next_action": "<the single next action '
    'that moves the original goal forward, different from what failed>"}'
)


@dataclass
class RestoreDecision:
    checkpoint: str
    report: str  # the run's final answer: what was wrong and where the work goes back to


class CheckpointRestorer(Protocol):
    """Rung (b). The log cannot be swapped under the running loop, so `decide` only chooses the last
    good checkpoint of the task and records the decision in the session log; the run then ends with
    the report, and the restore happens after it, in the session's lane. None: there is no good
    checkpoint; drift control goes on to a context reset in the same turn."""

    def decide(self, session: Session, msg: InboundMessage, task: Task | None, *, signal: Signal, turn: int,
               avoid: list[str]) -> RestoreDecision | None: ...


class AsyncRelevance(Protocol):
    """A relevance score that needs I/O (agent/memory/embeddings.py); None: unavailable this turn."""

    async def scores(self, goal: str, texts: list[str]) -> list[float] | None: ...


class Reflection(BaseModel):
    model_config = ConfigDict(defer_build=True)  # built after the ready line (gateway/runtime.py)

    on_track: bool
    assessment: str = Field(min_length=1)
    next_action: str = Field(min_length=1)


class DriftControl:
    def __init__(self, settings: DriftSettings, *, provider: Provider, model: str, tasks: TaskStore,
                 context: ContextBuilder, events: EventHub, restorer: CheckpointRestorer | None = None,
                 relevance: Relevance = lexical_relevance, embedder: AsyncRelevance | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.settings = settings
        self.provider = provider
        self.model = settings.model or model
        # the model of a session's reflections: its agent's (gateway/agent_scope.py installs it with several agents)
        self.model_of: Callable[[str], str] = lambda session_key: self.model
        self.tasks = tasks
        self.context = context
        self.events = events
        self.restorer = restorer
        self.relevance = relevance
        self.embedder = embedder
        self.clock = clock

    @property
    def ladder(self) -> list[Rung]:
        rungs: list[Rung] = ["reflect"]
        if self.restorer is not None:
            rungs.append("restore")
        return rungs + ["reset"] * self.settings.max_resets

    async def __call__(self, session: Session, msg: InboundMessage, response: ModelResponse) -> str | None:
        """The after_turn hook: None to go on, or the final text when the run must stop."""
        if not self.settings.enabled:
            return None
        # In a conversation several people share, only this person's task and runs (context/shared_view.py):
        # another person's calls never count, nor reach a reflection prompt or a reset brief.
        person = run_person(session)
        task = self.tasks.current_for(session, person)
        begin = self._begin(session, msg, task)
        whole = span(session, begin, person=person)
        corrections = [r for r in own_records(session, begin, person)
                       if r.get("kind") == "event" and r.get("name") == "drift_correction"]
        since = start_index(session, seq=int(corrections[-1]["seq"]) + 1) if corrections else begin
        recent = span(session, since, person=person)  # soft signals: since the last correction
        goal = task.goal if task else _request(session, msg, begin)
        view = RunView(goal=goal, actions=recent.actions, turns=recent.turns, total_tool_calls=len(whole.actions),
                       total_turns=whole.turns, elapsed_seconds=self._run_seconds(session, msg),
                       history_tokens=self.context.compactor.estimate_tokens(session, session.window_start),
                       has_task=task is not None)
        turn = whole.turns
        if (limit := hard_limit(view, self.settings)) is not None:
            self._record(session, msg, turn, "signal", **limit.to_dict())
            return self._stop(session, msg, task, whole, goal, f"it reached a hard limit: {limit.detail} "
                              f"(drift.max_{limit.name.removeprefix('limit_')})", limit)
        seen = {r.get("signal") for r in own_records(session, begin, person) if r.get("name") == "drift_signal"}
        found = [s for s in signals(view, self.settings, await self._relevance(goal, recent))
                 if not (s.name.startswith("scope_") and s.name in seen)]  # scope creep is told once
        for sig in found:
            self._record(session, msg, turn, "signal", **sig.to_dict())
        if found:
            return await self._climb(session, msg, task, whole, recent, goal, found[0], len(corrections), turn)
        if reflection_due(view, self.settings):
            await self._reflect(session, msg, task, recent, goal, None, turn)
        return None

    async def _relevance(self, goal: str, recent: Span) -> Relevance:
        """The embedding score when one is configured and answers, else the lexical one."""
        texts = [a.text for a in recent.actions if a.name not in BOOKKEEPING][-self.settings.window:]
        if self.embedder is None or self.settings.relevance_threshold <= 0 or len(texts) < self.settings.window:
            return self.relevance
        scores = await self.embedder.scores(goal, texts)
        if scores is None:
            return self.relevance
        table = dict(zip(texts, scores))
        return lambda _goal, asked: [table.get(t, 0.0) for t in asked]

    # the ladder ------------------------------------------------------------------------------
    async def _climb(self, session: Session, msg: InboundMessage, task: Task | None, whole: Span, recent: Span,
                     goal: str, sig: Signal, level: int, turn: int) -> str | None:
        rungs = self.ladder
        while level < len(rungs):
            rung = rungs[level]
            level += 1
            if rung == "restore":
                assert self.restorer is not None
                if is_shared(session):
                    # a restore rewinds the log, and in a conversation several people share that would cut
                    # the others' messages and answers (rewinding it is the owner's, by /undo): the next rung
                    self._correction(session, msg, turn, rung, sig, restored=False)
                    continue
                decision = self.restorer.decide(session, msg, task, signal=sig, turn=turn,
                                                avoid=summarise_failures(whole.actions, whole.errors, limit=3))
                if decision is None:
                    self._correction(session, msg, turn, rung, sig, restored=False)
                    continue  # nothing to go back to: the next rung, now
                self._correction(session, msg, turn, rung, sig, checkpoint=decision.checkpoint)
                return decision.report  # the run ends here; the restore follows after it
            self._correction(session, msg, turn, rung, sig)
            if rung == "reflect":
                await self._reflect(session, msg, task, recent, goal, sig, turn)
            else:
                self._reset(session, msg, task, whole, goal, sig, turn)
            return None
        return self._stop(session, msg, task, whole, goal,
                          f"drift persisted after every correction ({sig.name}: {sig.detail})", sig)

    async def _reflect(self, session: Session, msg: InboundMessage, task: Task | None, recent: Span, goal: str,
                       sig: Signal | None, turn: int) -> None:
        why = f"signal {sig.name}: {sig.detail}" if sig else f"periodic check every {self.settings.reflect_every} turns"
        plan = _plan_text(task) if task else "(no task plan)"
        prompt = (f"Reflection point (turn {turn}).\nOriginal goal: {goal}\nWhy now: {why}\nPlan:\n{plan}\n"
                  f"Recent tool calls:\n{render_steps(recent.steps, limit=10)}\n"
                  f"Latest assistant text: {(recent.texts[-1] if recent.texts else '(none)')[:600]}\n"
                  "Is the work still on track for the original goal? What is the next action?")
        answer = await structured.ask(self.provider, model=self.model_of(session.key), system=REFLECT_SYSTEM, prompt=prompt,
                                      schema=Reflection, max_tokens=512)
        value = answer.value
        fields: dict[str, Any] = {"periodic": sig is None, "calls": answer.calls, "tokens": answer.tokens}
        if value is None:
            fields["error"] = answer.error
            note = (f"[drift] Reflection (turn {turn}, {why}) got no usable answer. Step back: restate the goal "
                    f"({goal[:200]}), do not repeat a call that failed, and take a different next action.")
        else:
            fields.update(on_track=value.on_track, assessment=value.assessment[:500], next_action=value.next_action[:300])
            status = "on track" if value.on_track else "OFF TRACK"
            note = (f"[drift] Reflection (turn {turn}, {why}): {status}. {value.assessment} "
                    f"Next: {value.next_action} Goal: {goal[:200]}")
        self._record(session, msg, turn, "reflection", **fields)
        session.append("note", text=note)

    def _reset(self, session: Session, msg: InboundMessage, task: Task | None, whole: Span, goal: str,
               sig: Signal, turn: int) -> None:
        """Save what was learned into the task, then restart the model's view from a brief."""
        progress = _progress(task, whole)
        constraints = _constraints(session, task, run_person(session))
        failures = summarise_failures(whole.actions, whole.errors) or ["(none recorded)"]
        if task is not None:
            task.context.update(goal=goal, verified_progress=progress, constraints="\n".join(constraints),
                                failure_patterns="\n".join(failures), last_reset=f"turn {turn}: {sig.name}")
            self.tasks.save(task)
        brief = (f"[clawgate] Context reset (drift: {sig.name} — {sig.detail}). The earlier turns of this work are kept "
                 f"on disk in sessions/{session.path.name}; you start clean from this brief.\n"
                 f"Goal: {goal}\nVerified progress:\n{progress}\nLearned constraints:\n"
                 + "\n".join(f"- {c}" for c in constraints or ["(none)"])
                 + "\nFailure patterns to avoid:\n" + "\n".join(f"- {f}" for f in failures)
                 + "\nContinue from the verified progress with a different approach; do not repeat what failed.")
        session.append("assistant", run_id=msg.id, drift_reset=True, content=[{"type": "text", "text": "(context reset by drift control)"}])
        session.append("user", text=brief, owner=acts_for_owner(msg), drift_reset=True)
        session.append("consolidated", durable=True, upto=session.message_count - 1, ok=True, reset=True,
                       summary=brief, transcript=f"sessions/{session.path.name}")
        self.context.invalidate(session.key)
        self.context.compactor.forget(session)
        self._record(session, msg, turn, "reset", upto=session.message_count - 1)

    def _stop(self, session: Session, msg: InboundMessage, task: Task | None, whole: Span, goal: str,
              reason: str, sig: Signal) -> str:
        report = stop_report(reason, goal, task, whole, self._run_seconds(session, msg))
        if task is not None and task.status in ("pending", "in_progress"):
            task.status, task.result = "failed", f"stopped by drift control: {reason}"
            self.tasks.save(task)
            self.events.emit("task", session=task.session_key, id=task.id, status=task.status,
                             line=task.status_line(), action="drift_stop")
        self._record(session, msg, whole.turns, "stop", reason=reason, signal=sig.name)
        return report

    # bookkeeping -----------------------------------------------------------------------------
    def _begin(self, session: Session, msg: InboundMessage, task: Task | None) -> int:
        run_start = start_index(session, seq=session.inbound_seqs.get(msg.id, 0))
        if task is None and msg.channel == CONTINUATION_CHANNEL:
            # the continuation after a restore: the ladder's records carried in front of it belong to its span,
            # so drift after the restore goes on to a reset (one restore per span)
            index = run_start
            while index > 0 and session.records[index - 1].get("kind") == "event":
                index -= 1
                if session.records[index].get("name") == "branch":
                    return index
            return run_start
        if task is None:
            return run_start
        return min(run_start, start_index(session, ts=task.created_at))

    def _run_seconds(self, session: Session, msg: InboundMessage) -> float:
        """Wall time of this run: a task resumed tomorrow by the heartbeat starts a fresh clock."""
        index = start_index(session, seq=session.inbound_seqs.get(msg.id, 0))
        started = float(session.records[index]["ts"]) if index < len(session.records) else self.clock()
        return max(0.0, self.clock() - started)

    def _correction(self, session: Session, msg: InboundMessage, turn: int, rung: Rung, sig: Signal, **more: Any) -> None:
        session.append("event", name="drift_correction", run_id=msg.id, turn=turn, step=rung, signal=sig.name, **more)
        self.events.emit("drift", session=session.key, run_id=msg.id, action="correction", step=rung, turn=turn,
                         signal=sig.name, **more)

    def _record(self, session: Session, msg: InboundMessage, turn: int, action: str, **fields: Any) -> None:
        name = {"signal": "drift_signal"}.get(action, f"drift_{action}")
        session.append("event", name=name, run_id=msg.id, turn=turn, **fields)
        self.events.emit("drift", session=session.key, run_id=msg.id, action=action, turn=turn, **fields)


def _request(session: Session, msg: InboundMessage, begin: int) -> str:
    """What a run without a task was asked: its message, or, for the continuation after a restore, the
    request the restore recorded (the continuation's own text lists what failed: scored for relevance,
    it would make the failing calls look on-goal)."""
    first = session.records[begin] if begin < len(session.records) else {}
    if msg.channel == CONTINUATION_CHANNEL and first.get("name") == "branch":
        request = (first.get("drift") or {}).get("request")
        if request:
            return str(request)
    return run_user_text(session, msg.id)


def _plan_text(task: Task) -> str:
    lines = []
    for i, step in enumerate(task.steps, 1):
        check = f" (verified: {step.verification})" if step.verification else ""
        lines.append(f"  {i}. [{step.status}] {step.text}{check}")
    return "\n".join(lines) or "  (no steps)"


def _progress(task: Task | None, whole: Span) -> str:
    if task is not None:
        done = [f"- step {i}: {s.text} (verified: {s.verification})" for i, s in enumerate(task.steps, 1)
                if s.status == "done"]
        notes = [f"- note: {n}" for n in task.notes[-5:]]
        return "\n".join(done + notes) or "- nothing verified yet"
    ok = list(dict.fromkeys(s.key for s in whole.steps if not s.is_error))[-8:]
    return "\n".join(f"- ran {k}" for k in ok) or "- nothing verified yet"


def _constraints(session: Session, task: Task | None, person: str | None) -> list[str]:
    """Learned constraints: the task's notes that read as rules, and the reflections' assessments (of this
    person's runs)."""
    out = [n for n in (task.notes if task else []) if any(w in n.lower() for w in ("must", "never", "don't", "do not", "only", "avoid"))]
    for r in own_records(session, max(0, len(session.records) - 200), person):
        if r.get("name") == "drift_reflection" and r.get("assessment"):
            out.append(f"reflection: {r['assessment']}")
    return out[-6:]


def stop_report(reason: str, goal: str, task: Task | None, whole: Span, elapsed: float) -> str:
    """What the person is told when a run is stopped: why, what is done, what remains."""
    if task is not None:
        done = [f"{i}. {s.text} — verified: {s.verification}" for i, s in enumerate(task.steps, 1) if s.status == "done"]
        left = [f"{i}. {s.text}" for i, s in enumerate(task.steps, 1) if s.status not in ("done", "skipped")]
    else:
        done = [f"ran {k}" for k in dict.fromkeys(s.key for s in whole.steps if not s.is_error)][-5:]
        left = ["the request is not finished"]
    failures = summarise_failures(whole.actions, whole.errors, limit=3)
    lines = [f"I stopped working on this because {reason}.", f"Goal: {goal[:300]}",
             "Done and verified: " + ("; ".join(done) if done else "nothing verified yet"),
             "Remaining: " + ("; ".join(left) if left else "nothing listed")]
    if failures:
        lines.append("Problems seen: " + "; ".join(failures))
    lines.append(f"Spent: {len(whole.actions)} tool calls in {whole.turns} turns, {elapsed:.0f} s. "
                 "Reply with a narrower request (or raise the limit in config.toml's [drift]) to go on.")
    return "\n".join(lines)
