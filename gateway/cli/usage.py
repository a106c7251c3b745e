"""`clawgate usage`: token usage per day and session, through the gateway or, when none runs, the state file."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from .output import JSON_HELP, print_json
from .remote import gateway_or_offline
from .status_view import counts_line, usage_lines

if TYPE_CHECKING:
    from ..offline import Offline


def cmd_usage(args: argparse.Namespace) -> int:
    params: dict[str, Any] = {"days": args.days, "top": args.top}
    if args.session is not None:
        params["session"] = args.session

    def offline(parts: "Offline") -> dict[str, Any]:
        return parts.usage().report(session=args.session, days=args.days, top=args.top)

    report = gateway_or_offline("usage", params, offline).payload
    if args.json:
        print_json(report)
        return 0
    lines = [line for line in usage_lines(report) if not line.startswith("top session")]
    for line in lines:
        print(line)
    if report.get("days"):
        print("by day:")
        for day in report["days"]:
            print(f"  {day['day']}  {counts_line(day)}")
    if report.get("topSessions"):
        print("top sessions:")
        for s in report["topSessions"]:
            print(f"  {s['session'] or '(none)':24} {counts_line(s)}")
    return 0


def add_commands(sub: Any) -> None:
    p = sub.add_parser("usage", help="token usage per day and per session (kept across restarts)")
    p.add_argument("--session", help="also show this session's usage")
    p.add_argument("--days", type=int, default=7, help="days listed (default 7)")
    p.add_argument("--top", type=int, default=5, help="sessions listed (default 5)")
    p.add_argument("--json", action="store_true", help=JSON_HELP)
    p.set_defaults(fn=cmd_usage)
