"""This tree against an earlier revision, side by side on the same machine at the same time.

Figures taken on different days on a shared 2-core machine differ by up to 2x for the same
code, so "unchanged or better than an earlier commit" is only meaningful measured together. This script
exports the revision with `git archive` into a temporary folder and then alternates the two
daemons, round after round, each against the same zero-latency fake Messages API (this tree's,
`--fast`) and driven through its own tree's client and test harness. It prints the median over
the rounds of each figure, each round's figures, and in how many rounds this tree did better
(the two trees of a round run back to back; the machine's speed drifts between rounds). Where the tree's protocol has it, the client
connects as a plain chat client (`events: ["chat"]`), so part of a difference can be events a
chat client no longer receives (older trees send every event of the session). The exported tree is
run as `clawgate` through PYTHONPATH (the editable install would otherwise give this checkout's
code to both), and each round checks which code it ran. Both trees are compiled to bytecode
first, as an installed daemon is (`--from-source`: every start compiles what it imports).

Per round and tree: start-up to ready; 200 sequential messages in blocks of 10 (one fresh session
per block: the round trip of a short chat); 200 in one session (a growing history); 100 sessions
x 10 messages at once (throughput, and the daemon's CPU per message, all threads); then SIGKILL
and the time from restarting to the first reply (start-up plus the model SDK's import).

Usage: python bench/versus.py [--rev 6a78ab2] [--rounds 3] [--from-source]   (6a78ab2: version 0.1.0 as first tested on main)
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

ROOT = Path(__file__).resolve().parent.parent
FIRST_TESTED = "6a78ab2"  # version 0.1.0 as first tested green on main
FIGURES = [  # key, label, unit, better
    ("ready_ms", "start-up to ready", "ms", "lower"),
    ("fresh_p50", "round trip p50, fresh session every 10 messages", "ms", "lower"),
    ("fresh_p99", "round trip p99, fresh session every 10 messages", "ms", "lower"),
    ("one_p50", "round trip p50, one session (history 0-200)", "ms", "lower"),
    ("tput", "throughput, 100 sessions x 10 messages", "msg/s", "higher"),
    ("cpu_per_msg", "daemon CPU per message (throughput run)", "ms", "lower"),
    ("restart_ms", "SIGKILL -> restart -> first reply to a new message", "ms", "lower"),
]

# Runs in a child process with the measured tree first on sys.path (its harness and client).
MEASURE = r'''
import asyncio, json, subprocess, sys, tempfile, time
from pathlib import Path
import psutil
tree, fake_url = Path(sys.argv[1]), sys.argv[2]
sys.path.insert(0, str(tree))
import clawgate.gateway
from clawgate.gateway.client import GatewayClient
from tests.harness import TOKEN, DaemonProcess

def client(url):
    try:  # a client that asks for chat events only, where the tree's protocol has the filter
        return GatewayClient(url, TOKEN, events=["chat"])
    except TypeError:
        return GatewayClient(url, TOKEN)

def pct(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

async def sequential(url, n, per, prefix):
    walls = []
    async with client(url) as c:
        for i in range(n):
            started = time.perf_counter()
            await c.chat(f"ping {i}", session=f"{prefix}-{i // per}")
            walls.append((time.perf_counter() - started) * 1000)
    return walls

async def throughput(url, sessions, per):
    async def one(s):
        async with client(url) as c:
            for m in range(per):
                await c.request("chat.send", {"session": f"t-{s}", "text": f"m{m}"})
            finals = 0
            async for frame in c.events():
                if frame["event"] == "chat" and frame["payload"]["state"] in ("final", "error"):
                    finals += 1
                    if finals == per:
                        return
    started = time.perf_counter()
    await asyncio.gather(*(one(s) for s in range(sessions)))
    return sessions * per / (time.perf_counter() - started)

with tempfile.TemporaryDirectory() as home:
    env = {"CLAWGATE_LOG__LEVEL": "warning", "CLAWGATE_AGENT__MAX_CONCURRENT": "16",
           "CLAWGATE_AGENT__CONTEXT_TOKENS": "5000000"}
    daemon = DaemonProcess(Path(home), anthropic_url=fake_url, env=env)
    daemon.init()
    started = time.perf_counter()
    daemon.start()
    ready = (time.perf_counter() - started) * 1000
    try:
        proc = psutil.Process(daemon.proc.pid)
        asyncio.run(sequential(daemon.url, 20, 10, "warm-up"))  # the SDK is imported on first use
        fresh = asyncio.run(sequential(daemon.url, 200, 10, "fresh"))
        one = asyncio.run(sequential(daemon.url, 200, 1000, "one"))
        cpu = sum(proc.cpu_times()[:2])
        tput = asyncio.run(throughput(daemon.url, 100, 10))
        cpu_per_msg = (sum(proc.cpu_times()[:2]) - cpu) / 1000 * 1000
        daemon.kill()  # SIGKILL, then the time until a restarted daemon has answered a new message
        started = time.perf_counter()
        daemon.start()
        asyncio.run(sequential(daemon.url, 1, 1, "after-restart"))
        restart = (time.perf_counter() - started) * 1000
    finally:
        daemon.terminate()
print(json.dumps({"code": str(Path(clawgate.gateway.__file__).resolve().parent.parent), "ready_ms": ready, "fresh_p50": pct(fresh, .5), "fresh_p99": pct(fresh, .99),
                  "one_p50": pct(one, .5), "tput": tput, "cpu_per_msg": cpu_per_msg, "restart_ms": restart}))
'''


def start_fake_model() -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-m", "tests.fakes.anthropic_api", "--port", "0", "--fast"], cwd=ROOT,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if not line.startswith("READY "):
        raise SystemExit(f"the fake Messages API did not start: {line!r}")
    return proc, line.split()[1]


def export(rev: str, into: Path) -> None:
    archive = subprocess.run(["git", "archive", rev], cwd=ROOT, capture_output=True)
    if archive.returncode != 0:
        raise SystemExit(f"cannot export revision {rev!r}: {archive.stderr.decode().strip()} (is this a git clone?)")
    subprocess.run(["tar", "-xf", "-", "-C", str(into)], input=archive.stdout, check=True)


def working_tree_rev() -> str:
    """A commit of this checkout's tracked files as they are now, uncommitted edits included, made
    without touching the index or the stash (`git stash create`), so this tree can be exported like
    an earlier revision and both run from a plain folder (the editable checkout starts slower)."""
    made = subprocess.run(["git", "stash", "create"], cwd=ROOT, capture_output=True, text=True, check=True)
    return made.stdout.strip() or "HEAD"


def importable(tree: Path, into: Path) -> Path:
    """A folder to put first on PYTHONPATH so that `clawgate.*` is `tree`'s code: the editable install
    maps `clawgate.gateway` and the rest to this checkout, so an exported tree run as it is would run
    this tree's daemon with the other's harness. `into/clawgate/<package>` links to `tree/<package>`
    (the namespace package found on PYTHONPATH comes before the editable install's finder)."""
    namespace = into / "clawgate"
    namespace.mkdir(parents=True)
    for package in sorted(p for p in tree.iterdir() if (p / "__init__.py").is_file()):
        (namespace / package.name).symlink_to(package, target_is_directory=True)
    return into


def compile_bytecode(tree: Path) -> None:
    """Each tree's modules compiled to bytecode once, before any round: an installed daemon starts from
    its `.pyc` files (pip writes them at install), so start-up is measured without compiling ~180
    modules from source at every start (what PYTHONDONTWRITEBYTECODE=1 without them costs: about a
    third of start-up's CPU). The daemons still write no bytecode of their own."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", "-x", r"[/\\]\.venv", str(tree)], check=True,
                   stdout=subprocess.DEVNULL)


def measure(tree: Path, fake_url: str, path: Path | None) -> dict[str, float]:
    """One round of `tree`; `path`: the folder that makes `clawgate` that tree's (None: this checkout)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if path is not None:
        env["PYTHONPATH"] = str(path)
    done = subprocess.run([sys.executable, "-c", MEASURE, str(tree), fake_url], cwd=tree, capture_output=True,
                          text=True, timeout=900, env=env)
    if done.returncode != 0:
        raise SystemExit(f"measuring {tree} failed:\n{done.stderr[-2000:]}")
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    code = figures.pop("code")
    if Path(code) != tree.resolve():
        raise SystemExit(f"measuring {tree} ran the code in {code}: its `clawgate` package was not the tree's")
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rev", default=FIRST_TESTED, help="the earlier revision (default: 6a78ab2, version 0.1.0 as first tested on main)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--from-source", action="store_true",
                        help="do not compile the trees to bytecode first: every start compiles the modules it imports")
    args = parser.parse_args()
    fake, fake_url = start_fake_model()
    runs: dict[str, list[dict[str, float]]] = {"this tree": [], args.rev: []}
    try:
        with tempfile.TemporaryDirectory() as folder:
            old = Path(folder) / "tree"
            old.mkdir()
            export(args.rev, old)
            old_path = importable(old, Path(folder) / "path")
            if not args.from_source:
                for tree in (ROOT, old):
                    compile_bytecode(tree)
            for round_no in range(args.rounds):
                order = [("this tree", ROOT, None), (args.rev, old, old_path)]
                for name, tree, path in order if round_no % 2 == 0 else order[::-1]:
                    figures = measure(tree, fake_url, path)
                    runs[name].append(figures)
                    print(f"round {round_no + 1} {name:>9}: " + ", ".join(f"{k} {v:.1f}" for k, v in figures.items()),
                          flush=True)
    finally:
        fake.terminate()
    load = os.getloadavg()[0]
    print(f"\nthis tree vs {args.rev}, median of {args.rounds} alternating rounds, load {load:.1f} after")
    print(f"| measure | this tree | {args.rev} | this tree better in |")
    print("|---|---|---|---|")
    for key, label, unit, better in FIGURES:
        new = statistics.median(r[key] for r in runs["this tree"])
        old = statistics.median(r[key] for r in runs[args.rev])
        # Rounds are pairs measured back to back, so each pair shares the machine's state of the moment.
        wins = sum((a[key] < b[key]) if better == "lower" else (a[key] > b[key])
                   for a, b in zip(runs["this tree"], runs[args.rev]))
        print(f"| {label} | {new:.1f} {unit} | {old:.1f} {unit} | {wins} of {args.rounds} rounds |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
