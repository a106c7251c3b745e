"""`clawgate tasks list|show|cancel`: through the running daemon, or the task files when it is down."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from .errors import EXIT_FAILED, CliError
from .output import command_group, print_json, print_rows, subcommand
from .remote import gateway_or_offline

if TYPE_CHECKING:
    from ..offline import Offline


def _not_found(task_id: str) -> CliError:
    return CliError(f"no task {task_id!r}; `clawgate tasks list --all` shows the ids", EXIT_FAILED)


def cmd_list(args: argparse.Namespace) -> int:
    def offline(parts: "Offline") -> dict[str, Any]:
        from clawgate.agent.control import task_summary

        store = parts.tasks()
        return {"tasks": [task_summary(task) for task in (store.all() if args.all else store.active())]}

    tasks = gateway_or_offline("tasks.list", {"all": args.all}, offline).payload["tasks"]
    return print_rows(tasks, as_json=args.json, empty="no active tasks" if not args.all else "no tasks",
                      line=lambda task: f"{task['id']}  {task['status']:11}  {task['session']:20}  {task['line']}")


def cmd_show(args: argparse.Namespace) -> int:
    def offline(parts: "Offline") -> dict[str, Any]:
        task = parts.tasks().get(args.id)
        if task is None:
            raise _not_found(args.id)
        return {"task": task.to_dict()}

    print_json(gateway_or_offline("tasks.get", {"id": args.id}, offline).payload["task"])
    return 0


def cmd_cancel(args: argparse.Namespace) -> int:
    """With a daemon running this must go through it: it holds the task in memory and would
    overwrite a file edited behind it (and only it can stop the task's running turn)."""
    def offline(parts: "Offline") -> dict[str, Any]:
        store = parts.tasks()
        task = store.get(args.id)
        if task is None:
            raise _not_found(args.id)
        if task.status not in ("pending", "in_progress"):
            raise CliError(f"task {args.id} is already {task.status}", EXIT_FAILED)
        task.status, task.result = "cancelled", "cancelled by the user"
        store.save(task)
        return {"task": {"id": task.id}, "stoppedRun": False}

    gateway_or_offline("tasks.cancel", {"id": args.id}, offline)
    print(f"cancelled {args.id}")
    return 0


def add_commands(sub: Any) -> None:
    tsub = command_group(sub, "tasks", "long tasks: list, show, cancel")
    p = subcommand(tsub, "list", "active tasks (--all for finished ones too)", cmd_list, json=True)
    p.add_argument("--all", action="store_true")
    subcommand(tsub, "show", "one task as JSON", cmd_show, "id")
    subcommand(tsub, "cancel", "cancel a task", cmd_cancel, "id")
