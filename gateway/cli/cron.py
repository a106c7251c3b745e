"""`clawgate cron add|list|remove|run|enable|disable|runs`, with or without a running daemon.

When the gateway answers, every command goes through its `cron.*` methods, so the running
daemon arms the change at once. When no daemon is running, the command edits the store
directly (the daemon loads it on start); `cron run` then leaves the run in the inbox, and
it runs when the gateway starts. The choice is made in `remote.gateway_or_offline`.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any, Callable

from .errors import EXIT_FAILED, EXIT_USAGE, CliError
from .output import command_group, print_json, print_rows, print_table, subcommand
from .remote import gateway_or_offline

if TYPE_CHECKING:
    from ..offline import Offline

def _offline(fn: Callable[[Any], dict[str, Any]]) -> Callable[["Offline"], dict[str, Any]]:
    """Run `fn(CronService)` on the store; a CronError becomes the same one line the daemon would give."""
    def run(parts: "Offline") -> dict[str, Any]:
        from clawgate.agent.triggers.jobs import CronError

        try:
            return fn(parts.cron())
        except CronError as exc:
            raise CliError(exc.message, EXIT_USAGE if exc.code == "invalid_params" else EXIT_FAILED) from None
    return run


def _agents(parts: "Offline") -> Any:
    from clawgate.config.loader import roster_of

    return roster_of(parts.paths, parts.settings)


def _named_agent(parts: "Offline", agent: str | None) -> str | None:
    """The id that goes into a job's session key for `--agent` (None: the default agent's plain keys), on the files."""
    from clawgate.config.agents import UnknownAgent

    try:
        found = _agents(parts).get(agent)
    except UnknownAgent as exc:
        raise CliError(str(exc), EXIT_FAILED) from None
    return None if found.default else found.id


def _listed(parts: "Offline", job: dict[str, Any]) -> dict[str, Any]:
    """A job as the daemon lists it, naming its agent (gateway/api/cron.py `with_agent`)."""
    if job.get("agent") is None:
        job["agent"] = _agents(parts).default.id
    return job


def cmd_add(args: argparse.Namespace) -> int:
    params = {k: v for k, v in {"message": args.message, "name": args.name, "cron": args.cron, "tz": args.tz,
                                "every": args.every, "at": args.at, "session": args.session,
                                "deliver": args.deliver, "grace": args.grace, "agent": args.agent}.items()
              if v is not None}

    def offline(parts: "Offline") -> dict[str, Any]:
        fields = {**params, "agent": _named_agent(parts, args.agent)}
        return _offline(lambda s: {"job": _listed(parts, s.add(**fields).public())})(parts)
    payload, live = gateway_or_offline("cron.add", params, offline)
    job = payload["job"]
    if args.json:
        print_json(job)
        return 0
    print(f"added job {job['id']} \"{job['name']}\" of agent {job.get('agent') or '-'}: {job['describe']}; "
          f"next run {job['nextRun'] or '-'}; delivers to {job['deliver']}")
    if not live:
        print("(the gateway is not running; the job is scheduled when `clawgate gateway` starts)")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    def offline(parts: "Offline") -> dict[str, Any]:
        return _offline(lambda s: {"jobs": [_listed(parts, j.public()) for j in s.jobs()]})(parts)
    payload, _ = gateway_or_offline("cron.list", {}, offline)
    jobs = payload["jobs"]
    if args.json or not jobs:
        return print_rows(jobs, as_json=args.json, line=str,
                          empty="no cron jobs; add one with `clawgate cron add --every 1h --message '…'`")
    rows = [("ID", "AGENT", "NAME", "SCHEDULE", "NEXT RUN", "STATE", "LAST", "DELIVER")]
    for j in jobs:
        state = j["state"] if j["enabled"] or j["state"] != "scheduled" else "off"
        rows.append((j["id"], j.get("agent") or "-", j["name"][:30], j["describe"], j["nextRun"] or "-", state,
                     j["lastStatus"] or "-", j["deliver"]))
    print_table(rows)
    return 0


def cmd_remove(args: argparse.Namespace) -> int:
    payload, _ = gateway_or_offline("cron.remove", {"id": args.id},
                                    _offline(lambda s: {"removed": s.remove(args.id).public()}))
    print(f"removed job {payload['removed']['id']} \"{payload['removed']['name']}\"")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    payload, live = gateway_or_offline("cron.run", {"id": args.id},
                                       _offline(lambda s: {"runId": s.run_now(args.id), "job": args.id}))
    if live:
        print(f"started run {payload['runId']}; `clawgate cron runs {args.id}` shows its result")
    else:
        print(f"queued run {payload['runId']}; the gateway is not running, so it runs when `clawgate gateway` starts")
    return 0


def _set_enabled(enabled: bool) -> Callable[[argparse.Namespace], int]:
    def cmd(args: argparse.Namespace) -> int:
        payload, _ = gateway_or_offline("cron.enable", {"id": args.id, "enabled": enabled},
                                        _offline(lambda s: {"job": s.set_enabled(args.id, enabled).public()}))
        job = payload["job"]
        print(f"job {job['id']} {'enabled; next run ' + (job['nextRun'] or '-') if enabled else 'disabled'}")
        return 0
    return cmd


RESULT_WIDTH = 80  # characters of a run's result on its line in `cron runs`


def cmd_runs(args: argparse.Namespace) -> int:
    from clawgate.agent.triggers.schedule import format_time

    payload, _ = gateway_or_offline("cron.runs", {"id": args.id, "limit": args.limit}, _offline(
        lambda s: {"job": args.id, "runs": [r.public() for r in s.runs(args.id, args.limit)]}))

    def line(run: dict[str, Any]) -> str:
        """One line per run: the result folded onto the line and cut (`--json` has it whole)."""
        took = f"{run['endedAt'] - run['startedAt']:.1f}s" if run["endedAt"] else "…"
        result = " ".join(str(run["result"] or "").split())
        result = result if len(result) <= RESULT_WIDTH else result[:RESULT_WIDTH - 1] + "…"
        return f"{format_time(run['startedAt'])}  {run['status']:9} {took:>7}  {result}".rstrip()
    return print_rows(payload["runs"], as_json=args.json, empty=f"job {args.id} has not run yet", line=line)


def add_commands(sub: Any) -> None:
    csub = command_group(sub, "cron", "scheduled jobs: add, list, remove, run, enable, disable, runs")

    p = csub.add_parser("add", help="add a job", description="Schedule a message for the agent. Day names in cron "
                        "expressions are safest: '0 9 * * mon-fri' is 09:00 on weekdays.")
    when = p.add_mutually_exclusive_group(required=True)
    when.add_argument("--cron", metavar="EXPR", help="crontab 'minute hour day month day-of-week', e.g. '30 8 * * mon'")
    when.add_argument("--every", metavar="DURATION", help="interval, e.g. 90s, 15m, 1h30m, 1d")
    when.add_argument("--at", metavar="TIME", help="one-shot: ISO-8601 (2026-03-01T09:00[+01:00]), HH:MM or +20m")
    p.add_argument("--tz", metavar="ZONE", help="IANA time zone for --cron/--at, e.g. Europe/Berlin (default: local)")
    p.add_argument("--message", "-m", required=True, help="the task text the agent receives when the job fires")
    p.add_argument("--name", help="a short name (default: start of the message)")
    p.add_argument("--deliver", metavar="TARGET", help="<channel>:<chat id> (telegram:<chat_id>, slack:<channel id>, ...), "
                                                          "gateway[:<session>] or none (default)")
    p.add_argument("--session", help="session to run in (default: the job's own, cron:<id>)")
    p.add_argument("--grace", metavar="DURATION", help="how late a missed run may still start after downtime (default 1h)")
    p.add_argument("--agent", metavar="ID", help="the agent whose job it is: it runs in that agent's session and "
                                                "workspace (default: the default agent)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_add)

    subcommand(csub, "list", "list jobs", cmd_list, json=True)
    for name, fn, text in (("remove", cmd_remove, "delete a job and its history"), ("run", cmd_run, "run a job now"),
                           ("enable", _set_enabled(True), "turn a job back on (resets its failures)"),
                           ("disable", _set_enabled(False), "turn a job off, keep it")):
        subcommand(csub, name, text, fn, "id")
    p = subcommand(csub, "runs", "a job's run history, newest first: one line per run, its result cut "
                   "(--json: whole)", cmd_runs, "id", json=True)
    p.add_argument("--limit", type=int, default=20)
