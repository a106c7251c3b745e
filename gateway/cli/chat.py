"""`clawgate chat` and `clawgate status`: commands that need the running gateway.

A chat turn is shown as it happens: tool steps as lines on stderr (the answer alone goes to
stdout, so `chat -m … > answer.txt` stays clean), streamed turns separated by a newline, and an
approval addressed to this session asked as y/N on the terminal — without that the run would
wait silently until the approval timed out. A connection lost while waiting for the answer (a
daemon restart) is re-established and resumed from the last reply number seen, so the answer
still arrives, once.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Any

from websockets.exceptions import WebSocketException

from ..client import GatewayClient, GatewayError
from .errors import EXIT_FAILED, CliError
from .output import print_json
from .remote import HELLO_SECONDS, with_gateway
from .status_view import status_lines

GATEWAY_CHANNEL = "gateway"
RESUME_SECONDS = 60.0  # how long a chat waiting for its answer tries to get back to a gateway that went away


class StdinLines:
    """Lines from stdin without a thread, so a pending question can be abandoned (answered elsewhere)."""

    def __init__(self) -> None:
        self._buffer = b""
        self._eof = False
        self._fd = sys.stdin.fileno()

    async def readline(self) -> str | None:
        """The next line, or None at end of input."""
        loop = asyncio.get_running_loop()
        while b"\n" not in self._buffer and not self._eof:
            ready: asyncio.Future[None] = loop.create_future()
            try:
                loop.add_reader(self._fd, lambda: ready.done() or ready.set_result(None))
            except (PermissionError, OSError):  # a regular file (`chat < notes.txt`): always readable
                chunk = await loop.run_in_executor(None, os.read, self._fd, 4096)
            else:
                try:
                    await ready
                finally:
                    loop.remove_reader(self._fd)
                chunk = os.read(self._fd, 4096)
            if chunk:
                self._buffer += chunk
            else:
                self._eof = True
        if not self._buffer:
            return None
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode(errors="replace")


def _note(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


class Link:
    """The chat's connection to the gateway: after a drop it reconnects and asks for the replies
    after the last number it saw (connect `resume`, docs/protocol.md)."""

    def __init__(self, client: GatewayClient) -> None:
        self.client = client
        self.seen: dict[str, int] = {}  # session -> number of the last reply seen
        self._opened: list[GatewayClient] = []

    def saw(self, session: str, seq: Any) -> None:
        if isinstance(seq, int) and seq > self.seen.get(session, -1):
            self.seen[session] = seq

    async def reconnect(self, session: str) -> bool:
        """Connect again within RESUME_SECONDS, resuming `session`; False when the gateway stays away."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + RESUME_SECONDS
        while True:
            client = GatewayClient(self.client.url, self.client.token, subscribe=[session], events=self.client.wanted,
                                   resume={session: self.seen.get(session, 0)})
            try:
                await asyncio.wait_for(client.__aenter__(), HELLO_SECONDS)
            except (OSError, asyncio.TimeoutError, WebSocketException, GatewayError):
                await client.__aexit__(None, None, None)
                if loop.time() >= deadline:
                    return False
                await asyncio.sleep(0.5)
                continue
            self._opened.append(client)
            self.client = client
            return True

    async def close(self) -> None:
        """Close the connections this link opened (the first one belongs to its caller)."""
        for client in self._opened:
            await client.__aexit__(None, None, None)


class TurnView:
    """Prints one run's events: deltas, tool steps, turn breaks, approval questions."""

    def __init__(self, link: Link, session: str, stream: bool, stdin: StdinLines | None) -> None:
        self.link, self.session, self.stream, self.stdin = link, session, stream, stdin
        self.printed = False  # text of the current model turn already on stdout
        self.asking: tuple[str, asyncio.Task[str | None]] | None = None
        self.resumed = False  # the connection was lost mid-answer: the streamed text may be incomplete

    async def run(self, text: str) -> dict[str, Any]:
        ack = await self.link.client.request("chat.send", {"session": self.session, "text": text})
        run_id = ack["runId"]
        self.link.saw(self.session, ack.get("seq"))  # the answer is numbered after this
        events = self.link.client.events().__aiter__()
        next_event: asyncio.Future[dict[str, Any]] | None = None
        try:
            while True:
                if next_event is None:
                    next_event = asyncio.ensure_future(events.__anext__())
                waiting: set[asyncio.Future[Any]] = {next_event}
                if self.asking:
                    waiting.add(self.asking[1])
                done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
                if self.asking and self.asking[1] in done:
                    await self._answered(*self.asking)
                if next_event not in done:
                    continue
                try:
                    frame = next_event.result()
                except (StopAsyncIteration, WebSocketException, OSError):
                    next_event = None
                    _note("  (the connection to the gateway was lost; reconnecting to get the answer…)")
                    if not await self.link.reconnect(self.session):
                        return {"state": "error", "text": "the gateway closed the connection before answering and did "
                                                          f"not come back within {RESUME_SECONDS:g} s; ask again"}
                    events = self.link.client.events().__aiter__()
                    self.resumed = True
                    continue
                next_event = None
                final = await self._on(frame, run_id)
                if final is not None:
                    return final
        finally:
            for pending in (next_event, self.asking[1] if self.asking else None):
                if pending is not None and not pending.done():
                    pending.cancel()
            self.asking = None

    async def _on(self, frame: dict[str, Any], run_id: str) -> dict[str, Any] | None:
        name, payload = frame.get("event"), frame.get("payload") or {}
        if name == "approval":
            await self._approval(payload)
            return None
        if payload.get("runId") != run_id:
            return None
        if name == "chat":
            self.link.saw(self.session, payload.get("seq"))
            if payload.get("kind") == "file":  # a file the agent sent: a line, not the run's answer
                if self.printed:
                    print(flush=True)
                    self.printed = False
                _note(f"  {payload.get('text', '')}")
                return None
            if payload.get("state") == "delta":
                if payload.get("restart") and self.printed:  # what was printed is not the answer
                    print(flush=True)
                    _note("  (the model's answer broke off; it starts again)")
                    self.printed = False
                if self.stream:
                    print(payload.get("text", ""), end="", flush=True)
                    self.printed = True
                return None
            if self.printed:
                print(flush=True)
            if self.resumed and self.stream and payload.get("state") == "final":
                print(payload.get("text", ""), flush=True)  # whole: the streamed part was cut by the reconnect
            return payload
        if name == "agent":
            stream = payload.get("stream")
            if stream == "turn_end" and self.printed:
                print(flush=True)  # the next turn's text starts on its own line
                self.printed = False
            elif stream == "tool_start":
                _note(f"  · {payload.get('tool')} {payload.get('summary', '')}".rstrip())
            elif stream == "tool_end":
                status = payload.get("status", "ok")
                mark = "✓" if status == "ok" else "✗"
                _note(f"  {mark} {payload.get('tool')} {status} ({payload.get('duration_ms', 0):.0f} ms)")
            elif stream == "subagent_start":  # docs/subagents.md
                _note(f"  ↳ sub-agent {payload.get('child')} started: {payload.get('task', '')}".rstrip())
            elif stream == "subagent_end":
                _note(f"  ↳ sub-agent {payload.get('child')} {payload.get('status')}: {payload.get('turns')} model calls, "
                      f"{(payload.get('usage') or {}).get('total', 0)} tokens")
        return None

    async def _approval(self, payload: dict[str, Any]) -> None:
        approval_id = str(payload.get("id", ""))
        if payload.get("state") == "resolved":
            if self.asking and self.asking[0] == approval_id:
                self.asking[1].cancel()
                self.asking = None
                _note(f"\n  (answered elsewhere: {payload.get('how')})")
            return
        if payload.get("session_key") != self.session or payload.get("channel") != GATEWAY_CHANNEL:
            return  # addressed to another chat: its own channel asks
        # shown_*: every hidden character written <U+XXXX> (agent/core/visible.py): an escape sequence in a
        # command must not rewrite the terminal's line, nor an override reorder it
        what = f"{payload.get('tool')}: {payload.get('shown_summary', payload.get('summary', ''))}"
        if payload.get("shown_reason", payload.get("reason")):
            what += f" ({payload.get('shown_reason', payload.get('reason'))})"
        if self.stdin is None or self.asking is not None:
            _note(f"  ? approval {approval_id} needed for {what}; answer with `clawgate approvals approve "
                  f"{approval_id}` or `clawgate approvals deny {approval_id}`")
            return
        if self.printed:
            print(flush=True)
            self.printed = False
        print(f"  ? approve {what}? [y/N] ", end="", file=sys.stderr, flush=True)
        self.asking = (approval_id, asyncio.ensure_future(self.stdin.readline()))

    async def _answered(self, approval_id: str, asked: "asyncio.Task[str | None]") -> None:
        self.asking = None
        if asked.cancelled():
            return
        line = asked.result()
        if line is None:
            _note(f"\n  (no terminal input; answer with `clawgate approvals approve {approval_id}` or deny)")
            return
        approve = line.strip().lower() in ("y", "yes")
        # A second connection: this one's reader is busy with the event stream.
        async with GatewayClient(self.link.client.url, self.link.client.token) as other:
            try:
                await other.request("approvals.resolve", {"id": approval_id, "approve": approve})
            except Exception as exc:  # e.g. timed out meanwhile: say so, the run goes on
                _note(f"  (could not answer: {getattr(exc, 'message', exc)})")
                return
        _note("  approved" if approve else "  denied")


def _stdin_for_questions() -> StdinLines | None:
    try:
        return StdinLines() if sys.stdin is not None and sys.stdin.isatty() else None
    except (ValueError, OSError):
        return None


def cmd_chat(args: argparse.Namespace) -> int:
    stream = args.stream if args.stream is not None else sys.stdout.isatty()

    async def one(client: GatewayClient) -> int:
        link = Link(client)
        try:
            result = await TurnView(link, args.session, stream, _stdin_for_questions()).run(args.message)
        finally:
            await link.close()
        if result["state"] == "error":
            raise CliError(result["text"], EXIT_FAILED)
        if not stream:
            print(result["text"])
        return 0

    async def repl(client: GatewayClient) -> int:
        print(f"clawgate chat — session {args.session!r}. /quit to leave, /new to reset the session.")
        link = Link(client)
        try:
            return await turns(link, StdinLines())
        finally:
            await link.close()

    async def turns(link: Link, stdin: StdinLines) -> int:
        while True:
            print("you> ", end="", flush=True)
            line = await stdin.readline()
            if line is None:
                print()
                return 0
            line = line.strip()
            if not line:
                continue
            if line in ("/quit", "/exit"):
                return 0
            if line == "/new":
                await link.client.request("sessions.reset", {"session": args.session})
                print("(session reset)")
                continue
            print("agent> ", end="", flush=True)
            view = TurnView(link, args.session, True, stdin if sys.stdin.isatty() else None)
            result = await view.run(line)
            if result["state"] == "error":
                print(f"\n[error] {result['text']}")

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
    p = sub.add_parser("chat", help="chat with the agent through the running gateway")
    p.add_argument("-m", "--message", help="send one message, print the answer, exit")
    p.add_argument("--session", default="main", help="session key (default: main)")
    p.add_argument("--stream", dest="stream", action="store_true", default=None,
                   help="print the answer as it streams (the default on a terminal)")
    p.add_argument("--no-stream", dest="stream", action="store_false", help="print the answer when it is complete")
    p.set_defaults(fn=cmd_chat)

    p = sub.add_parser("status", help="show the running daemon's status")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_status)
