"""`clawgate chat` and `clawgate status`: commands that need the running gateway."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from ..client import GatewayClient
from .errors import EXIT_FAILED, CliError
from .output import print_json
from .remote import with_gateway


def cmd_chat(args: argparse.Namespace) -> int:
    async def one(client: GatewayClient) -> int:
        on_delta = (lambda t: print(t, end="", flush=True)) if args.stream else None
        result = await client.chat(args.message, session=args.session, on_delta=on_delta)
        if result["state"] == "error":
            raise CliError(result["text"], EXIT_FAILED)
        print() if args.stream else print(result["text"])
        return 0

    async def repl(client: GatewayClient) -> int:
        print(f"clawgate chat — session {args.session!r}. /quit to leave, /new to reset the session.")
        loop = asyncio.get_running_loop()
        while True:
            try:
                line = await loop.run_in_executor(None, lambda: input("you> "))
            except EOFError:
                print()
                return 0
            line = line.strip()
            if not line:
                continue
            if line in ("/quit", "/exit"):
                return 0
            if line == "/new":
                await client.request("sessions.reset", {"session": args.session})
                print("(session reset)")
                continue
            print("agent> ", end="", flush=True)
            result = await client.chat(line, session=args.session, on_delta=lambda t: print(t, end="", flush=True))
            print() if result["state"] != "error" else print(f"\n[error] {result['text']}")

    return with_gateway(one if args.message is not None else repl)


def cmd_status(args: argparse.Namespace) -> int:
    async def ask(client: GatewayClient) -> dict[str, Any]:
        return await client.request("status")

    status = with_gateway(ask)
    if args.json:
        print_json(status)
    else:
        for key, value in status.items():
            print(f"{key:15} {value}")
    return 0


def add_commands(sub: Any) -> None:
    p = sub.add_parser("chat", help="chat with the agent through the running gateway")
    p.add_argument("-m", "--message", help="send one message, print the answer, exit")
    p.add_argument("--session", default="main", help="session key (default: main)")
    p.add_argument("--stream", action="store_true", help="print the answer as it streams")
    p.set_defaults(fn=cmd_chat)

    p = sub.add_parser("status", help="show the running daemon's status")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_status)
