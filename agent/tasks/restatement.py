"""Identity restatement: hold a long task on its goal.

Once the current task has run more than `after_turns` model turns, every further request
carries, in its dynamic part, "I am <name>. Current task: <task>. Step <x>/<y>. Next: <next>."
built from the task state. It is a runtime contributor (the head of each user turn) and a
follow-up (a note before every later request of the run, whatever else was added since:
tool results, a drift note, a completeness-check turn), so the stable prompt prefix is never
touched. Without an active task there is no line: a chat of one-line questions has no "task",
and a finished task is not a plan still to make.
"""

from __future__ import annotations

from typing import Callable

from ..session import Session
from ..tasks.store import Task

GOAL_CAP = 160


class Restatement:
    def __init__(self, name: str, current_task: Callable[[Session, str | None], Task | None], *,
                 after_turns: int = 20) -> None:
        """`current_task(session, person)`: the task the run's person works on (TaskStore.current_for: in a
        conversation several people share, their own, so one person's goal is never restated to another)."""
        self.name = name
        self.current_task = current_task
        self.after_turns = after_turns
        # the name of a session's agent (config/agents.py `name`); None: `name` for every session
        self.name_of: Callable[[str], str] | None = None

    def __call__(self, session: Session, person: str | None) -> str | None:
        task = self.current_task(session, person)
        if task is None or task.turns <= self.after_turns:
            return None
        name = self.name_of(session.key) if self.name_of is not None else self.name
        return self.line(task.goal, *_task_position(task), name=name)

    def line(self, goal: str, step: int, steps: int, next_step: str, *, name: str | None = None) -> str:
        return (f"I am {name or self.name}. Current task: {_short(goal)}. Step {step}/{steps}. "
                f"Next: {_short(next_step)}.")


def _task_position(task: Task) -> tuple[int, int, str]:
    index = task.current_index
    if not task.steps:
        return 0, 0, "make a plan (task tool) before acting"
    if index is None:
        return len(task.steps), len(task.steps), "verify the result and report what was done and how it was checked"
    return index + 1, len(task.steps), task.steps[index].text


def _short(text: str) -> str:
    flat = " ".join(text.split()).rstrip(" .")
    return flat if len(flat) <= GOAL_CAP else flat[: GOAL_CAP - 1].rstrip() + "…"
