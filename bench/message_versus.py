"""A message in a session that exists: this tree's daemon and an earlier revision's, running at once.

bench/versus.py alternates whole rounds, one daemon at a time; on a shared machine whose load moves by
several points within a minute, a few percent between two trees drowns in that. Here both daemons run
side by side against one zero-latency fake Messages API, and one client alternates blocks of
`--block` messages between them (which tree goes first alternates too), so each block pair shares the
machine's state. Every message goes to one of ten sessions that each had three messages before: the
existing-session path only (a new session's cost is bench/startup_versus.py's). Settings as in
bench/nanobot_compare.py: fsync on, drift control and the completeness check on.

The two daemons are not placed alike (which was started first, which client connection was opened
first): in trials here the second placed measured lower whichever tree it was. So each run is done
twice, the trees swapped, and the figures of both passes are printed with their sum over both.

Per tree: round trip p50 / p90 / mean, the daemon's CPU per message (user + system, all threads), and
in how many blocks its median was the lower. The earlier revision is exported and run through
PYTHONPATH as bench/versus.py does, and each daemon's code is checked.

Usage: python bench/message_versus.py [--rev main] [--blocks 30] [--block 10]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import psutil  # noqa: E402
from core_bench import pct  # noqa: E402
from versus import ROOT, compile_bytecode, export, importable, start_fake_model  # noqa: E402

from clawgate.gateway.client import CHAT_ONLY, GatewayClient  # noqa: E402
from tests.harness import TOKEN, DaemonProcess  # noqa: E402

SESSIONS = 10
SETTINGS = {"CLAWGATE_STATE__FSYNC": "true", "CLAWGATE_DRIFT__ENABLED": "true", "CLAWGATE_REFLECTION__ENABLED": "true"}


def code_of(path: Path | None) -> Path:
    """Where `clawgate` comes from with this PYTHONPATH (None: the editable install, this checkout)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if path is not None:
        env["PYTHONPATH"] = str(path)
    out = subprocess.run([sys.executable, "-c", "import clawgate.gateway as g; print(g.__file__)"], env=env,
                         capture_output=True, text=True, cwd=tempfile.gettempdir(), check=True).stdout
    return Path(out.strip()).resolve().parent.parent


async def alternate(urls: dict[str, str], pids: dict[str, int], blocks: int, block: int) -> dict[str, dict]:
    procs = {name: psutil.Process(pid) for name, pid in pids.items()}
    result = {name: {"walls": [], "cpu": 0.0, "wins": 0} for name in urls}
    names = list(urls)
    clients = {name: GatewayClient(url, TOKEN, events=CHAT_ONLY) for name, url in urls.items()}
    for client in clients.values():
        await client.__aenter__()
    try:
        for name, client in clients.items():  # the sessions exist before anything is measured
            for s in range(SESSIONS):
                for i in range(3):
                    await client.chat(f"warm-up {s}-{i}", session=f"s{s}")
        for b in range(blocks):
            medians = {}
            for name in (names if b % 2 == 0 else names[::-1]):
                cpu = sum(procs[name].cpu_times()[:2])
                walls = []
                for i in range(block):
                    text = f"ping {b}-{i}"
                    started = time.perf_counter()
                    reply = await clients[name].chat(text, session=f"s{(b * block + i) % SESSIONS}")
                    walls.append((time.perf_counter() - started) * 1000)
                    if text not in (reply.get("text") or ""):
                        raise SystemExit(f"{name}: the turn for {text!r} did not come back as the echo: {reply}")
                result[name]["cpu"] += sum(procs[name].cpu_times()[:2]) - cpu
                result[name]["walls"] += walls
                medians[name] = statistics.median(walls)
            result[min(medians, key=medians.__getitem__)]["wins"] += 1
    finally:
        for client in clients.values():
            await client.__aexit__(None, None, None)
    return result


def one_pass(order: list[tuple[str, Path | None]], fake_url: str, blocks: int, block: int) -> dict[str, dict]:
    daemons: dict[str, DaemonProcess] = {}
    with tempfile.TemporaryDirectory() as homes:
        try:
            for name, path in order:
                env = dict(SETTINGS, **({"PYTHONPATH": str(path)} if path is not None else {}))
                home = Path(homes) / name
                home.mkdir()  # an existing home: `init` runs with the tree's own code
                daemon = DaemonProcess(home, anthropic_url=fake_url, env=env)
                daemon.init()
                daemons[name] = daemon.start(timeout=120)
            return asyncio.run(alternate({n: d.url for n, d in daemons.items()},
                                         {n: d.proc.pid for n, d in daemons.items()}, blocks, block))
        finally:
            for daemon in daemons.values():
                if daemon.alive():
                    daemon.terminate()


def report(label: str, passes: list[dict[str, dict]], block_count: int) -> None:
    for name in ("this tree", label):
        walls = [w for p in passes for w in p[name]["walls"]]
        cpu = sum(p[name]["cpu"] for p in passes) * 1000 / len(walls)
        each = " / ".join(f"{pct(p[name]['walls'], .5):.2f}" for p in passes)
        wins = sum(p[name]["wins"] for p in passes)
        print(f"| {name} | {pct(walls, .5):.2f} ms ({each}) | {pct(walls, .9):.2f} ms | {statistics.mean(walls):.2f} ms "
              f"| {cpu:.2f} ms | {wins} of {block_count} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rev", default="main")
    parser.add_argument("--blocks", type=int, default=30, help="blocks per tree and pass")
    parser.add_argument("--block", type=int, default=10, help="messages per block")
    args = parser.parse_args()
    if args.blocks < 1 or args.block < 1:
        parser.error("--blocks and --block must be at least 1")
    with tempfile.TemporaryDirectory() as scratch:
        tree = Path(scratch) / "tree"
        tree.mkdir()
        export(args.rev, tree)
        path = importable(tree, Path(scratch) / "path")
        compile_bytecode(tree)
        compile_bytecode(ROOT)
        if code_of(path) != tree.resolve() or code_of(None) != ROOT:
            raise SystemExit("the two daemons would not run the two trees' code (see bench/versus.py, importable)")
        label = f"rev {args.rev}"
        fake, fake_url = start_fake_model()
        try:
            load = os.getloadavg()[0]
            trees: list[tuple[str, Path | None]] = [("this tree", None), (label, path)]
            passes = [one_pass(trees, fake_url, args.blocks, args.block),
                      one_pass(trees[::-1], fake_url, args.blocks, args.block)]
        finally:
            fake.terminate()
            fake.wait(10)
    print(f"{args.blocks} blocks of {args.block} messages per tree and pass, two passes (placing swapped), "
          f"sessions that exist; load average {load:.1f} before / {os.getloadavg()[0]:.1f} after")
    print("| tree | round trip p50 (each pass) | p90 | mean | daemon CPU per message | blocks with the lower median |")
    print("|---|---|---|---|---|---|")
    report(label, passes, 2 * args.blocks)
    return 0


if __name__ == "__main__":
    sys.exit(main())
