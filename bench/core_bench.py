"""Daemon overhead with a zero-latency fake model: latency by history length, throughput,
memory, start-up.

Runs the real `clawgate gateway` process and the fake Messages API as separate processes,
drives the gateway over WebSocket, and prints a table. The round trip is measured in one
session of 1,010 messages (at history 10, 100 and 1,000: the p50 of the 20 messages around
each point); it includes the fake server's own work, which grows with the request body.
Usage: python bench/core_bench.py [--fsync false] [--messages N]
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

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from clawgate.gateway.client import CHAT_ONLY, GatewayClient  # noqa: E402
from tests.harness import TOKEN, DaemonProcess  # noqa: E402


def start_fake_model() -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-m", "tests.fakes.anthropic_api", "--port", "0", "--fast"], cwd=ROOT,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    assert line.startswith("READY "), line
    return proc, line.split()[1]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def latency(url: str, n: int, pid: int, session: str = "bench-latency") -> tuple[list[float], list[float]]:
    """Sequential round trips in ONE session, so the history grows with every message: the round
    trip (ms) and the daemon's CPU time (ms, all threads) of each message."""
    proc = psutil.Process(pid)
    walls, cpus = [], []
    async with GatewayClient(url, TOKEN, events=CHAT_ONLY) as client:
        for i in range(n):
            cpu = sum(proc.cpu_times()[:2])
            started = time.perf_counter()
            await client.chat(f"ping {i}", session=session)
            walls.append((time.perf_counter() - started) * 1000)
            cpus.append((sum(proc.cpu_times()[:2]) - cpu) * 1000)
    return walls, cpus


def at_history(values: list[float], turns: int, width: int = 20) -> list[float]:
    """The measurements of the messages sent when the session held about `turns` earlier turns."""
    start = max(0, turns - width // 2)
    return values[start:start + width]


async def throughput(url: str, sessions: int, per_session: int) -> float:
    async def one(s: int) -> None:
        async with GatewayClient(url, TOKEN, events=CHAT_ONLY) as client:
            for m in range(per_session):
                await client.request("chat.send", {"session": f"bench-{s}", "text": f"m{m}"})
            finals = 0
            async for frame in client.events():
                if frame["event"] == "chat" and frame["payload"]["state"] in ("final", "error"):
                    finals += 1
                    if finals == per_session:
                        return

    started = time.perf_counter()
    await asyncio.gather(*(one(s) for s in range(sessions)))
    return sessions * per_session / (time.perf_counter() - started)


def rss_mb(pid: int) -> float:
    return psutil.Process(pid).memory_info().rss / 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=10_000, help="messages before the loaded RSS reading")
    parser.add_argument("--fsync", choices=["true", "false"], default="true")
    args = parser.parse_args()
    fake, fake_url = start_fake_model()
    rows: list[tuple[str, str, str]] = []
    try:
        with tempfile.TemporaryDirectory() as home:
            # A context window large enough that 1,000 turns are sent whole (no consolidation), so the
            # figures show what history length itself costs.
            env = {"CLAWGATE_STATE__FSYNC": args.fsync, "CLAWGATE_AGENT__MAX_CONCURRENT": "16",
                   "CLAWGATE_LOG__LEVEL": "warning", "CLAWGATE_AGENT__CONTEXT_TOKENS": "5000000"}
            daemon = DaemonProcess(Path(home), anthropic_url=fake_url, env=env)
            daemon.init()
            starts = []
            for _ in range(3):
                t0 = time.perf_counter()
                daemon.start()
                starts.append((time.perf_counter() - t0) * 1000)
                daemon.terminate()
            daemon.start()
            assert daemon.proc is not None
            pid = daemon.proc.pid
            time.sleep(0.5)
            idle = rss_mb(pid)
            asyncio.run(latency(daemon.url, 5, pid, session="bench-warm-up"))  # the SDK is imported on first use
            walls, cpus = asyncio.run(latency(daemon.url, 1010, pid))
            proc = psutil.Process(pid)
            cpu_before, wall_before = sum(proc.cpu_times()[:2]), time.perf_counter()
            tput = asyncio.run(throughput(daemon.url, 100, 10))
            cpu_per_msg = (sum(proc.cpu_times()[:2]) - cpu_before) / 1000 * 1000
            cpu_share = (sum(proc.cpu_times()[:2]) - cpu_before) / (time.perf_counter() - wall_before)
            sent = 1010 + 1000
            while args.messages - sent >= 100:  # whole rounds of one message per session
                batch = min(2000, args.messages - sent) // 100 * 100
                asyncio.run(throughput(daemon.url, 100, batch // 100))
                sent += batch
            loaded = rss_mb(pid)
            daemon.terminate()
    finally:
        fake.terminate()
    p50 = {turns: pct(at_history(walls, turns), 0.5) for turns in (10, 100, 1000)}
    rows += [("start-up to ready (median of 3)", f"{statistics.median(starts):.0f} ms", "< 1500 ms")]
    for turns in (10, 100, 1000):
        rows.append((f"round trip p50, one session at history {turns:,}", f"{p50[turns]:.1f} ms",
                     "< 5 ms" if turns == 10 else f"< {1.5 * p50[10]:.1f} ms (1.5x)"))
    rows += [
        ("round trip p99, history 0-1,000", f"{pct(walls, 0.99):.1f} ms", ""),
        *[(f"daemon CPU per message at history {turns:,}", f"{statistics.mean(at_history(cpus, turns)):.1f} ms", "")
          for turns in (10, 1000)],
        ("throughput, 100 concurrent sessions", f"{tput:.0f} msg/s", "> 300 msg/s"),
        ("daemon CPU per message (throughput run)", f"{cpu_per_msg:.1f} ms", ""),
        ("daemon CPU use during throughput run", f"{cpu_share * 100:.0f} %", ""),
        ("RSS idle", f"{idle:.0f} MB", "< 80 MB"),
        (f"RSS after {sent:,} messages", f"{loaded:.0f} MB", ""),
    ]
    print(f"clawgate core bench (fsync={args.fsync}, zero-latency fake model, {os.cpu_count()} cores)")
    print_table(rows)


def print_table(rows: list[tuple[str, str, str]], cell: int = 12) -> None:
    """A Markdown table of (measure, result, target), pasteable into the README."""
    width = max(len(r[0]) for r in rows)
    print(f"| {'measure':{width}} | {'result':>{cell}} | {'target':>{cell}} |")
    print(f"|{'-' * (width + 2)}|{'-' * (cell + 2)}|{'-' * (cell + 2)}|")
    for name, value, target in rows:
        print(f"| {name:{width}} | {value:>{cell}} | {target:>{cell}} |")


if __name__ == "__main__":
    main()
