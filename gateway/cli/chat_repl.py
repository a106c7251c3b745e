"""The interactive `clawgate chat`: a prompt that stays usable while the session lives.

On a terminal the prompt is prompt_toolkit's asyncio prompt: the socket is read all the time
(gateway/live_client.py), and whatever arrives meanwhile — the answer streaming in line by line,
another client's answers, a cron job's result — is printed above the prompt without breaking the
line being typed. A message typed while an answer is running is sent at once and shown as queued
(the session runs it next). Ctrl-C stops the running answer; a second one, or one at an idle
prompt, quits. With stdin not a terminal (`chat < script.txt`), lines are sent one at a time,
each after the previous answer.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..client import GatewayError
from ..live_client import LiveClient
from .chat_input import Interrupts, StdinLines, approval_hint, approval_text, resolve
from .chat_view import ChatView, note

# The chat commands, as `/help` and `chat --help` list them. /new and /stop are the gateway's
# sessions.reset and chat.stop; /approve and /deny answer an approval (approvals.resolve); the
# others are sent as chat text, which the gateway answers at once (never queued behind a run).
COMMANDS: list[tuple[str, str]] = [
    ("/help", "this list"),
    ("/new", "start a fresh conversation (the old one is archived)"),
    ("/status", "is the agent working, what is queued, which model"),
    ("/stop", "cancel the running answer and the session's background jobs (also: Ctrl-C)"),
    ("/tasks", "the long tasks of this session"),
    ("/undo [N]", "go back N steps in the current task, files too"),
    ("/approve ID", "approve a tool call that waits (/deny ID refuses it)"),
    ("/quit", "leave (also: Ctrl-D, or Ctrl-C with nothing running)"),
]
SENT_AS_TEXT = ("/status", "/tasks", "/undo")
BUSY_NEW = "the agent is still working on your last message: /stop it first (or wait), then /new"


def commands_help() -> str:
    width = max(len(name) for name, _ in COMMANDS)
    return "\n".join(f"  {name.ljust(width)}  {text}" for name, text in COMMANDS)


class Repl:
    def __init__(self, live: LiveClient, view: ChatView, interrupts: Interrupts) -> None:
        self.live, self.view, self.interrupts = live, view, interrupts
        self.asking: str | None = None  # the approval the next line answers (y/N)
        self.waiting: list[str] = []    # further approvals, answered with /approve ID
        self._prompt: Any = None
        view.on_approval, view.on_resolved = self._requested, self._resolved

    @property
    def session(self) -> str:
        return self.live.session

    # the two ways of reading ---------------------------------------------------------
    async def on_terminal(self) -> bool:
        """Prompt until /quit, Ctrl-D or Ctrl-C; False when the gateway went away for good."""
        from prompt_toolkit import PromptSession
        from prompt_toolkit.patch_stdout import patch_stdout

        self._prompt = PromptSession()
        watcher = asyncio.create_task(self._end_prompt())
        try:
            with patch_stdout():
                while not (self.interrupts.quit.is_set() or self.live.gone.is_set()):
                    try:  # awaited here, not in a task of its own: Ctrl-C comes back as KeyboardInterrupt
                        line = await self._prompt.prompt_async(self._message, handle_sigint=False)
                    except KeyboardInterrupt:
                        self.interrupts.pressed()
                        continue
                    except EOFError:  # Ctrl-D, or _end_prompt
                        break
                    if not await self.line(line):
                        break
        finally:
            watcher.cancel()
        return not self.live.gone.is_set()

    async def _end_prompt(self) -> None:
        """Close the prompt once the chat is over (Ctrl-C from a signal, or the gateway gone for good)."""
        await _first(self.live.gone.wait(), self.interrupts.quit.wait())
        while True:
            app = self._prompt.app
            if app.is_running and not app.is_done:
                app.exit(exception=EOFError())
            await asyncio.sleep(0.1)  # until the loop has seen it (cancelled then)

    async def on_stdin(self, stdin: StdinLines) -> bool:
        """Lines from a file or pipe, each sent after the previous answer; False as on_terminal."""
        while not self.interrupts.quit.is_set():
            print("you> ", end="", flush=True)
            reading = asyncio.ensure_future(stdin.readline())
            ended = await _first(reading, self.live.gone.wait(), self.interrupts.quit.wait())
            if ended is not reading:
                await _cancel(reading)
                return not self.live.gone.is_set()
            line = reading.result()
            if line is None:
                print()
                return True
            if not await self.line(line):
                return True
            pending = [run.done for run in self.view.runs.values() if not run.done.done()]
            if pending:
                await _first(asyncio.gather(*pending), self.live.gone.wait(), self.interrupts.quit.wait())
                if self.live.gone.is_set():
                    return False
        return True

    def _message(self) -> str:
        return "approve? [y/N] " if self.asking else "you> "

    def _redraw(self) -> None:
        app = getattr(self._prompt, "app", None)
        if app is not None and app.is_running:
            app.invalidate()

    # one line ------------------------------------------------------------------------
    async def line(self, text: str) -> bool:
        """Act on one line; False to leave."""
        text = text.strip()
        if self.asking is not None and not text.startswith("/"):
            approval_id, self.asking = self.asking, (self.waiting.pop(0) if self.waiting else None)
            await resolve(self.live, approval_id, text.lower() in ("y", "yes"))
            return True
        if not text:
            return True
        word, _, rest = text.partition(" ")
        if word in ("/quit", "/exit"):
            return False
        if word == "/help":
            print("chat commands:\n" + commands_help(), flush=True)
        elif word == "/new":
            await self._new()
        elif word == "/stop":
            await self.interrupts.stop()
        elif word in ("/approve", "/deny") and rest.strip():
            approval_id = rest.split()[0]
            self._forget(approval_id)
            await resolve(self.live, approval_id, word == "/approve")
        else:
            await self._send(text, command=word in SENT_AS_TEXT)
        return True

    async def _new(self) -> None:
        if self.view.busy():
            note(f"  ({BUSY_NEW})")
            return
        try:
            result = await self.live.request("sessions.reset", {"session": self.session})
        except GatewayError as exc:
            note(f"  ({BUSY_NEW})" if exc.code == "conflict" else f"  (could not start anew: {exc.message})")
            return
        self.view.runs.clear()
        print("(started a new conversation" + ("; the old one is archived)" if result.get("archived") else ")"),
              flush=True)

    async def _send(self, text: str, *, command: bool) -> None:
        queued = self.view.busy() and not command
        try:
            # A message is sent again with the same key when the connection drops first (never run twice);
            # a command is not (/undo twice would undo two steps).
            ack = await self.live.send_chat(text, resend=not text.startswith("/"))
        except GatewayError as exc:
            if exc.code == "closed":
                note("  (not sent: the connection to the gateway is down; send it again once it is back)")
            else:
                note(f"  (not sent: {exc.message or exc.code})")
            return
        self.live.saw_reply(ack.get("seq"))
        reply = ack.get("reply", ack.get("text") if ack.get("command") else None)
        if command and isinstance(reply, str):  # the gateway answered the command in its response
            print(reply, flush=True)
            return
        self.view.expect(str(ack["runId"]), command=command)
        if queued:
            note("  (queued: it runs after the current answer)")

    # approvals -----------------------------------------------------------------------
    def _requested(self, payload: dict[str, Any]) -> None:
        approval_id = str(payload.get("id", ""))
        if approval_id == self.asking or approval_id in self.waiting:
            return  # asked already: listed at (re)connection and announced live too
        if self.asking is None and self._prompt is not None:
            self.asking = approval_id
            note(f"  ? approve {approval_text(payload)}? answer y or n")
            self._redraw()
            return
        note(f"  ? {approval_text(payload)}")
        note(f"  ? approval {approval_id} waits: /approve {approval_id} or /deny {approval_id}")
        if self._prompt is None:
            note(approval_hint(approval_id))
        else:
            self.waiting.append(approval_id)

    def _resolved(self, payload: dict[str, Any]) -> None:
        approval_id = str(payload.get("id"))
        if self._forget(approval_id):
            note(f"  (approval {approval_id} answered elsewhere: {payload.get('how')})")

    def _forget(self, approval_id: str) -> bool:
        """Stop asking about an approval; True when it was still being asked."""
        if self.asking == approval_id:
            self.asking = self.waiting.pop(0) if self.waiting else None
            self._redraw()
            return True
        if approval_id in self.waiting:
            self.waiting.remove(approval_id)
            return True
        return False


async def _first(*waits: Any) -> Any:
    """Wait for the first of these to finish; return it (the others are cancelled, except the first)."""
    tasks = [asyncio.ensure_future(w) for w in waits]
    done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    for task in tasks[1:]:
        if task not in done:
            task.cancel()
    return next(task for task in tasks if task in done)


async def _cancel(task: "asyncio.Future[Any]") -> None:
    task.cancel()
    try:
        await task
    except (asyncio.CancelledError, KeyboardInterrupt, EOFError):
        pass
