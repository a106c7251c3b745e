"""Daemon overhead with a zero-latency fake model: latency, throughput, memory, start-up.

Runs the real `clawgate gateway` process and the fake Messages API as separate processes,
drives the gateway over WebSocket, and prints a table. Usage: python bench/core_bench.py
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

from gateway.client import GatewayClient  # noqa: E402
from tests.harness import TOKEN, DaemonProcess  # noqa: E402


def start_fake_model() -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-m", "tests.fakes.anthropic_api", "--port", "0"], cwd=ROOT,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    assert line.startswith("READY "), line
    return proc, line.split()[1]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def latency(url: str, n: int, per_session: int = 10, prefix: str = "bench-latency") -> list[float]:
    """Sequential round trips; a fresh session every `per_session` messages, since real
    sessions are kept short by consolidation and the SDK's cost grows with history."""
    out = []
    async with GatewayClient(url, TOKEN) as client:
        for i in range(n):
            started = time.perf_counter()
            await client.chat(f"ping {i}", session=f"{prefix}-{i // per_session}")
            out.append((time.perf_counter() - started) * 1000)
    return out


async def throughput(url: str, sessions: int, per_session: int) -> float:
    async def one(s: int) -> None:
        async with GatewayClient(url, TOKEN) as client:
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
            env = {"CLAWGATE_STATE__FSYNC": args.fsync, "CLAWGATE_AGENT__MAX_CONCURRENT": "16",
                   "CLAWGATE_LOG__LEVEL": "warning"}
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
            lat = asyncio.run(latency(daemon.url, 300))
            proc = psutil.Process(pid)
            cpu_before, wall_before = sum(proc.cpu_times()[:2]), time.perf_counter()
            tput = asyncio.run(throughput(daemon.url, 100, 10))
            cpu_per_msg = (sum(proc.cpu_times()[:2]) - cpu_before) / 1000 * 1000
            cpu_share = (sum(proc.cpu_times()[:2]) - cpu_before) / (time.perf_counter() - wall_before)
            sent = 300 + 1000
            while sent < args.messages:
                batch = min(2000, args.messages - sent)
                asyncio.run(throughput(daemon.url, 100, batch // 100))
                sent += batch
            loaded = rss_mb(pid)
            daemon.terminate()
    finally:
        fake.terminate()
    rows += [
        ("start-up to ready (median of 3)", f"{statistics.median(starts):.0f} ms", "< 1500 ms"),
        ("overhead per message p50", f"{pct(lat, 0.5):.1f} ms", "< 5 ms"),
        ("overhead per message p99", f"{pct(lat, 0.99):.1f} ms", ""),
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
