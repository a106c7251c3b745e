"""The deterministic half of the completeness check: a task with open steps is not done.

The model may say "All done!" while its own plan shows steps never completed (or after the task
tool refused to finish the task). No model call is needed to see that: the plan is on disk. So,
before a final answer leaves the daemon, when the session's current task still has open steps
and the run worked (made tool calls), the answer is not let out as done:

- the run worked on the task (called the task tool) and has rounds left
  (`reflection.max_rounds`, shared with the model-based check): the model is told which steps
  are open and continues;
- otherwise the answer goes out as a progress report: the report, naming what is done and
  verified and what remains, comes first; the model's own words follow, labelled.

A heartbeat run only gets the report (it works one step at a time); its routine `HEARTBEAT_OK`
is left alone. A run without tool calls (a plain reply while a task is open) is not touched.
agent/supervision/completeness.py calls this first; the model-based check runs only when no step is open.
"""

from __future__ import annotations

from .run_view import Span
from ..tasks.store import Step, Task

HEARTBEAT_OK = "HEARTBEAT_OK"
STEP_CAP = 160


def open_steps(task: Task) -> list[tuple[int, Step]]:
    """The task's steps not done or skipped, 1-based."""
    return [(i, s) for i, s in enumerate(task.steps, 1) if s.status not in ("done", "skipped")]


def worked_on_task(run: Span) -> bool:
    """The run called the task tool: it was working on the plan, so it may be told to go on."""
    return any(a.name == "task" for a in run.actions)


def gated(task: Task | None, run: Span, answer: str, mode: str) -> list[tuple[int, Step]]:
    """The open steps that keep this answer from going out as done (empty: the gate does not apply)."""
    if task is None or not run.actions:
        return []
    if mode == "heartbeat" and answer.strip() == HEARTBEAT_OK:
        return []
    return open_steps(task)


def may_continue(run: Span, mode: str, round_no: int, max_rounds: int) -> bool:
    return mode != "heartbeat" and worked_on_task(run) and round_no < max_rounds


def continue_note(task: Task, left: list[tuple[int, Step]]) -> str:
    """The turn the model gets instead of sending its answer."""
    steps = "\n".join(f"{i}. {_cap(s.text)}" for i, s in left)
    return (f"[clawgate check] Not done yet: task {task.id} ({_cap(task.goal)}) has {len(left)} of "
            f"{len(task.steps)} steps open, so your answer was not sent. Continue with the next open step, "
            "complete each with the task tool and its verification, then answer again. If a step cannot be "
            "done, finish the task with status 'failed' and say what remains.\nOpen steps:\n" + steps)


def progress_report(task: Task, left: list[tuple[int, Step]], answer: str) -> str:
    """The answer as it goes out: what is done and verified, what remains, then the model's words."""
    done = [f"{i}. {_cap(s.text)} (verified: {_cap(s.verification)})" for i, s in enumerate(task.steps, 1)
            if s.status == "done"]
    remains = "; ".join(f"{i}. {_cap(s.text)}" for i, s in left)
    skipped = sum(1 for s in task.steps if s.status == "skipped")
    return (f"Progress report — not done yet: {len(task.steps) - len(left)} of {len(task.steps)} steps of the task "
            f"\"{_cap(task.goal)}\" are done" + (f" ({skipped} of them skipped)" if skipped else "") + ".\n"
            f"Done and verified: {'; '.join(done) if done else 'nothing yet'}\n"
            f"Remains: {remains}\n\n"
            f"My last message follows; the plan above is what is verified:\n{answer}")


def _cap(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= STEP_CAP else flat[: STEP_CAP - 1] + "…"
