"""`clawgate checkpoints list|show|restore|fork`: through the running daemon, or the files when it is down."""

from __future__ import annotations

import argparse
import datetime as dt
from typing import TYPE_CHECKING, Any

from .errors import EXIT_FAILED, CliError
from .output import command_group, print_json, subcommand
from .remote import gateway_or_offline

if TYPE_CHECKING:
    from ..offline import Offline


def _offline(call: str, *args: Any, **kwargs: Any) -> Any:
    """`call` on the daemon's checkpoint service over the files; a refusal is the daemon's one line."""
    from clawgate.agent.core.errors import DomainError

    def run(parts: "Offline") -> dict[str, Any]:
        try:
            return getattr(parts.checkpoints(), call)(*args, **kwargs)
        except DomainError as exc:
            raise CliError(exc.message, EXIT_FAILED) from None
    return run


def _offline_across(call: str, checkpoint_id: str, agent: str | None, *args: Any, target: str | None = None,
                    **kwargs: Any) -> Any:
    """`_offline` for show, restore and fork: first the daemon's rule that a checkpoint of another agent's session is
    reached only by naming that agent (config/agents.py `Roster.refusal`), for the checkpoint and the new session."""
    from clawgate.agent.core.errors import DomainError
    from clawgate.config.agents import UnknownAgent
    from clawgate.config.loader import roster_of

    act = _offline(call, checkpoint_id, *args, **kwargs)

    def run(parts: "Offline") -> dict[str, Any]:
        roster = roster_of(parts.paths, parts.settings)
        try:
            session = parts.checkpoints().get(checkpoint_id).session
            for key in (session, *([target] if target else [])):
                if (refusal := roster.refusal(key, agent)) is not None:
                    raise CliError(refusal, EXIT_FAILED)
        except (DomainError, UnknownAgent) as exc:
            raise CliError(getattr(exc, "message", str(exc)), EXIT_FAILED) from None
        return act(parts)
    return run


def _when(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S")


def cmd_list(args: argparse.Namespace) -> int:
    params = {"session": args.session, "task": args.task, "limit": args.limit,
              **({"agent": args.agent} if args.agent else {})}
    session = _agent_key(args.session, args.agent) if args.session and args.agent else args.session
    payload = gateway_or_offline("checkpoints.list", params,
                                 _offline("list", session=session, task=args.task, limit=args.limit)).payload
    if args.json:
        print_json(payload)
        return 0
    for problem in payload.get("problems", []):
        print(f"refused: {problem}")
    if not payload["checkpoints"]:
        print("no checkpoints")
    for cp in payload["checkpoints"]:
        mark = " ✓" if cp.get("verified") else ""
        print(f"{cp['id']}  {_when(cp['time'])}  {cp['session']:16}  turn {cp['turn']:<3} {cp['kind']:5} "
              f"{cp['description']}{mark}")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    params = {"id": args.id, **({"agent": args.agent} if args.agent else {})}
    payload = gateway_or_offline("checkpoints.show", params, _offline_across("show", args.id, args.agent)).payload
    if args.json:
        print_json(payload)
        return 0
    cp = payload["checkpoint"]
    print(f"{cp['id']} · session {cp['session']} · turn {cp['turn']} · {cp['kind']} · {_when(cp['time'])}")
    print(f"  {cp['description']}" + (f" (parent {cp['parent']})" if cp.get("parent") else ""))
    task = payload.get("task")
    if task:
        done = sum(1 for s in task["steps"] if s["status"] in ("done", "skipped"))
        print(f"  task {task['id']} [{task['status']}] {task['goal']} — {done}/{len(task['steps'])} steps done")
    for entry in payload["history"][-8:]:
        text = " ".join(str(entry.get("text") or "").split())[:100]
        tools = f" [{', '.join(entry['tools'])}]" if entry.get("tools") else ""
        print(f"  {entry['role']:9} {text}{tools}")
    change = payload["restoreWouldChange"]
    print(f"  workspace: {payload['workspaceFiles']} file(s); a restore would write {len(change.get('written', []))} "
          f"and remove {len(change.get('removed', []))}")
    _print_effects(payload["irreversible"])
    return 0


def _print_effects(effects: list[dict[str, Any]]) -> None:
    if effects:
        print(f"  cannot be undone ({len(effects)}):")
        for effect in effects:
            print(f"    {effect['what']}: {effect['summary']}")


def cmd_restore(args: argparse.Namespace) -> int:
    params = {"id": args.id, "mode": args.mode, "confirm": args.yes, **({"agent": args.agent} if args.agent else {})}
    payload = gateway_or_offline("checkpoints.restore", params,
                                 _offline_across("restore", args.id, args.agent, args.mode, confirm=args.yes)).payload
    if args.json:
        print_json(payload)
        return 0 if payload["restored"] else EXIT_FAILED
    if not payload["restored"]:
        print(f"not restored: these effects after {args.id} cannot be undone:")
        _print_effects(payload["irreversible"])
        raise CliError("run again with --yes to restore anyway", EXIT_FAILED)
    files = payload.get("files")
    print(f"restored {payload['checkpoint']['session']} to {args.id} ({args.mode})"
          + (f"; files: {len(files['written'])} written, {len(files['removed'])} removed" if files else ""))
    if payload.get("abandoned"):
        print(f"the later history is kept as {payload['abandoned']}")
    return 0


def _agent_key(session: str, agent: str) -> str:
    """`session` of agent `agent` as the daemon keys it (the default agent's keys are plain)."""
    from clawgate.config.agents import UnknownAgent
    from clawgate.config.loader import load, roster_of

    try:
        return roster_of(*load()).get(agent).session_key(session)
    except UnknownAgent as exc:
        raise CliError(str(exc), EXIT_FAILED) from None


def cmd_fork(args: argparse.Namespace) -> int:
    params: dict[str, Any] = {"id": args.id, **({"session": args.session} if args.session else {}),
                              **({"agent": args.agent} if args.agent else {})}
    target = None
    if args.session:  # the new session's key in the named agent, as the daemon forms it
        target = args.session if not args.agent else _agent_key(args.session, args.agent)
    payload = gateway_or_offline("checkpoints.fork", params,
                                 _offline_across("fork", args.id, args.agent, target, target=target)).payload
    if args.json:
        print_json(payload)
    else:
        print(f"forked {payload['parentSession']} at {args.id} into session {payload['session']}")
    return 0


def add_commands(sub: Any) -> None:
    csub = command_group(sub, "checkpoints", "checkpoints: list, show, restore, fork (time travel)")
    p = subcommand(csub, "list", "checkpoints, newest first", cmd_list, json=True)
    p.add_argument("--session")
    p.add_argument("--task")
    p.add_argument("--limit", type=int, default=200)
    p.add_argument("--agent", help="the agent whose --session it is (default: the default agent)")
    p = subcommand(csub, "show", "what the agent knew and did at a checkpoint", cmd_show, "id", json=True)
    p.add_argument("--agent", help="the agent whose checkpoint it is (default: the default agent)")
    p = subcommand(csub, "restore", "go back to a checkpoint (the later history is kept as a branch)", cmd_restore,
                   "id", json=True)
    p.add_argument("--mode", choices=["conversation", "files", "both"], default="both")
    p.add_argument("--yes", action="store_true", help="restore although some effects after it cannot be undone")
    p.add_argument("--agent", help="the agent whose checkpoint it is (default: the default agent)")
    p = subcommand(csub, "fork", "a new session branched from a checkpoint", cmd_fork, "id", json=True)
    p.add_argument("--session", help="the new session's key (default: <session>~<random>)")
    p.add_argument("--agent", help="the agent whose checkpoint it is (default: the default agent)")
