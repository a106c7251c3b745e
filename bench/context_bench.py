"""Context-engineering bench: prompt-cache prefix stability, request size, build time.

Runs the real daemon (tests/harness.py) against the fake Messages API on 127.0.0.1 and
prints a table:

1. the first request of a fresh session saying "hello", with the full default tool set;
2. a 50-turn tool-using conversation: for each request, the share of its bytes that is a
   byte-identical prefix of the previous request, measured in the order the prompt cache
   reads a request (tools, system, messages); plus the tokens per request (≈ bytes/4);
3. the time to build the context of a session of 10,000 messages, in-process, fresh and
   warm, with and without consolidated history.

    .venv/bin/python -m bench.context_bench [--turns 50]
    .venv/bin/python -m bench.context_bench --first-request   # only 1., per section and per tool
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from clawgate.agent.context.compaction import Compactor  # noqa: E402
from clawgate.agent.context.builder import ContextBuilder  # noqa: E402
from clawgate.agent.core.events import EventHub  # noqa: E402
from clawgate.agent.session import Session  # noqa: E402
from clawgate.agent.tools import ToolRegistry  # noqa: E402
from clawgate.agent.toolset import default_tools  # noqa: E402
from clawgate.config.schema import Settings  # noqa: E402
from clawgate.gateway.home_setup import write_workspace  # noqa: E402
from tests.fakes.anthropic_api import FakeAnthropic, text, tool_use  # noqa: E402
from tests.harness import DaemonProcess  # noqa: E402


def cache_order(body: dict[str, Any]) -> bytes:
    """The request as the prompt cache reads it: tools, then system, then messages."""
    parts = [body.get("tools", []), body.get("system", []), body.get("messages", [])]
    return b"".join(json.dumps(p, ensure_ascii=False, separators=(",", ":")).encode()[:-1] for p in parts)


def common_prefix(a: bytes, b: bytes) -> int:
    n = min(len(a), len(b))
    lo, hi = 0, n
    while lo < hi:  # binary search on equal prefixes: fast on large bodies
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


HELLO_GOAL = 12_000  # bytes; tests/e2e/test_request_size_e2e.py holds the daemon to it


def compact_size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


async def first_request(fake: FakeAnthropic, home: Path) -> tuple[dict[str, Any], int]:
    """The body and size (Content-Length) of a fresh session's first request saying "hello"."""
    proc = DaemonProcess(home, anthropic_url=fake.base_url)
    proc.init()
    proc.start()
    try:
        async with proc.client() as client:
            fake.reset()
            await client.chat("hello", session="hello")
    finally:
        proc.kill()
    return fake.requests[0], int(fake.headers[0].get("content-length") or 0)


def first_request_table(body: dict[str, Any], size: int) -> list[str]:
    """What the first request is made of: the sections, then each tool, largest first."""
    rows = [("whole request (Content-Length)", size, f"goal < {HELLO_GOAL:,} B: {'met' if size < HELLO_GOAL else 'NOT met'}")]
    rows += [(section, compact_size(body.get(section, [])), f"{len(body.get(section, []))} entries")
             for section in ("tools", "system", "messages")]
    for tool in sorted(body.get("tools", []), key=compact_size, reverse=True):
        rows.append((f"  tool {tool['name']}", compact_size(tool), f"description {len(tool.get('description', ''))} chars"))
    width = max(len(r[0]) for r in rows)
    lines = [f"{'part'.ljust(width)}  {'bytes':>7}  detail", f"{'-' * width}  {'-' * 7}  {'-' * 30}"]
    lines += [f"{name.ljust(width)}  {n:>7,}  {detail}" for name, n, detail in rows]
    return lines


def section_sizes(body: dict[str, Any]) -> dict[str, int]:
    return {k: len(json.dumps(body.get(k, []), ensure_ascii=False, separators=(",", ":")).encode())
            for k in ("tools", "system", "messages")}


async def conversation(turns: int, fake: FakeAnthropic, home: Path) -> dict[str, Any]:
    proc = DaemonProcess(home, anthropic_url=fake.base_url)
    proc.init()
    (proc.workspace / "notes").mkdir(parents=True, exist_ok=True)
    rng = random.Random(7)
    for i in range(8):
        lines = [f"line {j}: value {rng.randint(0, 10**6)} path notes/n{i}.txt" for j in range(rng.randint(10, 40))]
        (proc.workspace / "notes" / f"n{i}.txt").write_text("\n".join(lines) + "\n")
    proc.start()
    try:
        async with proc.client() as client:
            fake.reset()
            await client.chat("hello", session="hello")
            hello = fake.requests[0]
            hello_bytes = int(fake.headers[0].get("content-length") or 0)
            fake.reset()
            for turn in range(turns):
                note = f"notes/n{turn % 8}.txt"
                call = [tool_use("read_file", {"path": note}),
                        tool_use("list_dir", {"path": "notes"}),
                        tool_use("exec", {"argv": ["grep", "-c", "value", note]}),
                        tool_use("write_file", {"path": f"notes/summary-{turn}.md", "content": f"# Turn {turn}\nall good\n"}),
                        tool_use("memory_search", {"query": f"summary turn {turn - 1}"})][turn % 5]
                fake.enqueue(call, text(f"Turn {turn} done: I checked the notes and everything is in order."))
                await client.chat(f"step {turn}: please look at the notes again and tell me what changed",
                                  session="bench")
            bodies = list(fake.requests)
            sizes = [int(h.get("content-length") or 0) for h in fake.headers]
    finally:
        proc.kill()
    shares, reuse, fresh = [], [], []
    previous = None
    for body in bodies:
        current = cache_order(body)
        if previous is not None:
            same = common_prefix(previous, current)
            shares.append(same / len(current))
            reuse.append(same / len(previous))
            fresh.append(len(current) - same)
        previous = current
    return {"hello": hello, "hello_bytes": hello_bytes, "bodies": bodies, "sizes": sizes, "shares": shares,
            "reuse": reuse, "fresh": fresh}


def build_times(total: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        workspace = root / "workspace"
        write_workspace(workspace)
        session = Session("bench", root / "bench.jsonl", fsync=False)
        turns = 0
        while session.message_count < total:
            turns += 1
            session.append("user", text=f"message {turns}", context=f"[runtime] time: t{turns}")
            if turns % 2:
                session.append("assistant", content=[{"type": "tool_use", "id": f"tu{turns}", "name": "read_file",
                                                      "input": {"path": f"f{turns}.txt"}}])
                session.append("tool_results", results=[{"tool_use_id": f"tu{turns}", "content": "x" * 900}])
            session.append("assistant", content=[{"type": "text", "text": f"answer {turns}"}])
        registry = ToolRegistry(default_tools(Settings()), events=EventHub())

        def builder() -> ContextBuilder:
            return ContextBuilder(workspace, tools=registry.definitions, model="m", max_tokens=1024,
                                  compactor=Compactor(chunk_chars=40_000))

        def timed(b: ContextBuilder, runs: int = 20) -> float:
            samples = []
            for _ in range(runs):
                started = time.perf_counter()
                b.build(session)
                samples.append((time.perf_counter() - started) * 1000)
            return statistics.median(samples)

        out: dict[str, float] = {"messages": float(session.message_count)}
        cold = builder()
        started = time.perf_counter()
        cold.build(session)
        out["unconsolidated_first_ms"] = (time.perf_counter() - started) * 1000
        out["unconsolidated_warm_ms"] = timed(cold)
        # consolidate all but the last ~100 messages (a pointer record, as the Consolidator writes)
        cut = next(i for i in range(session.message_count - 100, session.message_count)
                   if session.llm_messages(i)[0]["role"] == "user"
                   and session.llm_messages(i)[0]["content"][0]["type"] != "tool_result")
        session.append("consolidated", upto=cut, ok=True, summary="s", pointer="[memory] earlier part consolidated")
        fresh = builder()
        started = time.perf_counter()
        fresh.build(session)
        out["consolidated_first_ms"] = (time.perf_counter() - started) * 1000
        out["consolidated_warm_ms"] = timed(fresh)
        session.close()
        return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--first-request", action="store_true", help="only the first request's size table")
    args = parser.parse_args(argv)
    if args.first_request:
        with FakeAnthropic() as fake, tempfile.TemporaryDirectory() as tmp:
            body, size = asyncio.run(first_request(fake, Path(tmp) / "home"))
        print("\n".join(first_request_table(body, size)))
        return 0 if size < HELLO_GOAL else 1
    with FakeAnthropic() as fake, tempfile.TemporaryDirectory() as tmp:
        result = asyncio.run(conversation(args.turns, fake, Path(tmp) / "home"))
    hello = result["hello"]
    parts = section_sizes(hello)
    shares, reuse, sizes = result["shares"], result["reuse"], result["sizes"]
    small = build_times(1_000)
    large = build_times(10_000)
    rows = [
        ("first request, fresh session, \"hello\"", f"{result['hello_bytes']:,} B (goal < {HELLO_GOAL:,} B)",
         f"tools {parts['tools']:,} B ({len(hello.get('tools', []))} tools) · system {parts['system']:,} B "
         f"· messages {parts['messages']:,} B"),
        (f"prefix share, {args.turns}-turn tool conversation", f"{100 * statistics.mean(shares):.2f} % avg (goal >= 99 %)",
         f"min {100 * min(shares):.2f} % · median {100 * statistics.median(shares):.2f} % over {len(shares)} request pairs"),
        ("previous request reused as prefix", f"{100 * statistics.mean(reuse):.2f} % avg",
         f"min {100 * min(reuse):.2f} % (a drop = a compaction jump)"),
        ("tokens per request (≈ bytes/4)", f"{statistics.mean(sizes) / 4:,.0f} avg",
         f"first {sizes[0] / 4:,.0f} · last {sizes[-1] / 4:,.0f} · new (uncached) {statistics.mean(result['fresh']) / 4:,.0f} avg"),
        ("tokens per user turn (2 requests each)", f"{sum(sizes) / 4 / args.turns:,.0f}",
         f"uncached {sum(result['fresh']) / 4 / args.turns:,.0f}"),
        ("build context, 10,000 msgs, consolidated to ~100", f"{large['consolidated_warm_ms']:.3f} ms warm (goal < 20 ms)",
         f"first {large['consolidated_first_ms']:.2f} ms · 1,000-msg session: {small['consolidated_warm_ms']:.3f} ms warm"),
        ("build context, 10,000 msgs, nothing consolidated", f"{large['unconsolidated_warm_ms']:.3f} ms warm",
         f"first {large['unconsolidated_first_ms']:.2f} ms (walks the whole window once)"),
    ]
    width = max(len(r[0]) for r in rows)
    value = max(len(r[1]) for r in rows)
    print(f"{'measure'.ljust(width)}  {'result'.ljust(value)}  detail")
    print(f"{'-' * width}  {'-' * value}  {'-' * 40}")
    for name, result_text, detail in rows:
        print(f"{name.ljust(width)}  {result_text.ljust(value)}  {detail}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
