"""`task`: the agent's explicit plan for long work, kept on disk (agent/tasks/store.py).

One action per call so every change is small, atomic and verifiable: plan, start a step,
complete it with its verification, note progress, finish. Finishing as completed is
refused while steps remain open — "done" has to be earned step by step.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ..tools.base import Args, Tool, ToolContext, ToolError
from .store import Step, Task, TaskStore


class TaskTool(Tool):
    name = "task"
    description = (
        "Your plan for multi-step work, kept across restarts and shown to you each turn. plan: goal + steps; "
        "start: step N; complete: step N + verification (how you checked it); note: text (verified progress or "
        "a learned constraint); finish: status + result (what was done, how verified, what remains); show."
    )
    # Plans are state: after a crash mid-call the model checks with 'show' instead of repeating.
    side_effects = True

    class Arguments(Args):
        action: Literal["plan", "start", "complete", "note", "finish", "show"]
        goal: str | None = None
        steps: list[str] | None = None
        step: int | None = Field(None, ge=1, description="1-based")
        verification: str | None = None
        text: str | None = None
        status: Literal["completed", "failed", "cancelled"] | None = None
        result: str | None = None
        task_id: str | None = Field(None, description="default: the current task")

    def __init__(self, store: TaskStore) -> None:
        self.store = store

    async def run(self, args: Arguments, ctx: ToolContext) -> str:
        if args.action == "plan":
            return self._plan(args, ctx)
        task = self._task(args, ctx)
        if args.action == "show":
            return _render(task)
        if args.action == "note":
            if task.status not in ("pending", "in_progress"):
                raise ToolError(f"task {task.id} is {task.status}", "plan a new task for new work")
            if not args.text:
                raise ToolError("note needs 'text'", "pass the progress note as text")
            task.notes.append(args.text)
        elif args.action in ("start", "complete"):
            self._step(task, args)
        elif args.action == "finish":
            self._finish(task, args)
        self.store.save(task)
        return _render(task)

    def _plan(self, args: Arguments, ctx: ToolContext) -> str:
        if not args.goal or not args.steps:
            raise ToolError("plan needs 'goal' and a non-empty 'steps' list", "call task with action='plan', goal, steps")
        current = self.store.current(ctx.session_key, ctx.user)
        if current is not None and current.goal == args.goal and [s.text for s in current.steps] == args.steps:
            return "already planned (this exact plan exists)\n" + _render(current)  # safe to repeat after a crash
        if current is not None:
            raise ToolError(f"this session already has an active task {current.id} ({current.goal})",
                            "finish or cancel it first (action='finish'), or keep working on it")
        task = Task(goal=args.goal, session_key=ctx.session_key, status="in_progress",
                    steps=[Step(text=s) for s in args.steps], user=ctx.user)
        self.store.save(task)
        return "created\n" + _render(task)

    def _task(self, args: Arguments, ctx: ToolContext) -> Task:
        task = self.store.get(args.task_id) if args.task_id else self.store.current(ctx.session_key, ctx.user)
        if task is None or not task.belongs_to(ctx.user):  # another person's task is not named to this one
            raise ToolError("no such task" if args.task_id else "this session has no active task",
                            "create one with action='plan'")
        if task.session_key != ctx.session_key:
            raise ToolError(f"task {task.id} belongs to another session", "work on this session's task")
        return task

    @staticmethod
    def _step(task: Task, args: Arguments) -> None:
        if task.status not in ("pending", "in_progress"):
            raise ToolError(f"task {task.id} is {task.status}", "plan a new task for new work")
        if args.step is None or args.step > len(task.steps):
            raise ToolError(f"step must be between 1 and {len(task.steps)}", "pass the step number")
        step = task.steps[args.step - 1]
        if args.action == "start":
            for other in task.steps:
                if other.status == "in_progress" and other is not step:
                    other.status = "pending"
            step.status = "in_progress"
            task.status = "in_progress"
            return
        if not args.verification or not args.verification.strip():
            raise ToolError("complete needs 'verification': how you checked the step's result",
                            "verify the result (read the file, run the test), then pass what you checked")
        step.status, step.verification = "done", args.verification.strip()
        task.resume_attempts = 0  # progress was made, so earlier crashes are forgiven

    @staticmethod
    def _finish(task: Task, args: Arguments) -> None:
        if task.status not in ("pending", "in_progress"):
            raise ToolError(f"task {task.id} is already {task.status}", "plan a new task for new work")
        if not args.status or not args.result:
            raise ToolError("finish needs 'status' and 'result'", "say what was done, how it was verified and what remains")
        open_steps = [i + 1 for i, s in enumerate(task.steps) if s.status not in ("done", "skipped")]
        if args.status == "completed" and open_steps:
            raise ToolError(f"steps {open_steps} are not done and verified",
                            "complete them with their verification, or finish with status 'failed' and say what remains")
        task.status, task.result = args.status, args.result


def _render(task: Task) -> str:
    marks = {"pending": " ", "in_progress": ">", "done": "x", "skipped": "-", "failed": "!"}
    lines = [f"task {task.id} [{task.status}]: {task.goal}"]
    for i, step in enumerate(task.steps, 1):
        check = f" (verified: {step.verification})" if step.verification else ""
        lines.append(f"  [{marks[step.status]}] {i}. {step.text}{check}")
    lines += [f"  note: {n}" for n in task.notes[-5:]]
    if task.result:
        lines.append(f"  result: {task.result}")
    return "\n".join(lines)
