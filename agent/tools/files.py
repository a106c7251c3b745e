"""Workspace file tools. Every path goes through the WorkspaceGuard (real paths only).

Files are opened through directory descriptors (WorkspaceGuard.locate, workspace/fdpath.py):
the path is pinned to an open folder once, and the read, the temp file and the rename all
happen relative to that folder, so a folder swapped for a symlink meanwhile leads nowhere.

read_file shows a file as plain text only when the agent wrote its current content (the
WrittenLedger, filled by write_file and edit_file); any other file is shown as untrusted data,
because whoever put it there may have written instructions for the model into it.
"""

from __future__ import annotations

import asyncio
import errno
import io
import os
import stat
from pathlib import Path
from typing import Any, BinaryIO, Iterator

import aiofiles
from pydantic import Field

from clawgate.workspace.fdpath import Location, open_folder, open_regular, write_atomic_async
from clawgate.workspace.guard import PathOutsideWorkspace

from ..trust.untrusted import wrap_untrusted
from .base import Args, Checked, Tool, ToolContext, ToolError
from .ledger import WrittenLedger, digest
from .protected import protected_reason

COUNT_LIMIT = 50 * 1024 * 1024  # in a larger file the lines after the ones asked for are not counted
LINE_BYTES = 1024 * 1024  # a longer line is cut here (what is shown is capped far below it anyway)
TRUST_MAX = 4 * 1024 * 1024  # a larger file is never hashed on read: it is shown as untrusted data


def _resolve(ctx: ToolContext, path: str) -> Path:
    """The real path for exec's working folder (the sandbox binds it by path)."""
    try:
        return ctx.workspace.resolve(path)
    except PathOutsideWorkspace as exc:
        raise ToolError(str(exc), "use a path inside the workspace, relative to it (e.g. 'notes/todo.md')") from None


OUTSIDE_FIX = "use a path inside the workspace, relative to it (e.g. 'notes/todo.md')"
MISSING_FIX = "check the name with list_dir"


def _locate(ctx: ToolContext, path: str, *, create_folders: bool = False, outside_fix: str = OUTSIDE_FIX) -> Location:
    """`path` pinned to an open workspace folder, or a one-line ToolError."""
    try:
        return ctx.workspace.locate(path, create_folders=create_folders)
    except PathOutsideWorkspace as exc:
        raise ToolError(str(exc), outside_fix) from None
    except FileNotFoundError:
        raise ToolError(f"a folder on the way to {path} does not exist", "check the name with list_dir") from None
    except NotADirectoryError:
        raise ToolError(f"a part of {path} is a file, not a folder", "check the path with list_dir") from None
    except OSError as exc:
        raise ToolError(f"{path} cannot be opened ({exc.strerror})", "check the path with list_dir") from None


def _open_file(loc: Location, path: str, missing_fix: str = MISSING_FIX) -> int:
    """A read descriptor of the Location's regular file, or a one-line ToolError."""
    try:
        return open_regular(loc)
    except FileNotFoundError:
        raise ToolError(f"{path} does not exist", missing_fix) from None
    except IsADirectoryError:
        raise ToolError(f"{path} is a directory", "use list_dir for directories") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # it became a symlink after it was looked up
            raise ToolError(f"{path} changed while it was opened", "try again") from None
        raise ToolError(f"{path} is not a regular file", "only regular files can be read") from None


def _current(ctx: ToolContext, path: str) -> tuple[bytes | None, str]:
    """What a workspace file holds now (None: no regular file there) and its real relative path,
    read through folder descriptors: for the checks after a crash cut a write short."""
    try:
        loc = ctx.workspace.locate(path)
    except PathOutsideWorkspace as exc:
        raise ToolError(str(exc), OUTSIDE_FIX) from None
    except OSError:
        return None, path
    with loc:
        try:
            fd = open_regular(loc)
        except OSError:
            return None, loc.relative
    with open(fd, "rb") as fh:
        return fh.read(), loc.relative


def pinned_file(ctx: ToolContext, path: str, outside_fix: str = OUTSIDE_FIX,
                missing_fix: str = MISSING_FIX) -> BinaryIO:
    """A workspace file open for reading, found through folder descriptors (for other tools)."""
    with _locate(ctx, path, outside_fix=outside_fix) as loc:
        return open(_open_file(loc, path, missing_fix), "rb")


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
        "write come back marked untrusted."
    )

    class Arguments(Args):
        path: str
        offset: int = Field(1, ge=1, description="first line, 1-based")
        limit: int = Field(400, ge=1, le=5000, description="lines")

    def __init__(self, cap_bytes: int = 64_000, ledger: WrittenLedger | None = None) -> None:
        self.cap = cap_bytes
        self.ledger = ledger  # None: no file counts as written by the agent

    async def run(self, args: Arguments, ctx: ToolContext) -> str:
        # A worker thread: a long file must not stall the event loop while it is read.
        out, agent_wrote, relative = await asyncio.to_thread(self._read, ctx, args)
        return out if agent_wrote else wrap_untrusted(f"file {relative} (not written by the agent)", out)

    def _read(self, ctx: ToolContext, args: Arguments) -> tuple[str, bool, str]:
        """The numbered lines, whether the agent wrote the file's current content, and its path.

        The hash is taken over the very bytes the lines come from, so a change between the
        check and the read cannot pass as the agent's own text. Only a file the ledger knows,
        of the recorded size, is hashed at all.
        """
        with _locate(ctx, args.path) as loc:
            fd = _open_file(loc, args.path)
            relative = loc.relative
        with open(fd, "rb") as fh:
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
        return self._render(chosen, total, args), agent_wrote, relative

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


class _WorkspaceWrite(Tool):
    """What write_file and edit_file share: a lasting side effect, checked (not re-run) after a crash,
    the owner's yes for the files that steer sessions, and the ledger of text the agent wrote."""

    side_effects = True
    recovery = "check"

    def __init__(self, ledger: WrittenLedger | None = None) -> None:
        self.ledger = ledger

    def needs_approval(self, args: Any, ctx: ToolContext) -> str | None:
        """Nobody's run changes what steers the owner's sessions without the owner's yes (exec's
        sandbox keeps the same files read-only, agent/tools/protected.py)."""
        reason = protected_reason(ctx.workspace, args.path)
        if reason and not ctx.owner:
            return f"{reason} (asked by a guest's run)"
        return reason

    def lasting_effect(self, args: Any, ctx: ToolContext) -> str | None:
        """In a tainted run the memory logs count as well."""
        return protected_reason(ctx.workspace, args.path, memory=True)


class WriteFile(_WorkspaceWrite):
    name = "write_file"
    description = (
        "Create or overwrite a workspace text file with the complete content (parents are created). "
        "For small changes prefer edit_file."
    )

    class Arguments(Args):
        path: str
        content: str

    async def run(self, args: Arguments, ctx: ToolContext) -> str:
        data = args.content.encode("utf-8")
        existed, relative = await self._write(ctx, args.path, data)
        if self.ledger is not None:
            self.ledger.record(relative, data)
        return f"{'overwrote' if existed else 'created'} {relative} ({len(data)} bytes)"

    @staticmethod
    async def _write(ctx: ToolContext, path: str, data: bytes) -> tuple[bool, str]:
        # Off the event loop (a worker thread for the walk, aiofiles for the bytes and the fsync):
        # a large file written by one session must not stall the others.
        with await asyncio.to_thread(_locate, ctx, path, create_folders=True) as loc:
            old = loc.lstat()
            if old is not None and stat.S_ISDIR(old.st_mode):
                raise ToolError(f"{path} is a directory", "choose a file name inside it")
            await write_atomic_async(loc.folder, loc.name, data, mode=None)
            return old is not None, loc.relative

    async def check(self, args: Arguments, ctx: ToolContext) -> Checked:
        """Done when the file holds exactly the intended bytes; otherwise writing them again is safe."""
        data = args.content.encode("utf-8")
        have, relative = await asyncio.to_thread(_current, ctx, args.path)
        if have != data:
            return Checked(False, f"{args.path} does not have the intended content yet")
        if self.ledger is not None:
            self.ledger.record(relative, data)
        return Checked(True, f"{relative} already has the intended content ({len(data)} bytes)")


class EditFile(_WorkspaceWrite):
    name = "edit_file"
    description = (
        "Replace exact text in a workspace file: old_text must occur exactly once (include surrounding "
        "lines to make it unique)."
    )

    class Arguments(Args):
        path: str
        old_text: str = Field(min_length=1)
        new_text: str

    async def run(self, args: Arguments, ctx: ToolContext) -> str:
        raw, new, relative = await self._edit(ctx, args)
        # Editing one line of someone else's file does not make the rest of it the agent's text:
        # only a file the agent wrote before stays the agent's after the edit.
        if self.ledger is not None and self.ledger.wrote(relative, raw):
            self.ledger.record(relative, new)
        return f"edited {relative}"

    @staticmethod
    async def _edit(ctx: ToolContext, args: Arguments) -> tuple[bytes, bytes, str]:
        """The old bytes, the new bytes and the path, read and written in one pinned folder
        (off the event loop: the walk in a worker thread, the bytes through aiofiles)."""
        with await asyncio.to_thread(_locate, ctx, args.path) as loc:
            old = loc.lstat()
            if old is None or stat.S_ISDIR(old.st_mode):
                raise ToolError(f"{args.path} is not an existing file", "create it with write_file")
            fd = _open_file(loc, args.path)
            async with aiofiles.open(fd, "rb", closefd=True) as fh:
                raw = await fh.read()
            text = raw.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")  # as text mode reads it
            count = text.count(args.old_text)
            if count == 0:
                raise ToolError("old_text was not found in the file",
                                "read_file first and copy the exact text, whitespace included")
            if count > 1:
                raise ToolError(f"old_text occurs {count} times", "include more surrounding lines so it occurs once")
            new = text.replace(args.old_text, args.new_text, 1).encode("utf-8")
            await write_atomic_async(loc.folder, loc.name, new, mode=None)
            return raw, new, loc.relative

    async def check(self, args: Arguments, ctx: ToolContext) -> Checked:
        """Done when the replacement is there and the old text is gone; missing when the old text is
        there once (the edit can run); anything else cannot be told apart from someone else's change."""
        have, relative = await asyncio.to_thread(_current, ctx, args.path)
        if have is None:
            return Checked(None, f"{args.path} is not an existing file")
        text = have.decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")
        old, new = args.old_text, args.new_text
        if new and new in text and (old in new or old not in text):
            return Checked(True, f"{relative} already has the replacement text")
        if not new and old not in text:
            return Checked(True, f"the text to remove is no longer in {relative}")
        if text.count(old) == 1:
            return Checked(False, f"{args.path} still has the text to replace")
        return Checked(None, f"{args.path} has neither the text to replace (once) nor the replacement")


class ListDir(Tool):
    name = "list_dir"
    description = "List a workspace directory: names with a trailing / for folders, and file sizes."

    class Arguments(Args):
        path: str = "."

    async def run(self, args: Arguments, ctx: ToolContext) -> str:
        return await asyncio.to_thread(self._list, ctx, args.path)

    @staticmethod
    def _list(ctx: ToolContext, path: str) -> str:
        with _locate(ctx, path) as loc:
            try:
                fd = open_folder(loc)
            except OSError:
                raise ToolError(f"{path} is not a directory", "list its parent instead") from None
        try:
            with os.scandir(fd) as listing:
                children = sorted(listing, key=lambda e: e.name)[:500]
            entries = []
            for child in children:  # looked at relative to the open folder; links are not followed out
                try:
                    if child.is_dir(follow_symlinks=False):
                        entries.append(child.name + "/")
                    else:
                        entries.append(f"{child.name}\t{child.stat(follow_symlinks=False).st_size}")
                except FileNotFoundError:
                    continue  # removed since the listing
        finally:
            os.close(fd)
        return "\n".join(entries) or "(empty directory)"
