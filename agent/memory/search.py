"""memory_search: keyword (BM25) search over memory files and session transcripts.

Documents are lines of MEMORY.md and memory/**/*.md, and the user / assistant / tool-result
records of the session transcripts (JSONL, one record per line). Hits carry the file and
line (and seq for transcripts) so the agent can read the surrounding text back with
memory_get. No embeddings, no index service: the index is an SQLite FTS5 table in memory,
ranked by its bm25() (k1 1.2, b 0.75, as the in-Python scorer it replaced, which
bench/memory_search_bench.py compares it with). The files stay the source of truth: each file's
rows are replaced when its size or mtime changes, a transcript that only grew (append-only) is
parsed from where it was left, and an index SQLite reports as damaged is dropped and rebuilt from
the files. Text is tokenised here (CJK has no spaces, so it is indexed as character bigrams) and
stored as space-joined terms, so FTS5 only splits on those spaces.

A guest's search (a `visible` filter) is ranked in a temporary table holding only the files it
may see: bm25()'s statistics over the whole index would let score changes reveal what the hidden
files contain.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import re
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterable

from clawgate.workspace.fdpath import locate, open_regular

from ..session import Record, record_problem

RecordFilter = Callable[[list[Record]], list[Record]]

CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af"
SNIPPET = 240
log = logging.getLogger(__name__)
# Terms arrive space-joined from tokenize(); "_" and all of \w stay inside a term, diacritics kept.
_COLUMNS = "body, file UNINDEXED, line UNINDEXED, seq UNINDEXED, text UNINDEXED"
_TOKENIZER = "unicode61 remove_diacritics 0 tokenchars '_'"


@functools.cache
def _patterns() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """A term, and a CJK run's start: compiled by the first search, not at import (the negated Unicode
    classes take about 9 ms to compile)."""
    return re.compile(rf"[{CJK}]+|[^\W{CJK}]+"), re.compile(rf"[{CJK}]")


def tokenize(text: str) -> list[str]:
    out: list[str] = []
    term, cjk_start = _patterns()
    for token in term.findall(text.lower()):
        if cjk_start.match(token):
            out.extend([token] if len(token) == 1 else [token[i:i + 2] for i in range(len(token) - 1)])
        else:
            out.append(token)
    return out


@dataclass
class Doc:
    line: int
    text: str
    terms: list[str]
    seq: int | None = None


@dataclass
class _FileIndex:
    size: int = 0
    mtime_ns: int = 0
    lines: int = 0
    rowids: list[int] = field(default_factory=list)  # this file's rows in the FTS table
    recall_ids: set[str] = field(default_factory=set)  # memory_search/get calls: not indexed (no echoes)


@dataclass
class Hit:
    file: str
    line: int
    score: float
    text: str
    seq: int | None = None

    def render(self) -> str:
        where = f"{self.file}:{self.line}" + (f" (seq {self.seq})" if self.seq is not None else "")
        return f"{where} score {self.score:.2f}\n  {self.text}"


RECALL_TOOLS = ("memory_search", "memory_get")


def record_text(record: dict[str, Any], skip: set[str] | None = None) -> str:
    """The searchable text of one transcript record ("" for internal records).

    With `skip`, recall calls (memory_search / memory_get) and their results are left out and
    their ids collected, so a search never finds the output of earlier searches.
    """
    kind = record.get("kind")
    if kind == "user":
        return f"user: {record.get('text') or ''}"
    if kind == "assistant":
        parts = []
        for block in record.get("content") or []:
            if block.get("type") == "text":
                parts.append(block.get("text", ""))
            elif block.get("type") == "tool_use":
                if skip is not None and block.get("name") in RECALL_TOOLS:
                    skip.add(str(block.get("id")))
                    continue
                parts.append(f"[{block.get('name')} {json.dumps(block.get('input'), ensure_ascii=False)}]")
        return "assistant: " + " ".join(parts) if any(parts) else ""
    if kind == "tool_results":
        results = [r for r in record.get("results") or [] if skip is None or r.get("tool_use_id") not in skip]
        return "tool result: " + " | ".join(str(r.get("content", "")) for r in results) if results else ""
    return ""


class MemorySearch:
    def __init__(self, workspace: Path, sessions: Path | None = None) -> None:
        self.workspace = workspace
        self.sessions = sessions
        self._cache: dict[Path, _FileIndex] = {}
        self._db = self._open_index()
        self._next_rowid = 1

    @staticmethod
    def _open_index() -> sqlite3.Connection:
        db = sqlite3.connect(":memory:", check_same_thread=False)  # sequential use, from any one thread
        db.execute(f"CREATE VIRTUAL TABLE docs USING fts5({_COLUMNS}, tokenize=\"{_TOKENIZER}\")")
        return db

    def files(self) -> list[tuple[str, Path]]:
        found: list[tuple[str, Path]] = []
        memory_file = self.workspace / "MEMORY.md"
        if memory_file.is_file():
            found.append(("MEMORY.md", memory_file))
        folder = self.workspace / "memory"
        if folder.is_dir():
            found += [(p.relative_to(self.workspace).as_posix(), p) for p in sorted(folder.rglob("*.md")) if p.is_file()]
        if self.sessions and self.sessions.is_dir():
            for path in sorted(self.sessions.iterdir()):
                if path.is_file() and (path.suffix == ".jsonl" or path.suffix == ".archived"):
                    found.append((f"sessions/{path.name}", path))
        return found

    def search(self, query: str, limit: int = 8, *, visible: Callable[[str], bool] | None = None,
               shown: RecordFilter | None = None) -> list[Hit]:
        """BM25 over the files `visible` admits (by their shown name, e.g. "sessions/main.jsonl"); all by default.
        `shown` (with `visible`): the records of a transcript this searcher may read (a shared conversation's
        other people's tool work left out, agent/context/shared_view.py)."""
        terms = list(dict.fromkeys(tokenize(query)))
        if not terms:
            return []
        try:
            return self._search(terms, limit, visible, shown)
        except sqlite3.DatabaseError as exc:  # a damaged index: the files are the truth, build it again
            log.warning("memory search index unusable (%s); rebuilding it from the memory files", exc)
            self.rebuild()
            return self._search(terms, limit, visible, shown)

    def rebuild(self) -> None:
        """Forget the index; the next search reads every file again."""
        try:
            self._db.close()
        except sqlite3.Error:
            pass  # closing a broken connection may fail; it is dropped either way
        self._cache.clear()
        self._db = self._open_index()
        self._next_rowid = 1

    def _search(self, terms: list[str], limit: int, visible: Callable[[str], bool] | None,
                shown: RecordFilter | None = None) -> list[Hit]:
        files = self.files()
        self._forget_gone({path for _, path in files})
        names = [name for name, path in files if self._index(name, path) and (visible is None or visible(name))]
        self._db.commit()  # FTS5 merges the new rows into its index at commit
        if not names:
            return []
        match = " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)
        schema, table = "main", "docs"
        if visible is not None:  # ranked among the visible files only (see the module docstring)
            schema, table = "temp", "scope"
            self._db.execute("DROP TABLE IF EXISTS temp.scope")
            self._db.execute(f"CREATE VIRTUAL TABLE temp.scope USING fts5({_COLUMNS}, tokenize=\"{_TOKENIZER}\")")
            whole = [name for name in names if shown is None or not name.startswith("sessions/")]
            self._db.execute("INSERT INTO temp.scope SELECT body, file, line, seq, text FROM docs WHERE file IN "
                             "(SELECT value FROM json_each(?))", (json.dumps(whole),))
            if shown is not None:
                paths = dict(files)
                self._db.executemany("INSERT INTO temp.scope (body, file, line, seq, text) VALUES (?, ?, ?, ?, ?)", [
                    (" ".join(doc.terms), name, doc.line, doc.seq, doc.text) for name in names if name not in whole
                    for doc in transcript_docs(paths[name], shown)])
        try:
            rows = self._db.execute(
                f"SELECT file, line, seq, text, -bm25({table}) FROM {schema}.{table} WHERE {table} MATCH ? "
                f"ORDER BY bm25({table}), file, line LIMIT ?", (match, limit)).fetchall()
        finally:
            if visible is not None:
                self._db.execute("DROP TABLE IF EXISTS temp.scope")
        return [Hit(file, line, round(score, 4), _snippet(text, terms), seq) for file, line, seq, text, score in rows]

    # indexing ------------------------------------------------------------------
    def _forget_gone(self, present: set[Path]) -> None:
        for path in [p for p in self._cache if p not in present]:
            self._drop_rows(self._cache.pop(path))

    def _drop_rows(self, cached: _FileIndex) -> None:
        self._db.executemany("DELETE FROM docs WHERE rowid = ?", [(rowid,) for rowid in cached.rowids])
        cached.rowids.clear()

    def _open(self, path: Path) -> BinaryIO:
        """Workspace files through the workspace's folder descriptors (a link out is not read);
        transcripts, in the daemon's own state folder, by path."""
        if not path.is_relative_to(self.workspace):
            return open(path, "rb")
        with locate(self.workspace, str(path)) as loc:
            return open(open_regular(loc), "rb")

    def _index(self, name: str, path: Path) -> bool:
        """Bring one file's rows up to date; False when it is gone (or a link out of the workspace)."""
        try:
            fh = self._open(path)
        except (OSError, ValueError):  # gone, or a link out of the workspace (PathOutsideWorkspace)
            if (gone := self._cache.pop(path, None)) is not None:
                self._drop_rows(gone)
            return False
        with fh:
            stat = os.fstat(fh.fileno())
            cached = self._cache.get(path)
            if cached and cached.size == stat.st_size and cached.mtime_ns == stat.st_mtime_ns:
                return True
            jsonl = path.suffix in (".jsonl", ".archived")
            if cached is None or not jsonl or stat.st_size < cached.size:
                if cached is not None:
                    self._drop_rows(cached)
                cached = _FileIndex()
            fh.seek(cached.size)
            data = fh.read()
        complete = data[: data.rfind(b"\n") + 1] if jsonl else data  # a torn last line waits for its end
        lines = complete.decode("utf-8", errors="replace").splitlines()
        docs = _jsonl_docs(lines, cached.lines, cached.recall_ids) if jsonl else _markdown_docs(lines, 0)
        rows = [(self._next_rowid + n, " ".join(doc.terms), name, doc.line, doc.seq, doc.text)
                for n, doc in enumerate(docs)]
        self._db.executemany("INSERT INTO docs (rowid, body, file, line, seq, text) VALUES (?, ?, ?, ?, ?, ?)", rows)
        cached.rowids.extend(row[0] for row in rows)
        self._next_rowid += len(rows)
        cached.lines += complete.count(b"\n") if jsonl else 0
        cached.size += len(complete)
        cached.mtime_ns = stat.st_mtime_ns if len(complete) == len(data) else 0
        self._cache[path] = cached
        return True


def _markdown_docs(lines: list[str], offset: int) -> Iterable[Doc]:
    for number, line in enumerate(lines, start=offset + 1):
        terms = tokenize(line)
        if terms and not line.startswith("# "):
            yield Doc(number, line.strip(), terms)


def _jsonl_docs(lines: list[str], offset: int, skip: set[str]) -> Iterable[Doc]:
    for number, line in enumerate(lines, start=offset + 1):
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if record_problem(record) is not None:  # a hand-edited or foreign line: not searchable
            continue
        text = record_text(record, skip)
        terms = tokenize(text)
        if terms:
            yield Doc(number, text, terms, record.get("seq"))


def transcript_records(path: Path, shown: RecordFilter | None = None) -> list[tuple[int, Record]]:
    """A transcript's valid records with their line numbers; `shown` keeps the ones a reader may see."""
    numbered: list[tuple[int, Record]] = []
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for number, raw in enumerate(fh, start=1):
                try:
                    record = json.loads(raw)
                except json.JSONDecodeError:
                    continue
                if record_problem(record) is None:
                    numbered.append((number, record))
    except OSError:
        return []
    if shown is None:
        return numbered
    lines = {record.get("seq"): number for number, record in numbered}  # a shown record may be a new (reduced) dict
    return [(lines.get(record.get("seq"), 0), record) for record in shown([record for _, record in numbered])]


def transcript_docs(path: Path, shown: RecordFilter) -> Iterable[Doc]:
    skip: set[str] = set()
    for number, record in transcript_records(path, shown):
        text = record_text(record, skip)
        if terms := tokenize(text):
            yield Doc(number, text, terms, record.get("seq"))


def _snippet(text: str, terms: list[str]) -> str:
    """A window of the text around the first query term, on one line."""
    flat = " ".join(text.split())
    if len(flat) <= SNIPPET:
        return flat
    lower = flat.lower()
    positions = [p for t in terms if (p := lower.find(t)) >= 0]
    start = max(0, min(positions) - SNIPPET // 3) if positions else 0
    piece = flat[start:start + SNIPPET]
    return ("…" if start else "") + piece + ("…" if start + SNIPPET < len(flat) else "")
