"""`clawgate chat` and `clawgate status`: commands that need the running gateway.

A chat turn is shown as it happens: tool steps as lines on stderr (the answer alone goes to
stdout, so `chat -m … > answer.txt` stays clean), streamed turns separated by a newline, and an
approval addressed to this session asked on the terminal — without that the run would wait
silently until the approval timed out. The socket is read all the time (gateway/live_client.py):
a dropped connection (a daemon restart) is re-established and resumed from the last reply number
seen, so every answer arrives, once. The interactive prompt is gateway/cli/chat_repl.py, what is
printed gateway/cli/chat_view.py.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any, Callable

from ..client import GatewayClient, GatewayError
from ..live_client import RESUME_SECONDS, LiveClient
from .chat_input import Interrupts, LineApprovals, StdinLines, terminal_stdin
from .chat_repl import Repl, commands_help
from .chat_view import ChatView, note
from .errors import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_UNREACHABLE, CliError
from .output import print_json
from .remote import HELLO_SECONDS, with_gateway
from .status_view import status_lines

GONE = (f"the gateway closed the connection and did not come back within {RESUME_SECONDS:g} s; "
        "start it again (`clawgate gateway`) and rerun `clawgate chat`")


def _link_notes(view: ChatView, on_back: Callable[[], None]) -> Callable[[str], None]:
    """One line when the connection drops, one when it is back (its missed replies follow)."""
    def changed(state: str) -> None:
        view.end_line()
        if state == "lost":
            note("  (the connection to the gateway dropped; reconnecting…)")
        elif state == "back":
            note("  (reconnected)")
            on_back()
    return changed


async def ask_pending_approvals(live: LiveClient, view: ChatView) -> None:
    """Show the approvals already waiting: `approval` events are not resumed, so one asked while this chat
    was away (or before it opened) would otherwise wait unseen until it times out as denied."""
    try:
        pending = (await live.request("approvals.list", {})).get("pending") or []
    except GatewayError:
        return  # the connection went again: asked once more when it is back
    for request in pending:
        if isinstance(request, dict):
            view.on_event({"event": "approval", "payload": {"state": "requested", **request}})


def _live(client: GatewayClient, session: str, view: ChatView) -> LiveClient:
    live = LiveClient(client, session, on_event=view.on_event, on_link=lambda state: None, open_timeout=HELLO_SECONDS)
    asking: set[asyncio.Task[None]] = set()  # held until done: the loop keeps only a weak reference

    def ask_again() -> None:
        task = asyncio.ensure_future(ask_pending_approvals(live, view))
        asking.add(task)
        task.add_done_callback(asking.discard)
    live.on_link = _link_notes(view, ask_again)
    view.on_reply = live.saw_reply
    return live


def cmd_chat(args: argparse.Namespace) -> int:
    stream = args.stream if args.stream is not None else sys.stdout.isatty()

    async def one(client: GatewayClient) -> int:
        view = ChatView(args.session, raw=True, label=False, show_answers=stream)
        live = _live(client, args.session, view)
        approvals = LineApprovals(live, terminal_stdin())
        approvals.attach(view)
        interrupts = Interrupts(live, view)
        live.start()
        interrupts.install()
        try:
            ack = await live.send_chat(args.message, resend=not args.message.startswith("/"))
            live.saw_reply(ack.get("seq"))  # the answer is numbered after this
            run = view.expect(str(ack["runId"]))
            waits = [asyncio.ensure_future(w) for w in (run.done, live.gone.wait(), interrupts.quit.wait())]
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            for wait in waits[1:]:
                wait.cancel()
        finally:
            interrupts.remove()
            approvals.close()
            await live.close()
        if not run.done.done():
            if interrupts.quit.is_set():
                return EXIT_INTERRUPTED
            raise CliError("the gateway closed the connection before answering and did not come back within "
                           f"{RESUME_SECONDS:g} s; ask again", EXIT_FAILED)
        result = run.done.result()
        if result.get("state") == "error":
            raise CliError(str(result.get("text", "")), EXIT_FAILED)
        if not stream:
            print(result.get("text", ""))
        return EXIT_INTERRUPTED if interrupts.used else 0

    async def repl(client: GatewayClient) -> int:
        tty = sys.stdin.isatty()
        print(f"clawgate chat — session {args.session!r}. /help lists the commands, /quit leaves.")
        view = ChatView(args.session, raw=False, label=True)
        live = _live(client, args.session, view)
        interrupts = Interrupts(live, view)
        session = Repl(live, view, interrupts)
        live.start()
        interrupts.install()
        try:
            await ask_pending_approvals(live, view)
            stayed = await (session.on_terminal() if tty else session.on_stdin(StdinLines()))
        finally:
            interrupts.remove()
            await live.close()
        if not stayed:
            raise CliError(GONE, EXIT_UNREACHABLE)
        return 0

    return with_gateway(one if args.message is not None else repl, subscribe=[args.session])


def cmd_status(args: argparse.Namespace) -> int:
    async def ask(client: GatewayClient) -> dict[str, Any]:
        return await client.request("status")

    status = with_gateway(ask)
    if args.json:
        print_json(status)
    else:
        print("\n".join(status_lines(status)))
    return 0


def add_commands(sub: Any) -> None:
    p = sub.add_parser("chat", help="chat with the agent through the running gateway",
                       description="Chat with the agent through the running gateway: one message with -m,\n"
                                   "otherwise an interactive prompt. Ctrl-C stops the running answer; a second\n"
                                   "Ctrl-C (or one at an idle prompt) quits.",
                       epilog="chat commands (type them at the prompt):\n" + commands_help(),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-m", "--message", help="send one message, print the answer, exit")
    p.add_argument("--session", default="main", help="session key (default: main)")
    p.add_argument("--stream", dest="stream", action="store_true", default=None,
                   help="print the answer as it streams (the default on a terminal)")
    p.add_argument("--no-stream", dest="stream", action="store_false", help="print the answer when it is complete")
    p.set_defaults(fn=cmd_chat)

    p = sub.add_parser("status", help="show the running daemon's status")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_status)
