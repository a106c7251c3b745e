"""Input for `clawgate chat`: lines from stdin without a thread, Ctrl-C, and approvals asked as y/N.

Kept apart from the chat loop so both ways of chatting (one message with `-m`, the interactive
prompt) share them.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from typing import Any

from ..client import GatewayError
from ..live_client import LiveClient
from .chat_view import ChatView, note


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


def terminal_stdin() -> StdinLines | None:
    """stdin when it is a terminal a question can be asked on; None otherwise."""
    try:
        return StdinLines() if sys.stdin is not None and sys.stdin.isatty() else None
    except (ValueError, OSError):
        return None


def approval_text(payload: dict[str, Any]) -> str:
    """The request as the owner must read it: `shown_*` has every hidden character written <U+XXXX>
    (agent/core/visible.py), so an escape sequence in a command cannot rewrite the terminal's line,
    nor an override reorder it."""
    what = f"{payload.get('tool')}: {payload.get('shown_summary', payload.get('summary', ''))}"
    reason = payload.get("shown_reason", payload.get("reason"))
    return what + (f" ({reason})" if reason else "")


def approval_hint(approval_id: str) -> str:
    return (f"  ? approval {approval_id} needed; answer with `clawgate approvals approve {approval_id}` or "
            f"`clawgate approvals deny {approval_id}`")


async def resolve(live: LiveClient, approval_id: str, approve: bool) -> None:
    """Answer an approval on the chat's own connection, and say how it went in one line."""
    try:
        await live.request("approvals.resolve", {"id": approval_id, "approve": approve})
    except GatewayError as exc:  # e.g. timed out meanwhile: say so, the run goes on
        note(f"  (could not answer: {exc.message or exc.code})")
        return
    note("  approved" if approve else "  denied")


class LineApprovals:
    """`chat -m` on a terminal: an approval for this session is asked as y/N on stdin; without a
    terminal, a line says how to answer it from another shell."""

    def __init__(self, live: LiveClient, stdin: StdinLines | None) -> None:
        self.live, self.stdin = live, stdin
        self.asking: tuple[str, asyncio.Task[None]] | None = None

    def attach(self, view: ChatView) -> None:
        view.on_approval, view.on_resolved = self.requested, self.resolved

    def requested(self, payload: dict[str, Any]) -> None:
        approval_id = str(payload.get("id", ""))
        if self.stdin is None or self.asking is not None:
            note(f"  ? {approval_text(payload)}")
            note(approval_hint(approval_id))
            return
        print(f"  ? approve {approval_text(payload)}? [y/N] ", end="", file=sys.stderr, flush=True)
        self.asking = (approval_id, asyncio.create_task(self._ask(approval_id)))

    async def _ask(self, approval_id: str) -> None:
        assert self.stdin is not None
        line = await self.stdin.readline()
        self.asking = None
        if line is None:
            note(f"\n  (no terminal input; answer with `clawgate approvals approve {approval_id}` or deny)")
            return
        await resolve(self.live, approval_id, line.strip().lower() in ("y", "yes"))

    def resolved(self, payload: dict[str, Any]) -> None:
        if self.asking is not None and self.asking[0] == str(payload.get("id")):
            self.asking[1].cancel()
            self.asking = None
            note(f"\n  (answered elsewhere: {payload.get('how')})")

    def close(self) -> None:
        if self.asking is not None:
            self.asking[1].cancel()


class Interrupts:
    """Ctrl-C: the first stops what this terminal asked for (the session's running turn), a
    second — or one while nothing of it runs — quits (`quit` is set)."""

    def __init__(self, live: LiveClient, view: ChatView) -> None:
        self.live, self.view = live, view
        self.quit = asyncio.Event()
        self._stopping: set[str] = set()  # the runs a Ctrl-C asked to stop
        self.used = False  # a Ctrl-C stopped something (`chat -m` then exits 130, as interrupted)

    def install(self) -> None:
        """Take SIGINT (the interactive prompt gets Ctrl-C as a key instead and calls `pressed`)."""
        try:
            asyncio.get_running_loop().add_signal_handler(signal.SIGINT, self.pressed)
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or no signals here
            pass

    def remove(self) -> None:
        try:
            asyncio.get_running_loop().remove_signal_handler(signal.SIGINT)
        except (NotImplementedError, RuntimeError, ValueError):
            pass

    def stopping(self) -> bool:
        return any(not run.done.done() for key, run in self.view.runs.items() if key in self._stopping)

    def pressed(self) -> None:
        if not self.view.busy() or self.stopping():
            self.quit.set()
            return
        self._stopping = {key for key, run in self.view.runs.items() if not run.done.done()}
        self.used = True
        self.view.end_line()
        note("  (stopping the run; Ctrl-C again to quit)")
        asyncio.create_task(self.stop())

    async def stop(self) -> None:
        """Stop the session's running turn and its background jobs (`chat.stop`), in one line."""
        try:
            result = await self.live.request("chat.stop", {"session": self.live.session})
        except GatewayError as exc:
            note(f"  (could not stop: {exc.message or exc.code})")
            self._stopping.clear()
            return
        jobs = result.get("backgroundCancelled") or []
        if jobs:
            note(f"  (cancelled background job{'s' if len(jobs) > 1 else ''} {', '.join(map(str, jobs))})")
        if not result.get("stopped"):
            note("  (nothing was running" + (": your messages are still queued)" if self.view.busy() else ")"))
