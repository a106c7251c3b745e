"""The completeness check: a before-final hook that will not let "done" go out unverified.

First, deterministically (no model call, agent/supervision/open_steps.py): when the session's current task
still has open steps and the run made tool calls, the answer is not done — the model is told to
go on (when it worked on the task and rounds are left), or the answer goes out as a progress
report naming what remains.
Otherwise, when the model answers without tools at the end of a run that finished a task (or
completed every step of it), or changed something (a successful call of a tool with effects), or
made at least `reflection.min_tool_calls` tool calls, a separate structured model call reviews
the goal, the plan, the calls made with their outcomes and the tools available, and answers
{is_complete, analysis, verification, missing, supplements}.
A heartbeat turn is checked only when it finishes a task (its routine answers are not claims).
- complete: the answer goes out with a short report (done / verified how / remains);
- incomplete: up to `reflection.max_supplements` supplementary steps are planned (added to the
  task's plan when there is one, the task reopened), the model is told to run them, and the
  check runs again when it answers — at most `reflection.max_rounds` checks per run (the
  deterministic rounds count too);
- no usable answer (malformed twice, model down): fail safe — a task finished in this run is
  reopened, and the report says the work is unverified.
Events: `reflection` (each check; `deterministic: true` for the open-steps one), `reflection_plan`
(supplements or open steps to run), `reflection_exec` (calls made since, before the next check).
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict, Field

from clawgate.config.schema import ReflectionSettings

from . import open_steps, structured
from ..bus import InboundMessage
from ..context.shared_view import run_person, sees_all
from ..core.events import EventHub
from .drift import BOOKKEEPING
from ..loop import Verdict, acts_for_owner
from ..providers.base import Provider
from .run_view import Span, render_steps, run_user_text, span, start_index
from ..session import Session
from ..tasks.store import Step, Task, TaskStore
from ..recovery.tool_calls import unknown_outcomes

log = logging.getLogger(__name__)

CHECK_SYSTEM = (
    "You check whether an AI agent really finished what it was asked, before it reports done. Judge from the "
    "goal, the executed calls and their results. Complete means: every part of the goal was done AND its result "
    "was verified (read back, tested, listed) — a claim without a verifying call is not verification. Suggest "
    "only steps that are essential to the goal, never busywork, never repeats. Answer with one JSON object and "
    'nothing else: {"is_complete": true|false, "analysis": "<short>", "verification": "<how the result was '
    'verified, from the calls>", "missing": ["<missing part>", ...], "supplements": [{"action": "<one concrete '
    'step>", "reason": "<why>", "tool": "<tool name or empty>"}]}'
)


class Supplement(BaseModel):
    model_config = ConfigDict(defer_build=True)  # built after the ready line (gateway/runtime.py)

    action: str = Field(min_length=1)
    reason: str = ""
    tool: str = ""


class Check(BaseModel):
    model_config = ConfigDict(defer_build=True)

    is_complete: bool
    analysis: str = Field(min_length=1)
    verification: str = ""
    missing: list[str] = Field(default_factory=list)
    supplements: list[Supplement] = Field(default_factory=list)


class CompletenessCheck:
    def __init__(self, settings: ReflectionSettings, *, provider: Provider, model: str, tasks: TaskStore,
                 tools: Callable[[], list[dict[str, Any]]], events: EventHub,
                 side_effects: Callable[[str], bool] = lambda name: False) -> None:
        self.settings = settings
        self.side_effects = side_effects  # the tool registry's: does a tool change anything
        self.provider = provider
        self.model = settings.model or model
        # the model of a session's check: its agent's (gateway/agent_scope.py installs it with several agents)
        self.model_of: Callable[[str], str] = lambda session_key: self.model
        self.tasks = tasks
        self.tools = tools
        self.events = events

    async def __call__(self, session: Session, msg: InboundMessage, answer: str) -> Verdict | None:
        if not self.settings.enabled:
            return None
        begin = start_index(session, seq=session.inbound_seqs.get(msg.id, 0))
        run = span(session, begin)
        run_ts = run.first_ts
        person = run_person(session)  # in a shared conversation: this person's tasks only (context/shared_view.py)
        finished = self._finished_task(session, person, run_ts)
        events = [r for r in session.records[begin:] if r.get("kind") == "event" and r.get("run_id") == msg.id
                  and str(r.get("name", "")).startswith("reflection")]
        rounds = sum(1 for r in events if r.get("name") == "reflection")
        if events and events[-1].get("name") == "reflection_plan":  # a check follows (rounds > 0): report first
            self._exec_report(session, msg, events[-1], run)
        current = self.tasks.current_for(session, person)
        if current is not None and (left := open_steps.gated(current, run, answer, msg.metadata.get("mode", ""))):
            return self._open_steps(session, msg, current, left, run, answer, rounds + 1)
        if finished is None and current is not None and run.actions and not open_steps.open_steps(current):
            finished = current  # every step done, the task not finished yet: the answer is its "done"
        if finished is None and not rounds and (not self._multi_step(run) or msg.metadata.get("mode") == "heartbeat"):
            # a lookup (no effect, few calls), a plain reply, or a heartbeat's routine: nothing is declared done
            return None
        goal = finished.goal if finished else run_user_text(session, msg.id)
        result = await structured.ask(self.provider, model=self.model_of(session.key), system=CHECK_SYSTEM, max_tokens=1024,
                                      prompt=self._prompt(goal, session, msg, finished, run, answer), schema=Check)
        check = result.value
        round_no = rounds + 1
        if check is None:
            self._emit(session, msg, "reflection", round=round_no, ok=False, error=result.error, calls=result.calls,
                       tokens=result.tokens)
            self._reopen(finished, f"completeness check failed ({result.error})")
            return Verdict(text=answer + report(None, finished, f"the completeness check got no usable answer "
                                                                 f"({result.error}), so this is not confirmed done"))
        supplements = check.supplements[: self.settings.max_supplements]
        self._emit(session, msg, "reflection", round=round_no, ok=True, is_complete=check.is_complete,
                   analysis=check.analysis[:500], missing=check.missing[:10], supplements=len(supplements),
                   calls=result.calls, tokens=result.tokens)
        if check.is_complete:
            # A call a restart left with an unknown outcome is never part of "verified": the status says so
            # and the loop names each such call under the answer.
            return Verdict(text=answer + report(check, finished, None, unknown=len(unknown_outcomes(session, msg.id))))
        if not supplements or round_no >= self.settings.max_rounds:
            why = "still incomplete after the supplementary steps" if rounds else "incomplete"
            self._reopen(finished, f"completeness check: {why}: {'; '.join(check.missing) or check.analysis}")
            return Verdict(text=answer + report(check, finished, why))
        self._plan(session, msg, finished, check, supplements, round_no)
        return Verdict(resume=True)

    # open steps: deterministic, no model call (agent/supervision/open_steps.py) --------------------------
    def _open_steps(self, session: Session, msg: InboundMessage, task: Task, left: list[tuple[int, Step]], run: Span,
                    answer: str, round_no: int) -> Verdict:
        missing = [f"step {i}: {s.text}"[:200] for i, s in left]
        self._emit(session, msg, "reflection", round=round_no, ok=True, is_complete=False, deterministic=True,
                   analysis=f"{len(left)} of {len(task.steps)} steps of task {task.id} are open",
                   missing=missing[:10], supplements=0, calls=0, tokens=0)
        mode = str(msg.metadata.get("mode", ""))
        if not open_steps.may_continue(run, mode, round_no, self.settings.max_rounds):
            return Verdict(text=open_steps.progress_report(task, left, answer))
        session.append("user", text=open_steps.continue_note(task, left), owner=acts_for_owner(msg), reflection=True)
        self._emit(session, msg, "reflection_plan", round=round_no, task=task.id, deterministic=True,
                   supplements=[{"action": s.text[:200], "reason": "an open step of the plan", "tool": ""}
                                for _, s in left[: self.settings.max_supplements or len(left)]])
        return Verdict(resume=True)

    def _multi_step(self, run: Span) -> bool:
        """Worth a check without a finished task: the run changed something (a successful call of a tool
        with effects: a file written, a command run, a message sent), or made several calls."""
        changed = any(not a.is_error and a.name not in BOOKKEEPING and self.side_effects(a.name) for a in run.actions)
        return changed or len(run.actions) >= self.settings.min_tool_calls

    # steps -----------------------------------------------------------------------------------
    def _plan(self, session: Session, msg: InboundMessage, task: Task | None, check: Check,
              supplements: list[Supplement], round_no: int) -> None:
        lines = [f"{i}. {s.action}" + (f" (tool: {s.tool})" if s.tool else "") + (f" — {s.reason}" if s.reason else "")
                 for i, s in enumerate(supplements, 1)]
        where = ""
        if task is not None:
            first = len(task.steps) + 1
            task.steps.extend(Step(text=s.action) for s in supplements)
            task.status, task.result = "in_progress", ""
            task.notes.append(f"completeness check round {round_no}: not complete — {check.analysis[:200]}")
            self.tasks.save(task)
            where = (f" They were added to task {task.id} as steps {first}-{first + len(supplements) - 1}: complete "
                     "each with its verification, then finish the task again.")
        missing = "; ".join(check.missing) or check.analysis
        session.append("user", text=(f"[clawgate check] Not done yet: {missing}\nRun these supplementary steps now, "
                                     f"verify each result, then answer again:{where}\n" + "\n".join(lines)),
                       owner=acts_for_owner(msg), reflection=True)
        self._emit(session, msg, "reflection_plan", round=round_no, supplements=[s.model_dump() for s in supplements],
                   task=task.id if task else None)

    def _exec_report(self, session: Session, msg: InboundMessage, plan: dict[str, Any], run: Span) -> None:
        after = [s for s in run.steps if s.seq > int(plan["seq"])]
        self._emit(session, msg, "reflection_exec", round=plan.get("round"), attempted=len(after),
                   succeeded=sum(1 for s in after if not s.is_error), planned=len(plan.get("supplements") or []))

    def _reopen(self, task: Task | None, why: str) -> None:
        """Fail safe: a task finished in this run is not left marked complete."""
        if task is None or task.status != "completed":
            return
        task.status, task.result = "in_progress", ""
        task.notes.append(why[:300])
        self.tasks.save(task)

    # reading ---------------------------------------------------------------------------------
    def _finished_task(self, session: Session, person: str | None, since: float) -> Task | None:
        alone = sees_all(session, person)
        done = [t for t in self.tasks.all() if t.session_key == session.key and t.status == "completed"
                and t.updated_at >= since and (alone or t.belongs_to(person))]
        return max(done, key=lambda t: t.updated_at) if done else None

    def _prompt(self, goal: str, session: Session, msg: InboundMessage, task: Task | None, run: Span, answer: str) -> str:
        tools = "\n".join(f"- {t['name']}: {str(t.get('description', '')).split('. ')[0][:160]}" for t in self.tools())
        plan = ""
        if task is not None:
            plan = "Plan:\n" + "\n".join(
                f"  {i}. [{s.status}] {s.text}" + (f" (verified: {s.verification})" if s.verification else "")
                for i, s in enumerate(task.steps, 1)) + "\n"
        request = run_user_text(session, msg.id)
        unknown = "".join(f"- {r.get('summary') or r.get('tool')}\n" for r in unknown_outcomes(session, msg.id))
        unknown = f"Calls cut by a daemon restart, outcome unknown, not repeated:\n{unknown}" if unknown else ""
        return (f"Completeness check.\nGoal: {goal}\n" + (f"Request: {request[:1000]}\n" if request and request != goal else "")
                + plan + f"Executed calls:\n{render_steps(run.steps)}\n{unknown}The agent's final answer:\n{answer[:2000]}\n"
                f"Available tools:\n{tools}\nAt most {self.settings.max_supplements} supplements.")

    def _emit(self, session: Session, msg: InboundMessage, name: str, **fields: Any) -> None:
        session.append("event", name=name, run_id=msg.id, **fields)
        self.events.emit(name, session=session.key, run_id=msg.id, **fields)


def report(check: Check | None, task: Task | None, problem: str | None, *, unknown: int = 0) -> str:
    """The block under a multi-step answer: what was done, how it was verified, what remains;
    `unknown` calls of the run (cut by a restart) keep "complete" from standing unqualified."""
    if task is not None:
        done = "; ".join(f"{s.text}" for s in task.steps if s.status == "done") or "no step verified"
        verified = "; ".join(s.verification for s in task.steps if s.verification) or "(no verification recorded)"
    else:
        done = check.analysis if check else "see above"
        verified = (check.verification if check else "") or "(not stated)"
    if check is not None and check.verification and task is not None:
        verified = f"{verified} — check: {check.verification}"
    if problem is None and unknown:
        remains = f"{unknown} call(s) cut by a daemon restart have an unknown outcome (listed below)"
        status = "complete apart from calls whose outcome is unknown, which are not verified"
    elif problem is None:
        remains, status = "nothing", "complete"
    else:
        remains = "; ".join(check.missing) if check and check.missing else (check.analysis if check else "unknown")
        status = f"NOT complete — {problem}"
    return f"\n\n---\nCompleteness check: {status}.\nDone: {done}\nVerified: {verified}\nRemains: {remains}"
