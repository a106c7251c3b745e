"""Start-up, settled idle RSS and a new session's CPU: this tree beside an earlier revision, alternating.

The figures that move with a change to what the daemon imports or does per new session, measured
side by side because the shared machine's load makes absolute figures incomparable between hours
(bench/versus.py explains the export, the PYTHONPATH that makes `clawgate` the exported tree's,
and the bytecode both trees are compiled to first). This tree is exported too, its uncommitted edits
included, so both daemons run from a plain folder. Per round and tree, each in its own process
with its own harness:

- start-up: wall time to the ready line and the daemon's CPU (user + system) by then, the steadier
  of the two on a loaded machine;
- RSS once settled after ready (bench/memory_soak.py's `settled`: the SDK is imported after ready);
- daemon CPU per message over `--messages` messages each opening a new session, and over as many
  in sessions that already exist (each had 10 messages before), against the zero-latency fake model;
  the two kinds alternate in blocks of ten messages over one connection.

Usage: python bench/startup_versus.py [--rev main] [--rounds 4] [--messages 200] [--start-only]
(--start-only: start-up alone, so many rounds fit in a minute: `--start-only --rounds 10`)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from versus import compile_bytecode, export, importable, start_fake_model, working_tree_rev  # noqa: E402

MEASURE = r'''
import asyncio, json, sys, tempfile, time
from pathlib import Path
import psutil
tree, fake_url, messages = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
sys.path.insert(0, str(tree))
sys.path.insert(0, str(tree / "bench"))
import clawgate.gateway
from clawgate.gateway.client import GatewayClient
from tests.harness import TOKEN, DaemonProcess
from memory_soak import settled

async def chats(url, sessions):
    async with GatewayClient(url, TOKEN, events=["chat"]) as client:
        for session in sessions:
            await client.chat("ping", session=session)

def cpu(proc):
    times = proc.cpu_times()
    return (times.user + times.system) * 1000

async def alternate(url, proc, kept):
    """CPU per message of new sessions and of `kept` ones, in alternating blocks of ten over one
    connection, so neither a change of the machine's pace nor a connection's cost weighs on one kind."""
    new_cpu = existing_cpu = 0.0
    async with GatewayClient(url, TOKEN, events=["chat"]) as client:
        for block in range(0, len(kept), 10):
            before = cpu(proc)
            for i in range(block, block + 10):
                await client.chat("ping", session=f"new-{i}")
            middle = cpu(proc)
            for session in kept[block:block + 10]:
                await client.chat("ping", session=session)
            new_cpu += middle - before
            existing_cpu += cpu(proc) - middle
    return new_cpu / len(kept), existing_cpu / len(kept)

with tempfile.TemporaryDirectory() as home:
    daemon = DaemonProcess(Path(home) / "home", anthropic_url=fake_url,
                           env={"CLAWGATE_LOG__LEVEL": "warning", "CLAWGATE_AGENT__CONTEXT_TOKENS": "5000000"})
    daemon.init()
    started = time.perf_counter()
    daemon.start()
    ready_ms = (time.perf_counter() - started) * 1000
    proc = psutil.Process(daemon.proc.pid)
    ready_cpu = cpu(proc)
    rss = new_cpu = existing_cpu = 0.0
    try:
        if messages:  # 0: --start-only
            rss = settled(daemon.proc.pid)
            asyncio.run(chats(daemon.url, [f"warm-{i}" for i in range(20)]))
            kept = [f"kept-{i % (messages // 10)}" for i in range(messages)]
            asyncio.run(chats(daemon.url, kept))  # 10 messages in each before they are measured
            new_cpu, existing_cpu = asyncio.run(alternate(daemon.url, proc, kept))
    finally:
        daemon.kill()
print(json.dumps({"code": str(Path(clawgate.gateway.__file__).resolve().parent.parent), "ready_ms": ready_ms,
                  "ready_cpu_ms": ready_cpu, "rss_settled_mb": rss, "new_session_cpu_ms": new_cpu,
                  "existing_session_cpu_ms": existing_cpu}))
'''
FIGURES = [("ready_ms", "start-up to ready, wall", "ms"), ("ready_cpu_ms", "daemon CPU to ready", "ms"),
           ("rss_settled_mb", "RSS settled idle", "MB"), ("new_session_cpu_ms", "CPU per message, a new session each", "ms"),
           ("existing_session_cpu_ms", "CPU per message, sessions that exist", "ms")]


def measure(tree: Path, fake_url: str, path: Path | None, messages: int) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if path is not None:
        env["PYTHONPATH"] = str(path)
    done = subprocess.run([sys.executable, "-c", MEASURE, str(tree), fake_url, str(messages)], cwd=tree,
                          capture_output=True, text=True, timeout=900, env=env)
    if done.returncode != 0:
        raise SystemExit(f"measuring {tree} failed:\n{done.stderr[-2000:]}")
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    if Path(figures.pop("code")) != tree.resolve():
        raise SystemExit(f"measuring {tree} ran other code: its `clawgate` package was not the tree's")
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rev", default="main")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--messages", type=int, default=200)
    parser.add_argument("--start-only", action="store_true",
                        help="only start-up to ready (wall and CPU): a round is a start of each tree, seconds not minutes")
    args = parser.parse_args()
    if args.start_only:
        args.messages = 0
    elif args.messages < 10 or args.messages % 10:
        raise SystemExit("--messages must be a multiple of 10 (the existing sessions get 10 messages each "
                         "first, and the two kinds alternate in blocks of ten)")
    fake, fake_url = start_fake_model()
    runs: dict[str, list[dict[str, float]]] = {"this tree": [], args.rev: []}
    try:
        with tempfile.TemporaryDirectory() as folder:
            trees = {}
            for name, rev in (("this", working_tree_rev()), ("old", args.rev)):
                tree = Path(folder) / name
                tree.mkdir()
                export(rev, tree)
                compile_bytecode(tree)
                trees[name] = (tree, importable(tree, Path(folder) / f"{name}-path"))
            for round_no in range(args.rounds):
                order = [("this tree", *trees["this"]), (args.rev, *trees["old"])]
                for name, tree, path in order if round_no % 2 == 0 else order[::-1]:
                    figures = measure(tree, fake_url, path, args.messages)
                    runs[name].append(figures)
                    print(f"round {round_no + 1} {name:>9}: " + ", ".join(f"{k} {v:.1f}" for k, v in figures.items()),
                          flush=True)
    finally:
        fake.terminate()
    print(f"\nthis tree vs {args.rev}, median of {args.rounds} alternating rounds, load {os.getloadavg()[0]:.1f} after")
    print(f"| measure | this tree | {args.rev} | this tree lower in |")
    print("|---|---|---|---|")
    for key, label, unit in FIGURES[:2] if args.start_only else FIGURES:
        new = statistics.median(r[key] for r in runs["this tree"])
        old_value = statistics.median(r[key] for r in runs[args.rev])
        wins = sum(a[key] < b[key] for a, b in zip(runs["this tree"], runs[args.rev]))
        print(f"| {label} | {new:.1f} {unit} | {old_value:.1f} {unit} | {wins} of {args.rounds} rounds |")
    for name, rs in runs.items() if not args.start_only else ():
        ratio = statistics.median(r["new_session_cpu_ms"] / r["existing_session_cpu_ms"] for r in rs)
        print(f"{name}: a new session's message costs {ratio:.2f}x the CPU of one in an existing session (median)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
