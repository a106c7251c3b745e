"""Long-term memory as readable files in the workspace.

- MEMORY.md: curated facts, one "- " line each. Changed only by appending a fact or by
  replacing one fact found by exact match, never rewritten blindly, so a bad call cannot
  wipe what the agent knew.
- memory/YYYY-MM-DD.md: the daily log, append-only (notes, consolidation summaries).
- memory/archive/: raw transcript parts written when a summary could not be made.

Search over these files and the session transcripts lives in memory_search.py.

The files are opened through folder descriptors from the workspace root (workspace/fdpath.py):
a `memory/` folder or a log file swapped for a symlink cannot make the daemon append the
conversation to a file outside the workspace, or read one into a tool result.
"""

from __future__ import annotations

import os
import re
import stat
import time
from pathlib import Path
from typing import Callable

from clawgate.workspace.fdpath import locate, read_all

from ..core.redact import redact
from ..core.fsio import atomic_write_text

FACT_CAP = 600
MEMORY_HEADER = "# MEMORY\n\nLong-term facts worth remembering across sessions, one per line.\n"


class MemoryProblem(ValueError):
    """A memory operation the caller can fix; the message says how."""


def one_line(text: str) -> str:
    return " ".join(text.split())


def append_text(path: Path, text: str, *, within: Path | None = None) -> None:
    """Append with O_APPEND and fsync: earlier content is never rewritten.

    With `within` (the workspace root) the file is opened relative to its folder found from
    that root, never through a symlink; PathOutsideWorkspace or OSError is raised instead.
    """
    flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
    if within is None:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, flags, 0o600)
    else:
        within.mkdir(parents=True, exist_ok=True, mode=0o700)
        with locate(within, str(path), create_folders=True) as loc:
            fd = os.open(loc.name, flags | os.O_NOFOLLOW | os.O_NONBLOCK, 0o600, dir_fd=loc.folder)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(f"{path.name} is not a regular file")
        if st.st_size and os.pread(fd, 1, st.st_size - 1) != b"\n":
            text = "\n" + text
        os.write(fd, text.encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)


class Memory:
    def __init__(self, workspace: Path, *, clock: Callable[[], float] = time.time) -> None:
        self.workspace = workspace
        self.clock = clock

    @property
    def memory_file(self) -> Path:
        return self.workspace / "MEMORY.md"

    @property
    def folder(self) -> Path:
        return self.workspace / "memory"

    def relative(self, path: Path) -> str:
        return path.relative_to(self.workspace).as_posix()

    def _read(self, path: Path) -> str:
        """A memory file's text ("" when there is none), read through the workspace's descriptors."""
        try:
            with locate(self.workspace, str(path)) as loc:
                return read_all(loc).decode("utf-8")
        except FileNotFoundError:
            return ""

    def _exists(self, path: Path) -> bool:
        try:
            with locate(self.workspace, str(path)) as loc:
                return loc.lstat() is not None
        except FileNotFoundError:
            return False

    # MEMORY.md -----------------------------------------------------------------
    def facts(self) -> list[str]:
        return [line[2:] for line in self._read(self.memory_file).splitlines() if line.startswith("- ")]

    def append_fact(self, fact: str) -> str:
        """Add one fact as a "- " line; an identical fact is not added twice."""
        fact = redact(one_line(fact)).removeprefix("- ")
        if not fact:
            raise MemoryProblem("the fact is empty; pass one sentence worth keeping")
        if len(fact) > FACT_CAP:
            raise MemoryProblem(f"the fact is {len(fact)} characters; keep it under {FACT_CAP} (one line), "
                                "and put details in a workspace file you reference")
        if fact in self.facts():
            return f"already in MEMORY.md: {fact}"
        if not self._exists(self.memory_file):
            append_text(self.memory_file, MEMORY_HEADER, within=self.workspace)
        append_text(self.memory_file, f"- {fact}\n", within=self.workspace)
        return f"added to MEMORY.md: {fact}"

    def replace_fact(self, old: str, new: str) -> str:
        """Replace the one line containing `old` exactly (or delete it when `new` is empty)."""
        if not old.strip():
            raise MemoryProblem("old is empty; copy the exact text of the fact to change")
        text = self._read(self.memory_file)
        lines = text.splitlines(keepends=True)
        hits = [i for i, line in enumerate(lines) if old in line]
        if not hits:
            raise MemoryProblem("no line of MEMORY.md contains that text; copy it exactly from MEMORY.md "
                                "(or use memory_append for a new fact)")
        if len(hits) > 1:
            raise MemoryProblem(f"{len(hits)} lines of MEMORY.md contain that text; include more of the fact "
                                "so it matches one line")
        new_line = redact(one_line(new)).removeprefix("- ")
        if len(new_line) > FACT_CAP:
            raise MemoryProblem(f"the new fact is {len(new_line)} characters; keep it under {FACT_CAP}")
        index = hits[0]
        before = lines[index].rstrip("\n")
        after = before.replace(old, new_line, 1).rstrip()
        if after in ("", "-"):
            del lines[index]
            after = "(removed)"
        else:
            lines[index] = after + "\n"
        atomic_write_text(self.memory_file, "".join(lines), within=self.workspace)
        return f"MEMORY.md line {index + 1}: {before!r} -> {after!r}"

    # daily log and archive ----------------------------------------------------
    def daily_path(self, when: float | None = None) -> Path:
        day = time.strftime("%Y-%m-%d", time.localtime(self.clock() if when is None else when))
        return self.folder / f"{day}.md"

    def log(self, text: str, *, title: str | None = None) -> Path:
        """Append an entry to today's log (created with a heading if new)."""
        now = self.clock()
        path = self.daily_path(now)
        if not self._exists(path):
            append_text(path, f"# {path.stem}\n", within=self.workspace)
        stamp = time.strftime("%H:%M", time.localtime(now))
        body = redact(text.strip())
        entry = f"\n## {stamp} · {title}\n{body}\n" if title else f"\n- {stamp} {one_line(body)}\n"
        append_text(path, entry, within=self.workspace)
        return path

    def archive(self, name: str, text: str) -> Path:
        """Write a raw part of a transcript that could not be summarised; never overwrites."""
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("._") or "archive"
        path = self.folder / "archive" / f"{safe}.md"
        counter = 1
        while self._exists(path):
            counter += 1
            path = path.with_name(f"{safe}-{counter}.md")
        atomic_write_text(path, redact(text), within=self.workspace)
        return path
