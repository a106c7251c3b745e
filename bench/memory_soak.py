"""Memory over a long life: does the daemon's RSS stay bounded by what is active?

Runs the real `clawgate gateway` and the zero-latency fake Messages API as separate processes
and drives the gateway over WebSocket, as a busy server or months of cron runs would:

1. many new sessions, one message each (`--new`, default 5,000): the RSS after the first 1,000
   and then every 1,000; the figure that matters is the growth after the first 1,000 (the
   daemon's caches fill during the first ones);
2. a soak of `--soak` messages (default 16,000) spread over 100 sessions: the RSS every 4,000;
   it grows until the histories kept in memory reach `state.records_in_memory` (12,000 records,
   about 6,000 messages here), and must be flat after (the second half).

Also prints the settled idle RSS (once the daemon has finished loading after it is listening)
and the start-up time to listening.
RSS is read from /proc (psutil). `--trace DIR` runs the daemon under tracemalloc and writes a
snapshot at each reading into DIR (compare them with `python -m bench.memory_soak --diff A B`)
— to find what holds memory, not for the figures (tracing doubles the RSS).
Usage: python bench/memory_soak.py [--new N] [--soak N] [--clients N] [--trace DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.core_bench import print_table, start_fake_model  # noqa: E402
from clawgate.gateway.client import CHAT_ONLY, GatewayClient  # noqa: E402
from tests.harness import TOKEN, DaemonProcess  # noqa: E402

# Put on the daemon's PYTHONPATH with --trace: SIGUSR2 writes a tracemalloc snapshot.
_SITECUSTOMIZE = '''
import os, signal, tracemalloc
def _dump(signum, frame):
    folder = os.environ["BENCH_TRACEMALLOC_DIR"]
    n = len([p for p in os.listdir(folder) if p.endswith(".snap")])
    import gc; gc.collect()
    tracemalloc.take_snapshot().dump(os.path.join(folder, f"{n:03d}.snap"))
    open(os.path.join(folder, f"{n:03d}.done"), "w").close()
if os.environ.get("BENCH_TRACEMALLOC_DIR"):
    tracemalloc.start(12)
    signal.signal(signal.SIGUSR2, _dump)
'''


def rss_mb(pid: int) -> float:
    return psutil.Process(pid).memory_info().rss / 1e6


def settled(pid: int, timeout: float = 60.0) -> float:
    """The idle RSS once the daemon has finished loading after its ready line (it imports the model
    SDK in a thread then: about a second, several on a busy machine): at least a second after ready,
    then until three readings half a second apart agree within 0.5 MB."""
    time.sleep(1.0)
    readings = [rss_mb(pid)]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and (len(readings) < 3 or max(readings[-3:]) - min(readings[-3:]) > 0.5):
        time.sleep(0.5)
        readings.append(rss_mb(pid))
    return readings[-1]


async def chats(url: str, sessions: list[str], clients: int) -> None:
    """One message to each session, `clients` connections at a time, each waiting for its reply."""
    queue: asyncio.Queue[str] = asyncio.Queue()
    for s in sessions:
        queue.put_nowait(s)

    async def worker() -> None:
        async with GatewayClient(url, TOKEN, events=CHAT_ONLY) as client:
            while not queue.empty():
                session = queue.get_nowait()
                reply = await client.chat(f"hello {session}", session=session)
                if reply["state"] != "final":
                    raise RuntimeError(f"session {session}: {reply}")

    await asyncio.gather(*(worker() for _ in range(clients)))


class Reader:
    """RSS readings of the daemon, and a tracemalloc snapshot beside each one with --trace."""

    def __init__(self, pid: int, trace: Path | None) -> None:
        self.pid = pid
        self.trace = trace

    def read(self) -> float:
        if self.trace is not None:
            before = len(list(self.trace.glob("*.done")))
            os.kill(self.pid, signal.SIGUSR2)
            deadline = time.monotonic() + 120
            while len(list(self.trace.glob("*.done"))) == before and time.monotonic() < deadline:
                time.sleep(0.1)
        return rss_mb(self.pid)


def run(args: argparse.Namespace) -> list[tuple[str, str, str]]:
    fake, fake_url = start_fake_model()
    rows: list[tuple[str, str, str]] = []
    try:
        with tempfile.TemporaryDirectory() as home, tempfile.TemporaryDirectory() as site:
            env = {"CLAWGATE_LOG__LEVEL": "warning", "CLAWGATE_AGENT__MAX_CONCURRENT": "16"}
            if args.trace:
                args.trace.mkdir(parents=True, exist_ok=True)
                Path(site, "sitecustomize.py").write_text(_SITECUSTOMIZE)
                env |= {"PYTHONPATH": site, "BENCH_TRACEMALLOC_DIR": str(args.trace.resolve())}
            daemon = DaemonProcess(Path(home), anthropic_url=fake_url, env=env)
            daemon.init()
            started = time.perf_counter()
            daemon.start(timeout=600)
            startup = (time.perf_counter() - started) * 1000
            assert daemon.proc is not None
            reader = Reader(daemon.proc.pid, args.trace)
            rows.append(("start-up to listening", f"{startup:.0f} ms", "< 300 ms"))
            rows.append(("RSS settled idle", f"{settled(daemon.proc.pid):.1f} MB", "<= 85 MB"))
            reader.read()
            readings: list[tuple[int, float]] = []
            step = 1000
            for first in range(0, args.new, step):
                asyncio.run(chats(daemon.url, [f"new-{i}" for i in range(first, min(args.new, first + step))],
                                  args.clients))
                readings.append((min(args.new, first + step), reader.read()))
            for done, mb in readings:
                rows.append((f"RSS after {done:,} new sessions", f"{mb:.1f} MB", ""))
            if len(readings) > 1:
                growth = readings[-1][1] - readings[0][1]
                rows.append((f"growth over the {readings[-1][0] - readings[0][0]:,} after the first {readings[0][0]:,}",
                             f"{growth:+.1f} MB", "< 8 MB"))
            sessions = [f"soak-{s}" for s in range(100)]
            soak: list[tuple[int, float]] = []
            sent = 0
            while sent < args.soak:
                for _ in range(max(1, args.every // len(sessions))):
                    asyncio.run(chats(daemon.url, sessions, args.clients))
                    sent += len(sessions)
                soak.append((sent, reader.read()))
            for done, mb in soak:
                rows.append((f"RSS after {done:,} messages in 100 sessions", f"{mb:.1f} MB", ""))
            if len(soak) > 1:
                rows.append((f"growth from {soak[0][0]:,} to {soak[-1][0]:,} messages",
                             f"{soak[-1][1] - soak[0][1]:+.1f} MB", ""))
            if len(soak) > 2:  # by the middle the histories in memory have reached state.records_in_memory
                half = soak[len(soak) // 2 - 1]
                rows.append((f"growth from {half[0]:,} to {soak[-1][0]:,} messages", f"{soak[-1][1] - half[1]:+.1f} MB",
                             "flat"))
            daemon.terminate()
    finally:
        fake.terminate()
    return rows


def diff(a: Path, b: Path, top: int) -> None:
    """The allocation sites that grew most from snapshot A to B, with their tracebacks."""
    import tracemalloc

    old, new = tracemalloc.Snapshot.load(str(a)), tracemalloc.Snapshot.load(str(b))
    stats = new.compare_to(old, "traceback")
    total = sum(s.size_diff for s in stats)
    print(f"total growth {total / 1e6:+.2f} MB")
    for stat in stats[:top]:
        print(f"\n{stat.size_diff / 1e3:+.0f} kB in {stat.count_diff:+d} blocks")
        for line in stat.traceback.format()[-16:]:
            print("  " + line)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--new", type=int, default=5000, help="new sessions, one message each")
    parser.add_argument("--soak", type=int, default=16000, help="messages spread over 100 sessions")
    parser.add_argument("--every", type=int, default=4000, help="soak messages between two readings")
    parser.add_argument("--clients", type=int, default=20, help="concurrent gateway connections")
    parser.add_argument("--trace", type=Path, help="write tracemalloc snapshots into this folder")
    parser.add_argument("--diff", type=Path, nargs=2, metavar=("OLD", "NEW"), help="compare two snapshots")
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    if args.diff:
        diff(*args.diff, args.top)
        return 0
    rows = run(args)
    print(f"clawgate memory soak (zero-latency fake model, {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.1f})")
    print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
