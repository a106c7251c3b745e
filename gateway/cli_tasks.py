"""`clawgate tasks list|show|cancel`: through the running daemon, or the files when it is down."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from agent.tasks import TaskStore
from config.loader import ConfigError, load
from config.token import gateway_token


def _offline_store() -> TaskStore:
    paths, _ = load()
    return TaskStore(paths.tasks)


async def _via_gateway(method: str, params: dict[str, Any]) -> dict[str, Any] | None:
    """Ask the running daemon; None when no daemon answers (then the caller uses the files)."""
    from .client import GatewayClient, gateway_url

    paths, settings = load()
    url = gateway_url(settings)
    try:
        async with GatewayClient(url, gateway_token(paths, settings)) as client:
            return await client.request(method, params)
    except OSError:
        return None


def _print_line(task: dict[str, Any]) -> None:
    print(f"{task['id']}  {task['status']:11}  {task['session']:20}  {task['line']}")


def cmd_list(args: argparse.Namespace) -> int:
    reply = asyncio.run(_via_gateway("tasks.list", {"all": args.all}))
    if reply is None:
        store = _offline_store()
        from agent.control import task_summary

        tasks = [task_summary(t) for t in (store.all() if args.all else store.active())]
    else:
        tasks = reply["tasks"]
    if args.json:
        print(json.dumps(tasks, indent=2))
    elif not tasks:
        print("no active tasks" if not args.all else "no tasks")
    else:
        for task in tasks:
            _print_line(task)
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    task = _offline_store().get(args.id)
    if task is None:
        print(f"clawgate: no task {args.id!r}; `clawgate tasks list --all` shows the ids", file=sys.stderr)
        return 2
    print(json.dumps(task.to_dict(), indent=2, ensure_ascii=False))
    return 0


def cmd_cancel(args: argparse.Namespace) -> int:
    from .client import GatewayError

    try:
        reply = asyncio.run(_via_gateway("tasks.cancel", {"id": args.id}))
    except GatewayError as exc:
        print(f"clawgate: {exc.message}", file=sys.stderr)
        return 2
    if reply is None:
        store = _offline_store()
        task = store.get(args.id)
        if task is None:
            print(f"clawgate: no task {args.id!r}; `clawgate tasks list --all` shows the ids", file=sys.stderr)
            return 2
        if task.status not in ("pending", "in_progress"):
            print(f"clawgate: task {args.id} is already {task.status}", file=sys.stderr)
            return 2
        task.status, task.result = "cancelled", "cancelled by the user"
        store.save(task)
    print(f"cancelled {args.id}")
    return 0


def add_commands(sub: Any) -> None:
    tasks = sub.add_parser("tasks", help="long tasks: list, show, cancel")
    tsub = tasks.add_subparsers(dest="tasks_command", required=True)
    p = tsub.add_parser("list", help="active tasks (--all for finished ones too)")
    p.add_argument("--all", action="store_true")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=_guard(cmd_list))
    p = tsub.add_parser("show", help="one task as JSON")
    p.add_argument("id")
    p.set_defaults(fn=_guard(cmd_show))
    p = tsub.add_parser("cancel", help="cancel a task")
    p.add_argument("id")
    p.set_defaults(fn=_guard(cmd_cancel))


def _guard(fn: Any) -> Any:
    def run(args: argparse.Namespace) -> int:
        try:
            return fn(args)
        except ConfigError as exc:
            print(f"clawgate: {exc}", file=sys.stderr)
            return 2
    return run
