"""Workspace file tools. Every path goes through the WorkspaceGuard (real paths only)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from pydantic import Field

from workspace.guard import PathOutsideWorkspace

from .base import Args, Tool, ToolContext, ToolError


def _resolve(ctx: ToolContext, path: str) -> Path:
    try:
        return ctx.workspace.resolve(path)
    except PathOutsideWorkspace as exc:
        raise ToolError(str(exc), "use a path inside the workspace, relative to it (e.g. 'notes/todo.md')") from None


def atomic_write(path: Path, data: str) -> None:
    """Write via a temp file and rename, so a crash never leaves a half-written file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


class ReadFile(Tool):
    name = "read_file"
    description = (
        "Read a text file from the workspace. Use it before editing a file or to check a result. "
        "Returns numbered lines; use offset/limit for long files."
    )

    class Arguments(Args):
        path: str = Field(description="file path relative to the workspace")
        offset: int = Field(1, ge=1, description="first line to return (1-based)")
        limit: int = Field(400, ge=1, le=5000, description="how many lines to return")

    def __init__(self, cap_bytes: int = 64_000) -> None:
        self.cap = cap_bytes

    async def run(self, args: Arguments, ctx: ToolContext) -> str:
        path = _resolve(ctx, args.path)
        if not path.exists():
            raise ToolError(f"{args.path} does not exist", "check the name with list_dir")
        if path.is_dir():
            raise ToolError(f"{args.path} is a directory", "use list_dir for directories")
        data = path.read_bytes()
        if b"\x00" in data[:4096]:
            raise ToolError(f"{args.path} is a binary file ({len(data)} bytes)", "only text files can be read")
        lines = data.decode("utf-8", errors="replace").splitlines()
        chosen = lines[args.offset - 1 : args.offset - 1 + args.limit]
        out = "\n".join(f"{n:>5}\t{line}" for n, line in enumerate(chosen, start=args.offset))
        if len(out) > self.cap:
            out = out[: self.cap] + "\n[… output capped; read further with offset]"
        shown_to = args.offset - 1 + len(chosen)
        if shown_to < len(lines):
            out += f"\n[{len(lines) - shown_to} more lines; continue with offset={shown_to + 1}]"
        return out or "(empty file)"


class WriteFile(Tool):
    name = "write_file"
    description = (
        "Create or overwrite a text file in the workspace with the given content (parents are created). "
        "For small changes to an existing file prefer edit_file."
    )
    side_effects = True

    class Arguments(Args):
        path: str = Field(description="file path relative to the workspace")
        content: str = Field(description="the complete new content of the file")

    async def run(self, args: Arguments, ctx: ToolContext) -> str:
        path = _resolve(ctx, args.path)
        if path.is_dir():
            raise ToolError(f"{args.path} is a directory", "choose a file name inside it")
        existed = path.exists()
        atomic_write(path, args.content)
        return f"{'overwrote' if existed else 'created'} {ctx.workspace.relative(path)} ({len(args.content.encode())} bytes)"


class EditFile(Tool):
    name = "edit_file"
    description = (
        "Replace an exact piece of text in a workspace file. old_text must occur exactly once "
        "(include surrounding lines to make it unique). Use it for targeted changes."
    )
    side_effects = True

    class Arguments(Args):
        path: str = Field(description="file path relative to the workspace")
        old_text: str = Field(min_length=1, description="the exact text to replace, occurring once")
        new_text: str = Field(description="the replacement text")

    async def run(self, args: Arguments, ctx: ToolContext) -> str:
        path = _resolve(ctx, args.path)
        if not path.is_file():
            raise ToolError(f"{args.path} is not an existing file", "create it with write_file")
        text = path.read_text(encoding="utf-8")
        count = text.count(args.old_text)
        if count == 0:
            raise ToolError("old_text was not found in the file", "read_file first and copy the exact text, whitespace included")
        if count > 1:
            raise ToolError(f"old_text occurs {count} times", "include more surrounding lines so it occurs once")
        atomic_write(path, text.replace(args.old_text, args.new_text, 1))
        return f"edited {ctx.workspace.relative(path)}"


class ListDir(Tool):
    name = "list_dir"
    description = "List a workspace directory: names with a trailing / for folders, and file sizes."

    class Arguments(Args):
        path: str = Field(".", description="directory relative to the workspace")

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
