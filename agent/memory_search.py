"""memory_search: keyword (BM25) search over memory files and session transcripts.

Documents are lines of MEMORY.md and memory/**/*.md, and the user / assistant / tool-result
records of the session transcripts (JSONL, one record per line). Hits carry the file and
line (and seq for transcripts) so the agent can read the surrounding text back with
memory_get. No embeddings, no index service: parsed files are cached by size and mtime,
and a transcript that only grew (append-only) is parsed from where it was left.
CJK text has no spaces, so it is indexed as character bigrams.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterable

from workspace.fdpath import locate, open_regular

from .session import record_problem

CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af"
TOKEN = re.compile(rf"[{CJK}]+|[^\W{CJK}]+")
K1, B = 1.2, 0.75
SNIPPET = 240


def tokenize(text: str) -> list[str]:
    out: list[str] = []
    for token in TOKEN.findall(text.lower()):
        if re.match(rf"[{CJK}]", token):
            out.extend([token] if len(token) == 1 else [token[i:i + 2] for i in range(len(token) - 1)])
        else:
            out.append(token)
    return out


@dataclass
class Doc:
    line: int
    text: str
    terms: Counter[str]
    length: int
    seq: int | None = None


@dataclass
class _FileIndex:
    size: int = 0
    mtime_ns: int = 0
    lines: int = 0
    docs: list[Doc] = field(default_factory=list)
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

    def search(self, query: str, limit: int = 8, *, visible: Callable[[str], bool] | None = None) -> list[Hit]:
        """BM25 over the files `visible` admits (by their shown name, e.g. "sessions/main.jsonl"); all by default."""
        terms = list(dict.fromkeys(tokenize(query)))
        if not terms:
            return []
        corpus = [(name, doc) for name, path in self.files() if visible is None or visible(name)
                  for doc in self._index(path).docs]
        if not corpus:
            return []
        total = len(corpus)
        average = sum(doc.length for _, doc in corpus) / total or 1.0
        df = {t: sum(1 for _, doc in corpus if t in doc.terms) for t in terms}
        idf = {t: math.log(1 + (total - n + 0.5) / (n + 0.5)) for t, n in df.items() if n}
        hits: list[Hit] = []
        for name, doc in corpus:
            score = 0.0
            for term, weight in idf.items():
                tf = doc.terms.get(term, 0)
                if tf:
                    score += weight * tf * (K1 + 1) / (tf + K1 * (1 - B + B * doc.length / average))
            if score > 0:
                hits.append(Hit(name, doc.line, round(score, 4), _snippet(doc.text, terms), doc.seq))
        hits.sort(key=lambda h: (-h.score, h.file, h.line))
        return hits[:limit]

    # indexing ------------------------------------------------------------------
    def _open(self, path: Path) -> BinaryIO:
        """Workspace files through the workspace's folder descriptors (a link out is not read);
        transcripts, in the daemon's own state folder, by path."""
        if not path.is_relative_to(self.workspace):
            return open(path, "rb")
        with locate(self.workspace, str(path)) as loc:
            return open(open_regular(loc), "rb")

    def _index(self, path: Path) -> _FileIndex:
        try:
            fh = self._open(path)
        except (OSError, ValueError):  # gone, or a link out of the workspace (PathOutsideWorkspace)
            self._cache.pop(path, None)
            return _FileIndex()
        with fh:
            stat = os.fstat(fh.fileno())
            cached = self._cache.get(path)
            if cached and cached.size == stat.st_size and cached.mtime_ns == stat.st_mtime_ns:
                return cached
            jsonl = path.suffix in (".jsonl", ".archived")
            if cached is None or not jsonl or stat.st_size < cached.size:
                cached = _FileIndex()
            fh.seek(cached.size)
            data = fh.read()
        complete = data[: data.rfind(b"\n") + 1] if jsonl else data  # a torn last line waits for its end
        lines = complete.decode("utf-8", errors="replace").splitlines()
        if jsonl:
            cached.docs.extend(_jsonl_docs(lines, cached.lines, cached.recall_ids))
        else:
            cached.docs.extend(_markdown_docs(lines, 0))
        cached.lines += complete.count(b"\n") if jsonl else 0
        cached.size += len(complete)
        cached.mtime_ns = stat.st_mtime_ns if len(complete) == len(data) else 0
        self._cache[path] = cached
        return cached


def _markdown_docs(lines: list[str], offset: int) -> Iterable[Doc]:
    for number, line in enumerate(lines, start=offset + 1):
        terms = tokenize(line)
        if terms and not line.startswith("# "):
            yield Doc(number, line.strip(), Counter(terms), len(terms))


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
            yield Doc(number, text, Counter(terms), len(terms), record.get("seq"))


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
