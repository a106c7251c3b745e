"""Identity restatement: hold a long run on its goal.

Once the current task has run more than `after_turns` model turns, every further request
carries, in its dynamic part, "I am <name>. Current task: <task>. Step <x>/<y>. Next: <next>."
built from the task state; without a task, from the session's goal (the first user message
of the session window) and the model turns in that window. It is a runtime contributor (the
head of each user turn) and a follow-up (a note after tool results mid-run), so the stable
prompt prefix is never touched.
"""

from __future__ import annotations

from itertools import islice
from typing import Callable

from .session import Session
from .tasks import Task

GOAL_CAP = 160


class Restatement:
    def __init__(self, name: str, current_task: Callable[[str], Task | None], *, after_turns: int = 20) -> None:
        self.name = name
        self.current_task = current_task
        self.after_turns = after_turns

    def __call__(self, session: Session) -> str | None:
        task = self.current_task(session.key)
        if task is not None:
            if task.turns <= self.after_turns:
                return None
            return self.line(task.goal, *_task_position(task))
        turns, goal = _session_progress(session, enough=self.after_turns + 1)
        if turns <= self.after_turns or not goal:
            return None
        return self.line(goal, 0, 0, "make a plan with the task tool, or finish and report what remains")

    def line(self, goal: str, step: int, steps: int, next_step: str) -> str:
        return (f"I am {self.name}. Current task: {_short(goal)}. Step {step}/{steps}. "
                f"Next: {_short(next_step)}.")


def _task_position(task: Task) -> tuple[int, int, str]:
    index = task.current_index
    if not task.steps:
        return 0, 0, "make a plan (task tool) before acting"
    if index is None:
        return len(task.steps), len(task.steps), "verify the result and report what was done and how it was checked"
    return index + 1, len(task.steps), task.steps[index].text


def _session_progress(session: Session, *, enough: int) -> tuple[int, str]:
    """(model turns in the window, counted up to `enough`; the window's first user text). Stops
    counting there: this runs before every user turn and must not grow with the history."""
    turns = 0
    for message in session.iter_messages(session.window_start):
        if message["role"] == "assistant":
            turns += 1
            if turns >= enough:
                break
    if turns == 0:
        return 0, ""
    seq = session.message_seq(session.window_start)
    records = session.records
    for record in islice(records, _find(records, seq), None):
        if record["kind"] == "user":
            return turns, record.get("text") or ""
    return turns, ""


def _find(records: list[dict], seq: int) -> int:
    """Index of the first record with seq >= `seq` (records are in seq order)."""
    lo, hi = 0, len(records)
    while lo < hi:
        mid = (lo + hi) // 2
        if records[mid]["seq"] < seq:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _short(text: str) -> str:
    flat = " ".join(text.split()).rstrip(" .")
    return flat if len(flat) <= GOAL_CAP else flat[: GOAL_CAP - 1].rstrip() + "…"
