"""memory_search bench: the SQLite FTS5 index (bm25()) against the in-Python BM25 scan it replaced.

Builds a workspace with N entries (a fifth as MEMORY.md and daily-log lines, the rest as
transcript records written by the real Session), with the sentences of tests/unit/agent/memory/test_memory_search.py
planted once each, and prints per size: the index time (the first search, which reads every
file; the median of five builds), the query time p50/p95 over repeated warm searches, and how
far the two agree on the test queries (the same top hit; the share of the same top-8 hits).

    .venv/bin/python -m bench.memory_search_bench [--sizes 1000 10000] [--rounds 30]
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from clawgate.agent.memory.search import Hit, MemorySearch, _jsonl_docs, _markdown_docs, _snippet, tokenize  # noqa: E402
from clawgate.agent.session import Session  # noqa: E402

QUERIES = ["staging database port", "nginx certificate", "disk quota backups", "kubernetes", "部署", "db-stage",
           "zebra", "backup job fail", "short answers", "certificate expires"]
PLANTED = ["The staging database runs on db-stage.internal:5433", "The user prefers short answers",
           "Rotated the nginx certificate; expires 2026-01-01", "用户喜欢在周末部署服务"]
PLANTED_TURNS = [("why does the backup job fail?", "ERROR: disk quota exceeded on /var/backups"),
                 ("please set up kubernetes on the new box", "kubectl get nodes: 3 ready")]


class ScanSearch(MemorySearch):
    """The previous implementation's ranking: every document's term counts in memory, and BM25
    (k1 1.2, b 0.75, idf log(1 + (N - n + 0.5) / (n + 0.5))) computed over all of them per query."""

    def __init__(self, workspace: Path, sessions: Path | None = None) -> None:
        super().__init__(workspace, sessions)
        self._docs: dict[str, list[tuple[int, str, Counter[str], int, int | None]]] = {}

    def search(self, query: str, limit: int = 8, *, visible: Callable[[str], bool] | None = None) -> list[Hit]:
        terms = list(dict.fromkeys(tokenize(query)))
        if not terms:
            return []
        files = self.files()  # checked per query, as the old index checked each file's size and mtime
        for _, path in files:
            path.stat()
        if not self._docs:  # built once: the bench's files do not change
            for name, path in files:
                lines = path.read_text(encoding="utf-8").splitlines()
                docs = _jsonl_docs(lines, 0, set()) if path.suffix == ".jsonl" else _markdown_docs(lines, 0)
                self._docs[name] = [(d.line, d.text, Counter(d.terms), len(d.terms), d.seq) for d in docs]
        corpus = [(name, doc) for name, docs in self._docs.items() for doc in docs]
        total = len(corpus)
        average = sum(doc[3] for _, doc in corpus) / total or 1.0
        df = {t: sum(1 for _, doc in corpus if t in doc[2]) for t in terms}
        idf = {t: math.log(1 + (total - n + 0.5) / (n + 0.5)) for t, n in df.items() if n}
        hits: list[Hit] = []
        for name, (line, text, counts, length, seq) in corpus:
            score = 0.0
            for term, weight in idf.items():
                tf = counts.get(term, 0)
                if tf:
                    score += weight * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * length / average))
            if score > 0:
                hits.append(Hit(name, line, round(score, 4), _snippet(text, terms), seq))
        hits.sort(key=lambda h: (-h.score, h.file, h.line))
        return hits[:limit]


def build(root: Path, entries: int, seed: int = 7) -> tuple[Path, Path]:
    rng = random.Random(seed)
    vocabulary = [f"{rng.choice('bcdfghklmnprstvz')}{rng.choice('aeiou')}{rng.choice('lmnrst')}{i}" for i in range(4000)]
    weights = [1 / (rank + 1) for rank in range(len(vocabulary))]  # Zipf-like, as words are

    def sentence() -> str:
        return " ".join(rng.choices(vocabulary, weights, k=rng.randint(5, 30)))

    workspace, sessions = root / "workspace", root / "sessions"
    (workspace / "memory").mkdir(parents=True)
    sessions.mkdir()
    notes = entries // 5
    facts = [f"- {sentence()}" for _ in range(notes // 2)] + [f"- {p}" for p in PLANTED]
    (workspace / "MEMORY.md").write_text("# Memory\n" + "\n".join(facts) + "\n", encoding="utf-8")
    for day in range(10):
        lines = [f"- {sentence()}" for _ in range((notes - notes // 2) // 10)]
        (workspace / "memory" / f"2026-01-{day + 1:02d}.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    records = entries - notes
    for number in range(20):
        session = Session(f"s{number}", sessions / f"s{number}.jsonl", fsync=False)
        for turn in range(records // 20 // 2):
            session.append("user", text=sentence())
            session.append("assistant", content=[{"type": "text", "text": sentence()}])
        if number < len(PLANTED_TURNS):
            asked, said = PLANTED_TURNS[number]
            session.append("user", text=asked)
            session.append("assistant", content=[{"type": "text", "text": said}])
    return workspace, sessions


def measure(make: Callable[[], MemorySearch], rounds: int) -> tuple[float, float, float, dict[str, list[Hit]]]:
    builds: list[float] = []
    for _ in range(5):  # the median of five fresh builds: one is at the mercy of the machine's load
        index = make()
        started = time.perf_counter()
        index.search("warm up the index")
        builds.append((time.perf_counter() - started) * 1000)
    index_ms = statistics.median(builds)
    times: list[float] = []
    for _ in range(rounds):
        for query in QUERIES:
            started = time.perf_counter()
            index.search(query)
            times.append((time.perf_counter() - started) * 1000)
    times.sort()
    results = {query: index.search(query) for query in QUERIES}
    return index_ms, statistics.median(times), times[int(len(times) * 0.95) - 1], results


def agreement(old: dict[str, list[Hit]], new: dict[str, list[Hit]]) -> tuple[int, float]:
    same_top = sum(1 for q in QUERIES if [(h.file, h.line) for h in old[q][:1]] == [(h.file, h.line) for h in new[q][:1]])
    shares = []
    for q in QUERIES:
        a, b = {(h.file, h.line) for h in old[q]}, {(h.file, h.line) for h in new[q]}
        shares.append(1.0 if not a and not b else len(a & b) / max(len(a), len(b)))
    return same_top, statistics.mean(shares)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    print("| entries | index | index ms | query p50 ms | query p95 ms | same top hit | same top-8 |")
    print("|---|---|---|---|---|---|---|")
    for size in args.sizes:
        with tempfile.TemporaryDirectory() as tmp:
            workspace, sessions = build(Path(tmp), size)
            old = measure(lambda: ScanSearch(workspace, sessions), args.rounds)
            new = measure(lambda: MemorySearch(workspace, sessions), args.rounds)
            same_top, share = agreement(old[3], new[3])
            print(f"| {size:,} | in-Python BM25 scan (old) | {old[0]:.0f} | {old[1]:.2f} | {old[2]:.2f} | — | — |")
            print(f"| {size:,} | SQLite FTS5 bm25() | {new[0]:.0f} | {new[1]:.2f} | {new[2]:.2f} | "
                  f"{same_top}/{len(QUERIES)} | {share:.0%} |")


if __name__ == "__main__":
    main()
