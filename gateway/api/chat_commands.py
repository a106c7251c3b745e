"""Chat commands typed in the gateway's own clients (terminal, web page), answered at once.

`chat.send` hands its text here first: a known command (`/help`, `/new`, `/status`, `/stop`,
`/tasks`, `/undo [N]`, `/start`, and `/approve ID` / `/deny ID`, since these clients have no
buttons in the conversation) never reaches the model and never waits behind a run. The answer is
in the `chat.send` result and, for clients that only read `chat` events, follows as one `chat`
event to the asking connection alone (kind `command`, no reply number: it is not part of the
conversation). The parser and the router are the channels' (channels/kit/commands.py,
agent/commands.py): one command set for every client. Whoever holds the gateway token is the owner.
"""

from __future__ import annotations

import secrets
from functools import cache
from typing import Any

from clawgate.agent.commands import COMMANDS
from clawgate.agent.services import Services

from ..connection import Connection

STOPPING = 'Stopping the current run; its answer is "Stopped."'


def command_of(text: str) -> tuple[str, str] | None:
    """(name, args) when `text` is one of the chat commands (`/status`, `/undo 2`); None: text for the model
    (an unknown `/word` included, as on every channel)."""
    if not text.lstrip().startswith("/"):
        return None
    from clawgate.channels.kit.commands import parse_command

    return parse_command(text, names())


@cache
def names() -> frozenset[str]:
    """Every command name: the agent's and the kit's. The kit (channels/kit/) is imported here, by the
    first command, not at start: a daemon without chat channels needs nothing else of it."""
    from clawgate.channels.kit.commands import KIT_COMMANDS

    return frozenset(name for name, _ in [*COMMANDS, *KIT_COMMANDS])


def answer(services: Services, session: str, name: str, args: str) -> str:
    """The command's answer as text (never None: a stop that the run answers says so)."""
    if name in ("approve", "deny"):
        approval_id = args.split()[0] if args.split() else ""
        if not approval_id:
            return f"Say which request: /{name} ID (the id is in the prompt; approvals.list lists them)."
        if services.approvals.resolve(approval_id, name == "approve"):
            return "Approved." if name == "approve" else "Denied."
        return f"No pending request {approval_id}; it may have been answered or timed out."
    from clawgate.channels.kit.commands import KIT_COMMANDS

    reply = services.commands.handle(name, session, args, extra=list(KIT_COMMANDS))
    return STOPPING if reply is None else reply


def run_command(services: Services, conn: Connection, session: str, command: tuple[str, str]) -> dict[str, Any]:
    """Answer `command` for `conn`: the chat.send result, and the same answer as a `chat` event to it alone."""
    name, args = command
    text = answer(services, session, name, args)
    run_id = f"cmd_{secrets.token_hex(8)}"
    conn.event("chat", {"session": session, "runId": run_id, "state": "final", "kind": "command",
                        "command": name, "text": text})
    return {"runId": run_id, "status": "command", "command": name, "text": text, "seq": conn.chat_seq(session)}
