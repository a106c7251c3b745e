"""While the agent works on a chat: a typing indicator, and a status message with the step.

Driven by the event hub (`tool_start`, `run_end`, and `bg_job_start` / `bg_job_end` for background
jobs, which stay listed after the run ended until they end), so the loop knows nothing of Telegram. The
status message is reconciled by one worker per session: events only change the wanted text,
the worker sends, edits (at most once per `edit_interval`, the platforms' limits) or deletes it,
so bursts of tool calls coalesce into few edits and no call races another. A platform that cannot
edit gets typing only (the kit passes status_messages=False).

The status line is Markdown like every text the kit sends (rendered by the adapter, so Slack's `&<>` and
Telegram's entities are right): the tool's arguments, which the model chose, are written as short
`key: value` text (never the raw JSON of the event), shown visibly (agent/core/visible.py), cut to
STATUS_ARGS characters and escaped, so they can neither format nor mention.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Protocol

from clawgate.agent.core.redact import redact
from clawgate.agent.core.visible import visible

from .markdown import escape

log = logging.getLogger("clawgate.channels")
STATUS_ARGS = 120  # characters of a call's arguments in a status line
Locate = Callable[[str], "tuple[str, str | None] | None"]  # session key -> (chat id, thread id) of this channel


class ChatOps(Protocol):
    """Best-effort chat operations (failures are logged by the implementation, never raised)."""

    async def typing(self, chat_id: str, thread_id: str | None) -> None: ...
    async def post(self, chat_id: str, text: str, thread_id: str | None) -> str | None: ...
    async def edit(self, chat_id: str, message_id: str, text: str) -> bool: ...
    async def delete(self, chat_id: str, message_id: str) -> None: ...


@dataclass
class _Session:
    chat_id: str
    thread_id: str | None
    runs: set[str] = field(default_factory=set)
    steps: int = 0
    step: str | None = None  # the running turn's current step line
    jobs: dict[str, str] = field(default_factory=dict)  # background job id -> its line
    wanted: str | None = None  # status text that should be shown; None: no status message
    shown: str | None = None
    message_id: str | None = None
    last_edit: float = 0.0
    typed_at: float = float("-inf")
    typing: asyncio.Task[None] | None = None
    worker: asyncio.Task[None] | None = None


class Progress:
    def __init__(self, ops: ChatOps, busy: Callable[[str], bool], *, locate: Locate, typing_interval: float = 5.0,
                 edit_interval: float = 2.0, status_messages: bool = True,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self.ops = ops
        self.busy = busy
        self.locate = locate
        self.typing_interval = typing_interval
        self.edit_interval = edit_interval
        self.status_messages = status_messages
        self.clock = clock
        self._sleep = sleep
        self._sessions: dict[str, _Session] = {}

    def started(self, key: str, chat_id: str, thread_id: str | None, run_id: str) -> None:
        """A message for `key` was accepted: show typing until its run ends."""
        state = self._sessions.get(key)
        if state is None:
            state = self._sessions[key] = _Session(chat_id, thread_id)
        state.runs.add(run_id)
        alive = state.typing is not None and not state.typing.done()
        if alive and self.clock() - state.typed_at >= 1.0:  # show it now, not at the sleeping loop's next tick
            state.typing.cancel()  # type: ignore[union-attr]
            alive = False
        if not alive:
            state.typing = asyncio.create_task(self._type(key, state), name=f"typing:{key}")

    def on_event(self, event: dict[str, Any]) -> None:
        """Event hub subscriber (synchronous, so it only records and wakes the worker)."""
        if event["type"] not in ("tool_start", "run_end", "bg_job_start", "bg_job_end"):
            return  # text deltas and the rest: cheap to ignore
        key = event.get("session")
        if not isinstance(key, str):
            return
        state = self._sessions.get(key)
        if state is None and (event["type"] not in ("tool_start", "bg_job_start") or not self.status_messages):
            return
        if event["type"] in ("tool_start", "bg_job_start") and self.status_messages:
            if state is None:  # a run we did not see start (replayed after a restart)
                where = self.locate(key)
                if where is None:
                    return  # another channel's session
                state = self._sessions[key] = _Session(*where)
            summary = escape(arguments_line(str(event.get("summary") or "")))
            if event["type"] == "bg_job_start":
                state.jobs[str(event.get("job"))] = f"⏳ In the background: job {event.get('job')}" + \
                    (f" ({summary})" if summary else "")
            else:
                state.steps += 1
                state.step = f"⚙️ Working… step {state.steps}: {_name(str(event.get('tool')))}" + \
                    (f" ({summary})" if summary else "")
            self._show(key, state)
        elif event["type"] == "run_end" and state is not None:
            state.runs.discard(str(event.get("run_id")))
            state.steps = 0
            state.step = None
            self._show(key, state)
        elif event["type"] == "bg_job_end" and state is not None and state.jobs.pop(str(event.get("job")), None):
            self._show(key, state)

    def _show(self, key: str, state: _Session) -> None:
        """The wanted text: the turn's step, then one line per background job; None when neither."""
        lines = ([state.step] if state.step else []) + list(state.jobs.values())
        state.wanted = "\n".join(lines) or None
        self._kick(key, state)

    async def close(self) -> None:
        tasks = [t for s in self._sessions.values() for t in (s.typing, s.worker) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._sessions.clear()

    # typing --------------------------------------------------------------------------------
    async def _type(self, key: str, state: _Session) -> None:
        first = True
        while state.runs and (first or self.busy(key)):
            first = False
            state.typed_at = self.clock()
            await self.ops.typing(state.chat_id, state.thread_id)
            await self._sleep(self.typing_interval)
        state.runs.clear()  # a run that ended without run_end (answered by an interceptor) must not type forever
        self._forget_if_idle(key, state)

    # status message ------------------------------------------------------------------------
    def _kick(self, key: str, state: _Session) -> None:
        if state.worker is None or state.worker.done():
            state.worker = asyncio.create_task(self._reconcile(key, state), name=f"status:{key}")

    async def _reconcile(self, key: str, state: _Session) -> None:
        while state.wanted != state.shown or (state.wanted is None and state.message_id is not None):
            wanted = state.wanted
            if wanted is None:
                if state.message_id is not None:
                    message_id, state.message_id, state.shown = state.message_id, None, None
                    await self.ops.delete(state.chat_id, message_id)
                state.shown = None
            elif state.message_id is None:
                state.message_id = await self.ops.post(state.chat_id, wanted, state.thread_id)
                state.shown, state.last_edit = wanted, self.clock()
                if state.message_id is None:
                    break  # could not post; try again on the next step
            else:
                wait = state.last_edit + self.edit_interval - self.clock()
                if wait > 0:
                    await self._sleep(wait)
                    continue  # the wanted text may have changed (or the run ended) meanwhile
                await self.ops.edit(state.chat_id, state.message_id, wanted)
                state.shown, state.last_edit = wanted, self.clock()
        self._forget_if_idle(key, state)

    def _forget_if_idle(self, key: str, state: _Session) -> None:
        idle = not state.runs and state.wanted is None and state.message_id is None
        quiet = all(t is None or t.done() or t is asyncio.current_task() for t in (state.typing, state.worker))
        if idle and quiet and self._sessions.get(key) is state:
            del self._sessions[key]


def _name(tool: str) -> str:
    """A tool's name as inline code (a name with a backtick, which cannot be one, escaped instead)."""
    shown = visible(tool)
    return escape(shown) if "`" in shown or not shown.strip() else f"`{shown}`"


def arguments_line(summary: str, limit: int = STATUS_ARGS) -> str:
    """A call's arguments (the event's JSON object text, or a job's plain summary) as one short readable line:
    `key: value` pairs, lists of words joined by spaces, secrets redacted, hidden characters shown, cut with …"""
    try:
        args = json.loads(summary)
    except ValueError:
        args = None
    if isinstance(args, dict):
        pairs = []
        for key, value in args.items():
            if key == "…":
                pairs.append(f"… {value} more")
            elif isinstance(value, list) and all(isinstance(v, (str, int, float)) for v in value):
                pairs.append(f"{key}: {' '.join(str(v) for v in value)}")
            elif isinstance(value, str):
                pairs.append(f"{key}: {value}")
            else:
                pairs.append(f"{key}: {json.dumps(value, ensure_ascii=False)}")
        summary = " · ".join(pairs)
    line = visible(" ".join(redact(summary).split("\n")))
    return line if len(line) <= limit else line[:limit - 1] + "…"
