"""Replay without side effects after a restore or fork.

The recorded future of the point a branch started from (model answers, tool intents and
results, user turns) is kept as a tape. While the new branch follows it — the same user
text, the same tool calls — recorded model answers are returned without calling the model
and recorded tool results are used without running the tool. The first difference ends the
replay (the branch diverged) and everything from there runs live.

One exception keeps the branch consistent: an effect the restore itself rolled back (workspace
files when files were restored, the task's plan when the conversation was) is re-applied by
running that tool for real — the world no longer has it, so this repeats nothing. Messages
sent, exec runs, web requests and cron changes are never repeated. What an `exec` changed in
the workspace is put back from its record (agent/checkpoints/effects.py) when files were
restored; a command with no record ends the replay before the model turn that ran it.

Every decision is a `replay` event (mode replayed | rerun | live) in the trace.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Callable

from ..providers.base import ModelRequest, ModelResponse, Provider, TextCallback
from ..session import Record, Session
from ..tools import ToolContext, ToolOutcome
from .effects import EFFECT_TOOLS, Effects

log = logging.getLogger(__name__)

FOLLOWED = ("user", "assistant", "tool_intent", "tool_done")
FILE_TOOLS = frozenset({"write_file", "edit_file", "memory_append", "memory_replace"})
TASK_TOOLS = frozenset({"task"})
Emit = Callable[..., Any]


class Tape:
    def __init__(self, tape_id: str, items: list[Record], rerun: frozenset[str]) -> None:
        self.id = tape_id
        self.items = [r for r in items if r.get("kind") in FOLLOWED]
        self.rerun = rerun
        self.files_restored = bool(FILE_TOOLS & rerun)  # the restore rolled the workspace back
        self.pos = 0
        self.diverged = False

    @property
    def active(self) -> bool:
        return not self.diverged and self.pos < len(self.items)

    def head(self) -> Record | None:
        return self.items[self.pos] if self.active else None

    def follow(self, record: Record) -> bool:
        """Advance past `record` if it is what the tape recorded next; else the branch diverged.
        Returns True when this record made the branch diverge."""
        if record.get("kind") not in FOLLOWED or not self.active:
            return False
        head = self.items[self.pos]
        if _same(head, record):
            self.pos += 1
            return False
        self.diverged = True
        return True


def _same(recorded: Record, now: Record) -> bool:
    kind = recorded["kind"]
    if kind != now.get("kind"):
        return False
    if kind == "user":
        return recorded.get("text") == now.get("text")
    if kind == "assistant":
        return recorded.get("content") == now.get("content")
    if kind == "tool_intent":
        return (recorded.get("id"), recorded.get("name"), recorded.get("input")) == \
               (now.get("id"), now.get("name"), now.get("input"))
    return recorded.get("id") == now.get("id")  # tool_done: a re-applied call may word its result differently


class Tapes:
    """Tapes by session key; written under state/checkpoints/tapes/, found again from the
    session log's `branch` event after a restart."""

    def __init__(self, folder: Path, emit: Emit, effects: Effects | None = None) -> None:
        self.folder = folder
        self.emit = emit
        self.effects = effects
        self._tapes: dict[str, Tape | None] = {}

    def write(self, tape_id: str, items: list[Record]) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        data = "".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n"
                       for r in items if r.get("kind") in FOLLOWED)
        (self.folder / f"{tape_id}.jsonl").write_text(data, encoding="utf-8")

    def forget(self, key: str) -> None:
        self._tapes.pop(key, None)

    def get(self, session: Session, *, before_last: bool = False) -> Tape | None:
        """The session's tape, positioned after what the branch did so far (all its records, or
        all but the one just appended, which the caller is about to follow)."""
        if session.key in self._tapes:
            return self._tapes[session.key]
        tape = None
        end = len(session.records) - (1 if before_last else 0)
        for index in range(end - 1, -1, -1):
            record = session.records[index]
            if record.get("kind") == "event" and record.get("name") == "branch":
                tape = self._load(record)
                if tape is not None:
                    for later in session.records[index + 1:end]:
                        tape.follow(later)
                break
        self._tapes[session.key] = tape
        return tape

    def _load(self, event: Record) -> Tape | None:
        tape_id = event.get("tape")
        if not tape_id:
            return None
        path = self.folder / f"{tape_id}.jsonl"
        try:
            items = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        except (OSError, ValueError):
            log.warning("replay tape %s is missing or unreadable; the branch runs live", tape_id)
            return None
        return Tape(str(tape_id), items, frozenset(event.get("rerun") or ()))

    def on_append(self, session: Session, record: Record) -> None:
        """Session observer: move the session's tape along what the branch actually does."""
        if record.get("seq") == 1:  # a fresh log (after a reset): no tape from before applies
            self._tapes[session.key] = None
        if record.get("kind") not in FOLLOWED:
            return
        tape = self.get(session, before_last=True)
        if tape is not None and tape.follow(record):
            self.emit("replay", session=session.key, mode="live", reason="diverged", at=record.get("kind"))


class ReplayProvider:
    """Wraps the real provider: a branch on its tape gets the recorded answer, not a model call."""

    def __init__(self, inner: Provider, tapes: Tapes, session_of: Callable[[str], Session | None]) -> None:
        self.inner = inner
        self.tapes = tapes
        self.session_of = session_of

    @property
    def name(self) -> str:
        return self.inner.name

    def __getattr__(self, attr: str) -> Any:  # warm() and other optional extras of the real provider
        return getattr(self.inner, attr)

    async def complete(self, request: ModelRequest, on_text: TextCallback | None = None) -> ModelResponse:
        session = self.session_of(request.session_key) if request.session_key else None
        tape = self.tapes.get(session) if session is not None else None
        head = tape.head() if tape is not None else None
        if tape is not None and head is not None and head["kind"] == "assistant" and \
                (missing := self._unrecorded_command(tape, head)) is not None:
            tape.diverged = True  # replaying the turn would leave the branch without that command's changes
            self.tapes.emit("replay", session=request.session_key, mode="live", reason="command effects not recorded",
                            at="model", tool=missing)
            return await self.inner.complete(request, on_text)
        if tape is not None and head is not None and head["kind"] == "assistant":
            content = head["content"]
            self.tapes.emit("replay", session=request.session_key, mode="replayed", what="model", tape=tape.id)
            tool_use = any(b.get("type") == "tool_use" for b in content)
            return ModelResponse(content=content, stop_reason="tool_use" if tool_use else "end_turn",
                                 usage={}, model="replay", latency_ms=0.0)
        if tape is not None and tape.active:
            tape.diverged = True
            self.tapes.emit("replay", session=request.session_key, mode="live", reason="diverged", at="model")
        return await self.inner.complete(request, on_text)

    def _unrecorded_command(self, tape: Tape, head: Record) -> str | None:
        """A command in the recorded turn whose workspace changes cannot be put back (files were restored)."""
        if not tape.files_restored or self.tapes.effects is None:
            return None
        for block in head.get("content") or []:
            if block.get("type") == "tool_use" and block.get("name") in EFFECT_TOOLS \
                    and self.tapes.effects.get(str(block.get("id"))) is None:
                return str(block.get("name"))
        return None

    async def close(self) -> None:
        await self.inner.close()


class ToolReplay:
    """Registry interceptor: a call the tape recorded with the same arguments gets its recorded result."""

    def __init__(self, tapes: Tapes, session_of: Callable[[str], Session | None]) -> None:
        self.tapes = tapes
        self.session_of = session_of

    def __call__(self, call: dict[str, Any], ctx: ToolContext) -> ToolOutcome | None:
        session = self.session_of(ctx.session_key)
        tape = self.tapes.get(session) if session is not None else None
        head = tape.head() if tape is not None else None
        if tape is None or head is None or head["kind"] != "tool_done" or head.get("id") != call["id"]:
            return None
        if call["name"] in tape.rerun:
            self.tapes.emit("replay", session=ctx.session_key, mode="rerun", what="tool", tool=call["name"], tape=tape.id)
            return None
        fields: dict[str, Any] = {}
        if call["name"] in EFFECT_TOOLS and tape.files_restored and self.tapes.effects is not None:
            put_back = self.tapes.effects.reapply(call["id"])
            fields["effects"] = put_back if put_back is not None else "unknown"
        self.tapes.emit("replay", session=ctx.session_key, mode="replayed", what="tool", tool=call["name"],
                        tape=tape.id, **fields)
        return ToolOutcome(str(head.get("content", "")), bool(head.get("is_error")), "replayed")
