"""`clawgate approvals list|approve|deny`: answer risky tool calls from any terminal.

Pending approvals live in the running daemon's memory (a waiting tool call), so these
commands need it; with no daemon there is nothing waiting (exit 3).
"""

from __future__ import annotations

import argparse
from typing import Any

from ..client import GatewayClient
from .output import command_group, print_rows, subcommand
from .remote import with_gateway


def cmd_list(args: argparse.Namespace) -> int:
    async def ask(client: GatewayClient) -> list[dict[str, Any]]:
        return (await client.request("approvals.list"))["pending"]

    return print_rows(with_gateway(ask), as_json=args.json, empty="no approvals waiting",
                      line=lambda item: f"{item['id']}  {item['session_key']:16}  {item['tool']}: "
                      f"{item.get('shown_summary', item['summary'])}"
                      + (f"  ({item.get('shown_reason', item['reason'])})" if item.get("reason") else ""))


def _resolve(approval_id: str, approve: bool) -> int:
    async def send(client: GatewayClient) -> dict[str, Any]:
        return await client.request("approvals.resolve", {"id": approval_id, "approve": approve})

    with_gateway(send)  # not found: one line, exit 1
    print(f"{'approved' if approve else 'denied'} {approval_id}")
    return 0


def add_commands(sub: Any) -> None:
    gsub = command_group(sub, "approvals", "risky tool calls waiting for a yes or no")
    subcommand(gsub, "list", "approvals waiting now", cmd_list, json=True)
    subcommand(gsub, "approve", "let a waiting tool call run", lambda a: _resolve(a.id, True), "id")
    subcommand(gsub, "deny", "refuse a waiting tool call", lambda a: _resolve(a.id, False), "id")
