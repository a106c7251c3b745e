"""Long-term memory as readable files in the workspace.

- MEMORY.md: curated facts, one "- " line each. Changed only by appending a fact or by
  replacing one fact found by exact match, never rewritten blindly, so a bad call cannot
  wipe what the agent knew.
- memory/YYYY-MM-DD.md: the daily log, append-only (notes, consolidation summaries).
- memory/archive/: raw transcript parts written when a summary could not be made.

Search over these files and the session transcripts lives in memory_search.py.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Callable

from .redact import redact
from .fsio import atomic_write_text

FACT_CAP = 600
MEMORY_HEADER = "# MEMORY\n\nLong-term facts worth remembering across sessions, one per line.\n"


class MemoryProblem(ValueError):
    """A memory operation the caller can fix; the message says how."""


def one_line(text: str) -> str:
    return " ".join(text.split())


def append_text(path: Path, text: str) -> None:
    """Append with O_APPEND and fsync: earlier content is never rewritten."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        if os.fstat(fd).st_size and not _ends_with_newline(path):
            text = "\n" + text
        os.write(fd, text.encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as fh:
        fh.seek(-1, os.SEEK_END)
        return fh.read(1) == b"\n"


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

    # MEMORY.md -----------------------------------------------------------------
    def facts(self) -> list[str]:
        if not self.memory_file.exists():
            return []
        return [line[2:] for line in self.memory_file.read_text(encoding="utf-8").splitlines() if line.startswith("- ")]

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
        if not self.memory_file.exists():
            append_text(self.memory_file, MEMORY_HEADER)
        append_text(self.memory_file, f"- {fact}\n")
        return f"added to MEMORY.md: {fact}"

    def replace_fact(self, old: str, new: str) -> str:
        """Replace the one line containing `old` exactly (or delete it when `new` is empty)."""
        if not old.strip():
            raise MemoryProblem("old is empty; copy the exact text of the fact to change")
        text = self.memory_file.read_text(encoding="utf-8") if self.memory_file.exists() else ""
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
        atomic_write_text(self.memory_file, "".join(lines))
        return f"MEMORY.md line {index + 1}: {before!r} -> {after!r}"

    # daily log and archive ----------------------------------------------------
    def daily_path(self, when: float | None = None) -> Path:
        day = time.strftime("%Y-%m-%d", time.localtime(self.clock() if when is None else when))
        return self.folder / f"{day}.md"

    def log(self, text: str, *, title: str | None = None) -> Path:
        """Append an entry to today's log (created with a heading if new)."""
        now = self.clock()
        path = self.daily_path(now)
        if not path.exists():
            append_text(path, f"# {path.stem}\n")
        stamp = time.strftime("%H:%M", time.localtime(now))
        body = redact(text.strip())
        entry = f"\n## {stamp} · {title}\n{body}\n" if title else f"\n- {stamp} {one_line(body)}\n"
        append_text(path, entry)
        return path

    def archive(self, name: str, text: str) -> Path:
        """Write a raw part of a transcript that could not be summarised; never overwrites."""
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("._") or "archive"
        path = self.folder / "archive" / f"{safe}.md"
        counter = 1
        while path.exists():
            counter += 1
            path = path.with_name(f"{safe}-{counter}.md")
        atomic_write_text(path, redact(text))
        return path
