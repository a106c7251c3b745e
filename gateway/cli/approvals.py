"""`clawgate approvals list|approve|deny`: answer risky tool calls from any terminal.

Pending approvals live in the running daemon's memory (a waiting tool call), so these
commands need it; with no daemon there is nothing waiting (exit 3).
"""

from __future__ import annotations

import argparse
from typing import Any

from ..client import GatewayClient
from .output import print_json
from .remote import with_gateway


def cmd_list(args: argparse.Namespace) -> int:
    async def ask(client: GatewayClient) -> list[dict[str, Any]]:
        return (await client.request("approvals.list"))["pending"]

    pending = with_gateway(ask)
    if args.json:
        print_json(pending)
    elif not pending:
        print("no approvals waiting")
    else:
        for item in pending:
            print(f"{item['id']}  {item['session_key']:16}  {item['tool']}: {item['summary']}"
                  + (f"  ({item['reason']})" if item.get("reason") else ""))
    return 0


def _resolve(approval_id: str, approve: bool) -> int:
    async def send(client: GatewayClient) -> dict[str, Any]:
        return await client.request("approvals.resolve", {"id": approval_id, "approve": approve})

    with_gateway(send)  # not found: one line, exit 1
    print(f"{'approved' if approve else 'denied'} {approval_id}")
    return 0


def add_commands(sub: Any) -> None:
    group = sub.add_parser("approvals", help="risky tool calls waiting for a yes or no")
    gsub = group.add_subparsers(dest="approvals_command", required=True)
    p = gsub.add_parser("list", help="approvals waiting now")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_list)
    p = gsub.add_parser("approve", help="let a waiting tool call run")
    p.add_argument("id")
    p.set_defaults(fn=lambda a: _resolve(a.id, True))
    p = gsub.add_parser("deny", help="refuse a waiting tool call")
    p.add_argument("id")
    p.set_defaults(fn=lambda a: _resolve(a.id, False))
