"""Workspace file tools. Every path goes through the WorkspaceGuard (real paths only).

read_file shows a file as plain text only when the agent wrote its current content (the
WrittenLedger, filled by write_file and edit_file); any other file is shown as untrusted data,
because whoever put it there may have written instructions for the model into it.
"""

from __future__ import annotations

import asyncio
import io
import os
from pathlib import Path
from typing import BinaryIO, Iterator

from pydantic import Field

from workspace.guard import PathOutsideWorkspace

from ..fsio import atomic_write_async, read_bytes_async
from ..untrusted import wrap_untrusted
from .base import Args, Checked, Tool, ToolContext, ToolError
from .ledger import WrittenLedger, digest
from .protected import protected_reason

COUNT_LIMIT = 50 * 1024 * 1024  # in a larger file the lines after the ones asked for are not counted
LINE_BYTES = 1024 * 1024  # a longer line is cut here (what is shown is capped far below it anyway)
TRUST_MAX = 4 * 1024 * 1024  # a larger file is never hashed on read: it is shown as untrusted data


def _resolve(ctx: ToolContext, path: str) -> Path:
    try:
        return ctx.workspace.resolve(path)
    except PathOutsideWorkspace as exc:
        raise ToolError(str(exc), "use a path inside the workspace, relative to it (e.g. 'notes/todo.md')") from None


def read_lines(path: Path, first: int, count: int, *, max_chars: int | None = None) -> tuple[list[str], int | None]:
    """Lines `first`..`first + count - 1` (1-based) of a text file, and how many lines it has.

    The file is read a line at a time and only as far as needed; fewer lines are returned when
    they add up to more than `max_chars` (the caller would cut them anyway). Lines are split as
    str.splitlines() splits them, decoded as UTF-8 with bad bytes replaced; a line longer than
    LINE_BYTES is cut there. The count is exact, except that it is None when lines follow the
    ones returned in a file over COUNT_LIMIT bytes (they are not read). Raises OSError.
    """
    with open(path, "rb") as fh:
        return lines_of(fh, os.fstat(fh.fileno()).st_size, first, count, max_chars=max_chars)


def lines_of(fh: BinaryIO, size: int, first: int, count: int, *,
             max_chars: int | None = None) -> tuple[list[str], int | None]:
    """`read_lines` on an open binary file of `size` bytes, read from its current position."""
    chosen: list[str] = []
    seen = chars = 0
    lines = _text_lines(fh)
    for line in lines:
        seen += 1
        if seen < first:
            continue
        chosen.append(line)
        chars += len(line) + 1
        if len(chosen) == count or (max_chars is not None and chars > max_chars):
            break
    else:
        return chosen, seen  # the file ended first
    if size > COUNT_LIMIT:
        more = next(lines, None) is not None
        return chosen, None if more else seen
    return chosen, seen + sum(1 for _ in lines)


def _text_lines(fh: BinaryIO) -> Iterator[str]:
    """The lines of a binary file as `read_lines` describes them, one at a time."""
    # Read up to b"\n" first: no UTF-8 character contains that byte, so none is split.
    while raw := fh.readline(LINE_BYTES):
        if len(raw) == LINE_BYTES and not raw.endswith(b"\n"):
            while (rest := fh.readline(LINE_BYTES)) and not rest.endswith(b"\n"):
                pass  # skip the rest of an over-long line
        yield from raw.decode("utf-8", errors="replace").splitlines()


def numbered(lines: list[str], first: int) -> str:
    """Lines prefixed with their 1-based numbers, as the file tools show them."""
    return "\n".join(f"{n:>5}\t{line}" for n, line in enumerate(lines, start=first))


class ReadFile(Tool):
    name = "read_file"
    description = (
        "Read a workspace text file as numbered lines (offset/limit for long files). Files you did not "
        "write come back marked as untrusted data."
    )

    class Arguments(Args):
        path: str
        offset: int = Field(1, ge=1, description="first line, 1-based")
        limit: int = Field(400, ge=1, le=5000, description="lines")

    def __init__(self, cap_bytes: int = 64_000, ledger: WrittenLedger | None = None) -> None:
        self.cap = cap_bytes
        self.ledger = ledger  # None: no file counts as written by the agent

    async def run(self, args: Arguments, ctx: ToolContext) -> str:
        path = _resolve(ctx, args.path)
        if not path.exists():
            raise ToolError(f"{args.path} does not exist", "check the name with list_dir")
        if path.is_dir():
            raise ToolError(f"{args.path} is a directory", "use list_dir for directories")
        # A worker thread: a long file must not stall the event loop while it is read.
        relative = ctx.workspace.relative(path)
        out, agent_wrote = await asyncio.to_thread(self._read, path, relative, args)
        return out if agent_wrote else wrap_untrusted(f"file {relative} (not written by the agent)", out)

    def _read(self, path: Path, relative: str, args: Arguments) -> tuple[str, bool]:
        """The numbered lines, and whether the agent wrote the file's current content.

        The hash is taken over the very bytes the lines come from, so a change between the
        check and the read cannot pass as the agent's own text. Only a file the ledger knows,
        of the recorded size, is hashed at all.
        """
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if b"\x00" in fh.read(4096):
                raise ToolError(f"{args.path} is a binary file ({size} bytes)", "only text files can be read")
            fh.seek(0)
            expected = self.ledger.expects(relative) if self.ledger else None
            source: BinaryIO = fh
            agent_wrote = False
            if expected is not None and expected[0] == size <= TRUST_MAX:
                data = fh.read(TRUST_MAX + 1)
                agent_wrote = (len(data), digest(data)) == expected
                source, size = io.BytesIO(data), len(data)
            chosen, total = lines_of(source, size, args.offset, args.limit, max_chars=self.cap)
        return self._render(chosen, total, args), agent_wrote

    def _render(self, chosen: list[str], total: int | None, args: Arguments) -> str:
        out = numbered(chosen, args.offset)
        if len(out) > self.cap:
            out = out[: self.cap] + "\n[… output capped; read further with offset]"
        shown_to = args.offset - 1 + len(chosen)
        if total is None:
            out += f"\n[more lines follow; continue with offset={shown_to + 1}]"
        elif shown_to < total:
            out += f"\n[{total - shown_to} more lines; continue with offset={shown_to + 1}]"
        return out or "(empty file)"


def _protected_write(ctx: ToolContext, path: str) -> str | None:
    """Nobody's run changes what steers the owner's sessions without the owner's yes (exec's
    sandbox keeps the same files read-only, agent/tools/protected.py)."""
    reason = protected_reason(ctx.workspace, path)
    if reason and not ctx.owner:
        return f"{reason} (asked by a guest's run)"
    return reason


def _lasting_write(ctx: ToolContext, path: str) -> str | None:
    """In a tainted run the memory logs count as well."""
    return protected_reason(ctx.workspace, path, memory=True)


class WriteFile(Tool):
    name = "write_file"
    description = (
        "Create or overwrite a workspace text file with the complete content (parents are created). "
        "For small changes prefer edit_file."
    )
    side_effects = True
    recovery = "check"

    class Arguments(Args):
        path: str
        content: str

    def __init__(self, ledger: WrittenLedger | None = None) -> None:
        self.ledger = ledger

    def needs_approval(self, args: Arguments, ctx: ToolContext) -> str | None:
        return _protected_write(ctx, args.path)

    def lasting_effect(self, args: Arguments, ctx: ToolContext) -> str | None:
        return _lasting_write(ctx, args.path)

    async def run(self, args: Arguments, ctx: ToolContext) -> str:
        path = _resolve(ctx, args.path)
        if path.is_dir():
            raise ToolError(f"{args.path} is a directory", "choose a file name inside it")
        existed = path.exists()
        data = args.content.encode("utf-8")
        await atomic_write_async(path, data, mode=None)
        if self.ledger is not None:
            self.ledger.record(ctx.workspace.relative(path), data)
        return f"{'overwrote' if existed else 'created'} {ctx.workspace.relative(path)} ({len(args.content.encode())} bytes)"

    async def check(self, args: Arguments, ctx: ToolContext) -> Checked:
        """Done when the file holds exactly the intended bytes; otherwise writing them again is safe."""
        path = _resolve(ctx, args.path)
        data = args.content.encode("utf-8")
        if not path.is_file() or await read_bytes_async(path) != data:
            return Checked(False, f"{args.path} does not have the intended content yet")
        if self.ledger is not None:
            self.ledger.record(ctx.workspace.relative(path), data)
        return Checked(True, f"{ctx.workspace.relative(path)} already has the intended content ({len(data)} bytes)")


class EditFile(Tool):
    name = "edit_file"
    description = (
        "Replace exact text in a workspace file: old_text must occur exactly once (include surrounding "
        "lines to make it unique)."
    )
    side_effects = True
    recovery = "check"

    class Arguments(Args):
        path: str
        old_text: str = Field(min_length=1)
        new_text: str

    def __init__(self, ledger: WrittenLedger | None = None) -> None:
        self.ledger = ledger

    def needs_approval(self, args: Arguments, ctx: ToolContext) -> str | None:
        return _protected_write(ctx, args.path)

    def lasting_effect(self, args: Arguments, ctx: ToolContext) -> str | None:
        return _lasting_write(ctx, args.path)

    async def run(self, args: Arguments, ctx: ToolContext) -> str:
        path = _resolve(ctx, args.path)
        if not path.is_file():
            raise ToolError(f"{args.path} is not an existing file", "create it with write_file")
        raw = await read_bytes_async(path)
        text = raw.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")  # as text mode reads it
        count = text.count(args.old_text)
        if count == 0:
            raise ToolError("old_text was not found in the file", "read_file first and copy the exact text, whitespace included")
        if count > 1:
            raise ToolError(f"old_text occurs {count} times", "include more surrounding lines so it occurs once")
        new = text.replace(args.old_text, args.new_text, 1)
        await atomic_write_async(path, new.encode("utf-8"), mode=None)
        relative = ctx.workspace.relative(path)
        # Editing one line of someone else's file does not make the rest of it the agent's text:
        # only a file the agent wrote before stays the agent's after the edit.
        if self.ledger is not None and self.ledger.wrote(relative, raw):
            self.ledger.record(relative, new.encode("utf-8"))
        return f"edited {ctx.workspace.relative(path)}"

    async def check(self, args: Arguments, ctx: ToolContext) -> Checked:
        """Done when the replacement is there and the old text is gone; missing when the old text is
        there once (the edit can run); anything else cannot be told apart from someone else's change."""
        path = _resolve(ctx, args.path)
        if not path.is_file():
            return Checked(None, f"{args.path} is not an existing file")
        text = (await read_bytes_async(path)).decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")
        old, new = args.old_text, args.new_text
        if new and new in text and (old in new or old not in text):
            return Checked(True, f"{ctx.workspace.relative(path)} already has the replacement text")
        if not new and old not in text:
            return Checked(True, f"the text to remove is no longer in {ctx.workspace.relative(path)}")
        if text.count(old) == 1:
            return Checked(False, f"{args.path} still has the text to replace")
        return Checked(None, f"{args.path} has neither the text to replace (once) nor the replacement")


class ListDir(Tool):
    name = "list_dir"
    description = "List a workspace directory: names with a trailing / for folders, and file sizes."

    class Arguments(Args):
        path: str = "."

    async def run(self, args: Arguments, ctx: ToolContext) -> str:
        path = _resolve(ctx, args.path)
        if not path.is_dir():
            raise ToolError(f"{args.path} is not a directory", "list its parent instead")
        entries = []
        for child in sorted(path.iterdir(), key=lambda p: p.name)[:500]:
            if child.is_dir():
                entries.append(child.name + "/")
            else:
                entries.append(f"{child.name}\t{child.lstat().st_size}")
        return "\n".join(entries) or "(empty directory)"
