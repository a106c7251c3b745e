"""`clawgate tasks list|show|cancel`: through the running daemon, or the task files when it is down."""

from __future__ import annotations

import argparse
from typing import Any

from .errors import EXIT_FAILED, CliError
from .output import print_json
from .remote import Target, gateway_or_offline


def _store(t: Target) -> Any:
    from clawgate.agent.tasks.store import TaskStore

    return TaskStore(t.paths.tasks, fsync=t.settings.state.fsync)


def _not_found(task_id: str) -> CliError:
    return CliError(f"no task {task_id!r}; `clawgate tasks list --all` shows the ids", EXIT_FAILED)


def cmd_list(args: argparse.Namespace) -> int:
    def offline(t: Target) -> dict[str, Any]:
        from clawgate.agent.control import task_summary

        store = _store(t)
        return {"tasks": [task_summary(task) for task in (store.all() if args.all else store.active())]}

    tasks = gateway_or_offline("tasks.list", {"all": args.all}, offline).payload["tasks"]
    if args.json:
        print_json(tasks)
    elif not tasks:
        print("no active tasks" if not args.all else "no tasks")
    else:
        for task in tasks:
            print(f"{task['id']}  {task['status']:11}  {task['session']:20}  {task['line']}")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    def offline(t: Target) -> dict[str, Any]:
        task = _store(t).get(args.id)
        if task is None:
            raise _not_found(args.id)
        return {"task": task.to_dict()}

    print_json(gateway_or_offline("tasks.get", {"id": args.id}, offline).payload["task"])
    return 0


def cmd_cancel(args: argparse.Namespace) -> int:
    """With a daemon running this must go through it: it holds the task in memory and would
    overwrite a file edited behind it (and only it can stop the task's running turn)."""
    def offline(t: Target) -> dict[str, Any]:
        store = _store(t)
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
    tasks = sub.add_parser("tasks", help="long tasks: list, show, cancel")
    tsub = tasks.add_subparsers(dest="tasks_command", required=True)
    p = tsub.add_parser("list", help="active tasks (--all for finished ones too)")
    p.add_argument("--all", action="store_true")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_list)
    p = tsub.add_parser("show", help="one task as JSON")
    p.add_argument("id")
    p.set_defaults(fn=cmd_show)
    p = tsub.add_parser("cancel", help="cancel a task")
    p.add_argument("id")
    p.set_defaults(fn=cmd_cancel)
