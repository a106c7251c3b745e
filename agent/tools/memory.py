"""Memory tools: remember a fact, correct one, search memory and transcripts, read them back.

MEMORY.md changes one line at a time (append, or replace by exact match): a model can never
overwrite the whole file. Descriptions are short on purpose — they are sent with every request.
What memory_search and memory_get return is wrapped as untrusted data: it surfaces transcripts
and notes other people (and fetched pages, quoted in old tool results) wrote.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Callable
from urllib.parse import unquote

from pydantic import Field

from clawgate.config.agents import agent_id_of

from ..memory.store import Memory, MemoryProblem
from ..context.shared_view import NOBODY, visible_records
from ..memory.search import MemorySearch, record_text, transcript_records
from ..session import Record, session_file_name
from ..trust.untrusted import wrap_untrusted
from .base import Args, Tool, ToolContext, ToolError
from .files import lines_of, numbered, pinned_file

GET_CAP = 16_000
RECORD_CAP = 4_000


class MemoryAppend(Tool):
    name = "memory_append"
    description = ("Remember one lasting fact (preference, decision, convention) in MEMORY.md; "
                   "daily=true: a note in today's log instead. No secrets.")
    side_effects = True

    class Arguments(Args):
        text: str = Field(min_length=1, max_length=4000)
        daily: bool = False

    def needs_approval(self, args: Arguments, ctx: ToolContext) -> str | None:
        if ctx.owner or args.daily:
            return None
        return "MEMORY.md is part of every session's instructions; a guest's fact needs the owner's approval"

    def lasting_effect(self, args: Arguments, ctx: ToolContext) -> str | None:
        return "writes " + ("today's memory log" if args.daily else "MEMORY.md, which is in every session's prompt")

    async def run(self, args: Arguments, ctx: ToolContext) -> str:
        memory = Memory(ctx.workspace.root)
        if args.daily:
            path = memory.log(args.text)
            return f"appended to {memory.relative(path)}"
        try:
            return memory.append_fact(args.text) + " (in your prompt from the next session)"
        except MemoryProblem as exc:
            raise _tool_error(exc) from None


class MemoryReplace(Tool):
    name = "memory_replace"
    description = "Correct a MEMORY.md fact: `old` is exact text of one line; empty `new` removes the line."
    side_effects = True

    class Arguments(Args):
        old: str = Field(min_length=1, max_length=4000)
        new: str = Field("", max_length=4000)

    def needs_approval(self, args: Arguments, ctx: ToolContext) -> str | None:
        return None if ctx.owner else "MEMORY.md is part of every session's instructions; a guest's change needs the owner's approval"

    def lasting_effect(self, args: Arguments, ctx: ToolContext) -> str | None:
        return "changes MEMORY.md, which is in every session's prompt"

    async def run(self, args: Arguments, ctx: ToolContext) -> str:
        try:
            return Memory(ctx.workspace.root).replace_fact(args.old, args.new)
        except MemoryProblem as exc:
            raise _tool_error(exc) from None


class MemorySearchTool(Tool):
    name = "memory_search"
    description = "Keyword search of MEMORY.md, daily logs and past transcripts; file:line hits for memory_get."

    class Arguments(Args):
        query: str = Field(min_length=1, max_length=500)
        limit: int = Field(8, ge=1, le=30)

    def __init__(self, sessions: Path | None = None) -> None:
        self.sessions = sessions
        self._indexes: dict[Path, MemorySearch] = {}

    async def run(self, args: Arguments, ctx: ToolContext) -> str:
        root = ctx.workspace.root
        index = self._indexes.get(root)
        if index is None:
            index = self._indexes[root] = MemorySearch(root, self.sessions)
        hits = index.search(args.query, args.limit, visible=_same_agent(ctx) if ctx.owner else _own_transcripts(ctx),
                            shown=None if ctx.owner else _their_records(ctx))
        if not hits:
            return f"no matches for {args.query!r} in memory or transcripts (try other words)"
        return wrap_untrusted(f"memory_search {args.query}", "\n".join(hit.render() for hit in hits))


class MemoryGet(Tool):
    name = "memory_get"
    description = ("Read a file named by a memory_search hit or a [memory]/[compacted] note from `line` (or "
                   "transcript record `seq`).")

    class Arguments(Args):
        path: str = Field(min_length=1, max_length=500)
        line: int = Field(1, ge=1)
        seq: int | None = Field(None, ge=1)
        count: int = Field(40, ge=1, le=400, description="lines or records")

    def __init__(self, sessions: Path | None = None) -> None:
        self.sessions = sessions

    async def run(self, args: Arguments, ctx: ToolContext) -> str:
        if not (_same_agent(ctx) if ctx.owner else _own_transcripts(ctx))(args.path):
            raise ToolError(f"{args.path} is not available in this conversation",
                            "a guest's memory tools reach only their own memory files and this conversation's transcripts")
        return wrap_untrusted(f"memory_get {args.path}", await self._read(args, ctx))

    async def _read(self, args: Arguments, ctx: ToolContext) -> str:
        if args.path.startswith("sessions/"):
            return self._transcript(args, None if ctx.owner else _their_records(ctx))
        chosen, total = await asyncio.to_thread(_workspace_lines, ctx, args)
        return _cap(numbered(chosen, args.line) or f"(no lines from line {args.line}; the file has {total})")

    def _transcript(self, args: Arguments, shown: Callable[[list[Record]], list[Record]] | None) -> str:
        name = args.path.removeprefix("sessions/")
        if self.sessions is None or "/" in name or name in ("", ".", ".."):
            raise ToolError(f"{args.path} is not a transcript", "use sessions/<file>.jsonl as named by memory_search")
        path = self.sessions / name
        if not path.is_file():
            raise ToolError(f"{args.path} does not exist", "take the name from a memory_search hit")
        out: list[str] = []
        for number, record in transcript_records(path, shown):
            seq = record.get("seq", 0)
            if (args.seq is not None and seq < args.seq) or (args.seq is None and number < args.line):
                continue
            text = record_text(record)
            if text:
                cap = RECORD_CAP if out else GET_CAP  # the record asked for is shown (nearly) whole
                if len(text) > cap:
                    text = text[:cap] + f" [… {len(text) - cap} more characters; re-run the tool for all of it]"
                out.append(f"line {number} seq {seq} · {text}")
            if len(out) >= args.count:
                break
        return _cap("\n".join(out) or "(no conversation records from there)")


def _workspace_lines(ctx: ToolContext, args: MemoryGet.Arguments) -> tuple[list[str], int | None]:
    """The asked lines of a workspace memory file, opened through the workspace's folder descriptors."""
    fh = pinned_file(ctx, args.path, "use a memory path like MEMORY.md, memory/2025-06-01.md or sessions/<file>.jsonl",
                     "take the path from a memory_search hit")
    with fh:
        return lines_of(fh, os.fstat(fh.fileno()).st_size, args.line, args.count, max_chars=GET_CAP)


def _same_agent(ctx: ToolContext) -> Callable[[str], bool]:
    """The owner sees the memory files of this workspace and the transcripts of this agent's sessions, never
    another agent's (config/agents.py: the agent is the key's prefix, kept in the quoted file name)."""
    agent = agent_id_of(ctx.session_key)

    def visible(name: str) -> bool:
        return not name.startswith("sessions/") or agent_id_of(unquote(name.removeprefix("sessions/"))) == agent
    return visible


def _own_transcripts(ctx: ToolContext) -> Callable[[str], bool]:
    """A guest sees only this session's transcripts (current and archived) and, in a workspace of their
    own (`ctx.user`), their own memory files; never the owner's memory or other people's conversations."""
    current = f"sessions/{session_file_name(ctx.session_key)}"
    archived = current.removesuffix(".jsonl") + "."
    own_memory = bool(ctx.user)

    def visible(name: str) -> bool:
        if not name.startswith("sessions/"):
            return own_memory
        return name == current or (name.startswith(archived) and name.endswith(".archived"))
    return visible


def _their_records(ctx: ToolContext) -> Callable[[list[Record]], list[Record]]:
    """A guest reads a transcript as their runs see the conversation (context/shared_view.py): the people's
    messages and the posted answers, and their own work — never another person's tool calls or results."""
    viewer = ctx.user or NOBODY  # a guest is never the owner's key, even without a workspace of their own
    return lambda records: visible_records(records, viewer)


def _tool_error(exc: MemoryProblem) -> ToolError:
    """A MemoryProblem says "what went wrong; how to fix it"."""
    problem, _, fix = str(exc).partition("; ")
    return ToolError(problem, fix)


def _cap(text: str) -> str:
    if len(text) <= GET_CAP:
        return text
    return text[:GET_CAP] + f"\n[… {len(text) - GET_CAP} more characters; continue with a later line or seq]"
