"""What `clawgate chat` shows of its session's events, whichever way it reads its input.

Every event goes through `ChatView.on_event` as it arrives (gateway/live_client.py reads all the
time): the answers to this terminal's own messages (streamed, with their tool steps), answers on
the session that came from elsewhere (another client's message, a cron job, the heartbeat),
labelled with where they came from, and approval questions. A reply is shown once, by its
number in the session, however often a reconnect hands it over again.

Two ways to stream: `raw` prints each piece of text as it comes (`chat -m` on a terminal, where
nothing else is on screen); otherwise whole lines are printed, so the prompt below them stays
intact (the interactive chat prints above its prompt).
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass
from typing import Any, Callable

GATEWAY_CHANNEL = "gateway"
ANSWER = "agent> "


def note(text: str) -> None:
    """A line about the chat (a tool step, a connection change): stderr, so stdout holds only answers."""
    print(text, file=sys.stderr, flush=True)


@dataclass
class Run:
    """A message this terminal sent, until its answer (final or error) arrives."""

    run_id: str
    done: "asyncio.Future[dict[str, Any]]"
    started: bool = False      # any text of it printed yet (the "agent> " prefix is written once)
    turn: str = ""             # the current model turn's text, as streamed
    printed: int = 0           # how much of `turn` is on the screen
    turn_ended: bool = False   # the turn is over: the next text starts a new one
    raw_open: bool = False     # raw mode: text printed without its newline yet
    command: bool = False      # a chat command sent as text: answered at once, never queued


def source_label(payload: dict[str, Any]) -> str:
    """Where an answer this terminal did not ask for came from, in a few words."""
    origin = payload.get("from") if isinstance(payload.get("from"), dict) else {}
    run_id = str(payload.get("runId") or "")
    if origin.get("kind") == "cron" or run_id.startswith("cron:"):
        name = origin.get("name") or (run_id.split(":")[1] if run_id.count(":") >= 1 else "")
        schedule = f", {origin['schedule']}" if origin.get("schedule") else ""
        return f'from cron job "{name}"{schedule}'
    if origin.get("kind") == "heartbeat" or run_id.startswith("hb:"):
        return "from the heartbeat"
    if origin.get("kind") == "hook" or run_id.startswith("hook:"):
        return f'from webhook "{origin.get("name") or run_id.split(":")[1]}"'
    if payload.get("kind") == "notice":
        return "notice"
    return "answer to a message sent from another client"


class ChatView:
    def __init__(self, session: str, *, raw: bool, label: bool, show_answers: bool = True,
                 on_reply: Callable[[Any], None] = lambda seq: None) -> None:
        """`raw`: stream text as it comes (see the module doc); `label`: start answers with "agent> "
        (not `chat -m`, whose stdout is the answer alone); `show_answers`: print this terminal's
        answers (False: the caller prints the final text itself, `chat -m --no-stream`)."""
        self.session, self.raw, self.label, self.show_answers = session, raw, label, show_answers
        # `chat -m`: answers it did not ask for go to stderr, so stdout stays its own answer alone
        self.others_to_stderr = not label
        self.on_reply = on_reply
        self.runs: dict[str, Run] = {}
        self.shown: set[int] = set()  # reply numbers already shown
        self.on_approval: Callable[[dict[str, Any]], None] = lambda payload: None
        self.on_resolved: Callable[[dict[str, Any]], None] = lambda payload: None

    # this terminal's runs ----------------------------------------------------------
    def expect(self, run_id: str, *, command: bool = False) -> Run:
        """Follow the answer to a message just sent (its events come after the chat.send response)."""
        run = self.runs.get(run_id)
        if run is None:
            run = Run(run_id, asyncio.get_running_loop().create_future(), command=command)
            self.runs[run_id] = run
        return run

    def busy(self) -> bool:
        """A message of this terminal is still unanswered (running or queued behind another)."""
        return any(not run.done.done() and not run.command for run in self.runs.values())

    def end_line(self) -> None:
        """Finish a raw-streamed line before something else is printed."""
        for run in self.runs.values():
            if run.raw_open:
                print(flush=True)
                run.raw_open = False

    # events ------------------------------------------------------------------------
    def on_event(self, frame: dict[str, Any]) -> None:
        name, payload = frame.get("event"), frame.get("payload") or {}
        if not isinstance(payload, dict):
            return
        if name == "approval":
            self._approval(payload)
        elif name == "chat" and payload.get("session", self.session) == self.session:
            self._chat(payload)
        elif name == "agent" and payload.get("runId") in self.runs:
            self._agent(self.runs[payload["runId"]], payload)

    def _approval(self, payload: dict[str, Any]) -> None:
        if payload.get("state") == "resolved":
            self.on_resolved(payload)
        elif payload.get("session_key") == self.session and payload.get("channel") == GATEWAY_CHANNEL:
            self.end_line()
            self.on_approval(payload)  # addressed to another chat: its own channel asks

    def _chat(self, payload: dict[str, Any]) -> None:
        run = self.runs.get(str(payload.get("runId")))
        if payload.get("kind") == "command" and run is None:
            return  # a command's answer goes to the connection that asked, in its response too: printed there
        state = payload.get("state")
        if state == "delta":
            if run is not None and not run.done.done():
                self._delta(run, payload)
            return
        seq = payload.get("seq")
        if isinstance(seq, int):
            if seq in self.shown:
                return  # handed over again by a resume: shown already
            self.shown.add(seq)
            self.on_reply(seq)
        if payload.get("kind") == "file":  # a file the agent sent: a line, not the run's answer
            self.end_line()
            note(f"  {payload.get('text', '')}")
            return
        if run is None or run.done.done():
            self._foreign(payload)
            return
        self._final(run, payload)
        run.done.set_result(payload)

    def _delta(self, run: Run, payload: dict[str, Any]) -> None:
        if payload.get("restart"):  # what was printed is not the answer: a retry starts again
            if run.printed:
                self.end_line()
                note("  (the model's answer broke off; it starts again)")
            run.turn, run.printed = "", 0
            return
        if run.turn_ended:
            run.turn, run.printed, run.turn_ended = "", 0, False
        run.turn += str(payload.get("text", ""))
        if not self.show_answers:
            return
        if self.raw:
            self._print_raw(run, run.turn[run.printed:])
            run.printed = len(run.turn)
            return
        cut = run.turn.rfind("\n") + 1  # whole lines only: the prompt below stays intact
        if cut > run.printed:
            for line in run.turn[run.printed:cut - 1].split("\n"):
                print(self._prefix(run) + line, flush=True)
            run.printed = cut

    def _print_raw(self, run: Run, text: str) -> None:
        if text:
            print(self._prefix(run) + text, end="", flush=True)
            run.raw_open = not text.endswith("\n")

    def _flush_turn(self, run: Run) -> None:
        """Print what the turn streamed that is not on the screen yet, and end its line."""
        rest = run.turn[run.printed:]
        if self.raw:
            self._print_raw(run, rest)
            self.end_line()
        elif rest:
            print(self._prefix(run) + rest, flush=True)
        run.printed = len(run.turn)

    def _final(self, run: Run, payload: dict[str, Any]) -> None:
        text = str(payload.get("text", ""))
        if payload.get("state") == "error":
            self.end_line()
            if self.label:  # `chat -m` reports it as its one-line error instead
                print(f"[error] {text}", flush=True)
            return
        if not self.show_answers:
            return
        # What this turn streamed is the answer's beginning: print the rest. Otherwise (the stream was
        # cut by a reconnect, or started again) the answer whole, on its own line.
        if run.turn and not text.startswith(run.turn):
            self.end_line()
            run.turn, run.printed = "", 0
        run.turn = text
        if run.printed < len(text) or not run.started:
            self._flush_turn(run)
        else:
            self.end_line()

    def _foreign(self, payload: dict[str, Any]) -> None:
        """An answer on this session that this terminal did not ask for."""
        self.end_line()
        note(f"  ({source_label(payload)})")
        text = ("[error] " if payload.get("state") == "error" else ANSWER) + str(payload.get("text", ""))
        if self.others_to_stderr:
            note(text)
        else:
            print(text, flush=True)

    def _agent(self, run: Run, payload: dict[str, Any]) -> None:
        stream = payload.get("stream")
        if stream == "turn_end":
            if self.show_answers:
                self._flush_turn(run)  # the next turn's text starts on its own line
            run.turn_ended = True
            return
        line = _step_line(stream, payload)
        if line is not None:
            self.end_line()
            note(line)

    def _prefix(self, run: Run) -> str:
        """"agent> " before the first text of an answer, where answers are labelled (not `chat -m`)."""
        if run.started:
            return ""
        run.started = True
        return ANSWER if self.label else ""


def _step_line(stream: Any, payload: dict[str, Any]) -> str | None:
    """A tool step or a sub-agent, as one line."""
    if stream == "tool_start":
        return f"  · {payload.get('tool')} {payload.get('summary', '')}".rstrip()
    if stream == "tool_end":
        status = payload.get("status", "ok")
        mark = "✓" if status == "ok" else "✗"
        return f"  {mark} {payload.get('tool')} {status} ({payload.get('duration_ms', 0):.0f} ms)"
    if stream == "subagent_start":  # docs/subagents.md
        return f"  ↳ sub-agent {payload.get('child')} started: {payload.get('task', '')}".rstrip()
    if stream == "subagent_end":
        return (f"  ↳ sub-agent {payload.get('child')} {payload.get('status')}: {payload.get('turns')} model calls, "
                f"{(payload.get('usage') or {}).get('total', 0)} tokens")
    return None
