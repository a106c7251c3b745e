"""A fleet on one Redis: throughput with 1, 2 and 3 processes, intake-to-reply overhead under a slow
model (a burst, and a paced load at a few steady rates), and failover time after SIGKILL (docs/fleet.md).

Real `clawgate gateway` processes sharing one home and one real redis-server (AOF on), the fake
Messages API as a separate process, clients over the gateway WebSocket spread round-robin over the
processes (a reply made on another worker reaches its client through the fleet's relay).
The throughput rows also say where the CPU went, per message and per part (the workers, Redis, the
fake model, this script's clients; read from /proc), which bounds what two cores can do.
Usage: python bench/fleet.py [--sessions 100] [--per-session 10] [--slow-sessions 2000] [--rates 50,100,200]
                             [--kills 10] [--only throughput|overhead|paced|failover]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from clawgate.agent.fleet.keys import partition_of  # noqa: E402
from clawgate.gateway.client import CHAT_ONLY, GatewayClient  # noqa: E402
from tests.fleet_support import RedisServer  # noqa: E402
from tests.harness import TOKEN, DaemonProcess  # noqa: E402

PARTITIONS = 64


def start_fake_model(latency: float) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-m", "tests.fakes.anthropic_api", "--port", "0", "--fast",
                             "--latency", str(latency)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    assert line.startswith("READY "), line
    return proc, line.split()[1]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc; 0 where there is none)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class CpuMeter:
    """CPU used by each part of the bench between start() and stop(): why two cores give what they give."""

    def __init__(self, parts: dict[str, list[int]]) -> None:
        self.parts = parts
        self.before: dict[str, float] = {}
        self.used: dict[str, float] = {}

    def _now(self) -> dict[str, float]:
        return {name: sum(cpu_seconds(pid) for pid in pids) for name, pids in self.parts.items()}

    def start(self) -> None:
        self.before = self._now()

    def stop(self) -> None:
        self.used = {name: spent - self.before[name] for name, spent in self._now().items()}

    def per_message(self, messages: int) -> tuple[str, str]:
        """(total ms per message, the parts and the rate all cores could give at that cost)."""
        total = sum(self.used.values()) * 1000 / messages
        parts = ", ".join(f"{name} {self.used[name] * 1000 / messages:.2f}" for name in self.parts)
        ceiling = (os.cpu_count() or 1) * 1000 / total if total else float("nan")
        return f"{total:.2f} ms", f"{parts}; all {os.cpu_count()} cores busy: at most {ceiling:.0f} msg/s"


class BenchFleet:
    def __init__(self, home: Path, redis_url: str, model_url: str, lease: float, concurrent: int = 64) -> None:
        self.home, self.redis_url, self.model_url, self.lease = home, redis_url, model_url, lease
        self.concurrent = concurrent
        self.prefix = "b" + uuid.uuid4().hex[:8]
        self.procs: list[DaemonProcess] = []
        self.r = redis.Redis.from_url(redis_url, decode_responses=True)

    def add(self) -> DaemonProcess:
        name = f"w{len(self.procs)}"
        env = {"CLAWGATE_FLEET__REDIS_URL": self.redis_url, "CLAWGATE_FLEET__PREFIX": self.prefix,
               "CLAWGATE_FLEET__NODE": name, "CLAWGATE_FLEET__LEASE_SECONDS": str(self.lease),
               "CLAWGATE_FLEET__PARTITIONS": str(PARTITIONS), "CLAWGATE_AGENT__MAX_CONCURRENT": str(self.concurrent),
               "CLAWGATE_LOG__LEVEL": "warning", "CLAWGATE_STATE__FSYNC": "true"}
        proc = DaemonProcess(self.home, anthropic_url=self.model_url, env=env)
        proc.node = name  # type: ignore[attr-defined]
        if not (self.home / "config.toml").exists():
            proc.init()
        self.procs.append(proc.start())
        return proc

    def holders(self) -> dict[int, str]:
        values = self.r.mget([f"{self.prefix}:lease:p{n}" for n in range(PARTITIONS)])
        return {n: v.split("|")[0] for n, v in enumerate(values) if v}

    def settle(self, timeout: float = 120.0) -> None:
        """Until every partition is held and every live process holds some."""
        deadline = time.monotonic() + timeout
        live = {p.node for p in self.procs if p.alive()}  # type: ignore[attr-defined]
        while time.monotonic() < deadline:
            held = self.holders()
            if len(held) == PARTITIONS and set(held.values()) == live:
                return
            time.sleep(0.1)
        raise RuntimeError(f"partitions did not settle: {self.holders()}")

    def stop(self) -> None:
        for proc in self.procs:
            proc.kill()


async def throughput(urls: list[str], sessions: int, per_session: int) -> float:
    async def one(s: int) -> None:
        async with GatewayClient(urls[s % len(urls)], TOKEN, events=CHAT_ONLY, open_timeout=60) as client:
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


async def overhead(urls: list[str], sessions: int, model_latency: float) -> list[float]:
    """One message in each of `sessions` sessions at once; intake (chat.send sent) to the final reply,
    minus the model's latency, in ms. One connection per process carries its share of the sessions."""
    done: dict[str, float] = {}
    sent: dict[str, float] = {}

    async def on(url: str, mine: list[int]) -> None:
        runs: set[str] = set()  # this connection's
        async with GatewayClient(url, TOKEN, events=CHAT_ONLY, open_timeout=60) as client:
            for s in mine:
                sent_at = time.perf_counter()
                ack = await client.request("chat.send", {"session": f"slow-{s}", "text": "hi"})
                sent[ack["runId"]] = sent_at
                runs.add(ack["runId"])
            if runs <= set(done):
                return
            async for frame in client.events():
                payload = frame["payload"]
                if frame["event"] == "chat" and payload["state"] in ("final", "error") and payload["runId"] in sent:
                    done[payload["runId"]] = time.perf_counter()
                    if runs <= set(done):
                        return

    shares = [[s for s in range(sessions) if s % len(urls) == i] for i in range(len(urls))]
    try:
        await asyncio.wait_for(asyncio.gather(*(on(url, share) for url, share in zip(urls, shares))), 600)
    except asyncio.TimeoutError:
        print(f"overhead: {len(sent) - len(done)} of {len(sent)} replies never reached their client", file=sys.stderr)
    return [(done[run] - sent[run] - model_latency) * 1000 for run in sent if run in done]


async def paced(urls: list[str], sessions: int, rate: float, model_latency: float) -> tuple[list[float], int]:
    """One message in each of `sessions` sessions, sent at a steady `rate` (messages/s over the whole
    fleet, round-robin over the processes, never waiting for an answer before the next send); per
    message, the final reply's arrival minus its send minus the model's latency, in ms. Returns the
    overheads and how many replies never came."""
    sent: dict[str, float] = {}      # request id -> send time
    runs: dict[str, str] = {}        # request id -> run id (from the ack)
    done: dict[str, float] = {}      # run id -> final reply's arrival

    async def receive(ws: Any, mine: int) -> None:
        seen = 0
        async for raw in ws:
            frame = json.loads(raw)
            if frame.get("type") == "res" and frame.get("ok") and frame.get("id") in sent:
                runs[frame["id"]] = frame["payload"]["runId"]
            elif frame.get("type") == "event" and frame.get("event") == "chat":
                payload = frame["payload"]
                if payload.get("state") in ("final", "error"):
                    done[payload["runId"]] = time.perf_counter()
                    seen += 1
                    if seen == mine:
                        return

    clients = [GatewayClient(url, TOKEN, events=CHAT_ONLY, open_timeout=60) for url in urls]
    for client in clients:
        await client.__aenter__()
    try:
        shares = [len(range(i, sessions, len(urls))) for i in range(len(urls))]
        readers = [asyncio.create_task(receive(c.ws, mine)) for c, mine in zip(clients, shares)]
        started = time.perf_counter()
        for s in range(sessions):
            await asyncio.sleep(max(0.0, started + s / rate - time.perf_counter()))
            ws = clients[s % len(clients)].ws
            assert ws is not None
            rid = f"p{s}"
            sent[rid] = time.perf_counter()
            await ws.send(json.dumps({"type": "req", "id": rid, "method": "chat.send",
                                      "params": {"session": f"paced-{rate:g}-{s}", "text": "hi"}}))
        _, pending = await asyncio.wait(readers, timeout=120 + model_latency)
        for task in pending:
            task.cancel()
    finally:
        for client in clients:
            await client.__aexit__(None, None, None)
    over = [(done[runs[rid]] - at - model_latency) * 1000 for rid, at in sent.items() if runs.get(rid) in done]
    return over, sessions - len(over)


async def answered(url: str, session: str, timeout: float = 120.0) -> float:
    started = time.perf_counter()
    async with GatewayClient(url, TOKEN, events=CHAT_ONLY, open_timeout=60) as client:
        await asyncio.wait_for(client.chat("after the kill", session=session), timeout)
    return time.perf_counter() - started


def failover(fleet: BenchFleet, kills: int) -> list[float]:
    """SIGKILL the holder of a session's partition, then time a message to that session (sent at once,
    through a surviving process) until its answer; the killed process rejoins before the next round."""
    times = []
    for k in range(kills):
        session = f"failover-{k}"
        n = partition_of(session, PARTITIONS)
        holder = fleet.holders()[n]
        victim = next(p for p in fleet.procs if p.node == holder)  # type: ignore[attr-defined]
        survivor = next(p for p in fleet.procs if p is not victim and p.alive())
        killed = time.perf_counter()
        victim.kill()
        waited = asyncio.run(answered(survivor.url, session))
        times.append(time.perf_counter() - killed if waited else 0.0)
        victim.start()
        fleet.settle()
    return times


class _Done(Exception):
    """The parts asked for have run."""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--per-session", type=int, default=10)
    parser.add_argument("--slow-sessions", type=int, default=2000)
    parser.add_argument("--model-latency", type=float, default=0.3)
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--lease", type=float, default=5.0)
    parser.add_argument("--rates", default="50,100,200",
                        help="paced load: steady arrival rates to sweep, messages/s over the whole fleet")
    parser.add_argument("--only", choices=["throughput", "overhead", "paced", "failover"], help="run one part")
    args = parser.parse_args()
    want = {args.only} if args.only else {"throughput", "overhead", "paced", "failover"}
    paced_rates = [float(r) for r in args.rates.split(",") if r.strip()]
    rows: list[tuple[str, str, str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        server = RedisServer(Path(tmp) / "redis").start()
        fast, fast_url = start_fake_model(0.0)
        try:
            rates: dict[int, float] = {}
            for count in (1, 2, 3) if "throughput" in want else ():
                fleet = BenchFleet(Path(tmp) / f"home{count}", server.url, fast_url, args.lease)
                try:
                    for _ in range(count):
                        fleet.add()
                    fleet.settle()
                    urls = [p.url for p in fleet.procs]
                    asyncio.run(throughput(urls, 10, 2))  # warm-up: the SDK is imported on first use
                    meter = CpuMeter({"workers": [p.proc.pid for p in fleet.procs if p.proc],
                                      "redis": [server.proc.pid] if server.proc else [], "model": [fast.pid],
                                      "clients": [os.getpid()]})
                    meter.start()
                    rates[count] = asyncio.run(throughput(urls, args.sessions, args.per_session))
                    meter.stop()
                finally:
                    fleet.stop()
                messages = args.sessions * args.per_session
                rows.append((f"throughput, {count} process(es), {args.sessions} sessions", f"{rates[count]:.0f} msg/s",
                             "≥ 1.7x of 1 process" if count == 2 else ""))
                rows.append(("  CPU per message", *meter.per_message(messages)))
            if rates:
                rows.append(("speed-up 1 -> 2 processes", f"{rates[2] / rates[1]:.2f}x", "≥ 1.7x"))
                rows.append(("speed-up 1 -> 3 processes", f"{rates[3] / rates[1]:.2f}x", ""))
            slow, slow_url = start_fake_model(args.model_latency)
            try:
                # every session runs at once (agent.max_concurrent above the share of each process): what
                # is measured is the fleet's overhead, not the wait for a free slot
                share = args.slow_sessions // 3 + 1
                fleet = BenchFleet(Path(tmp) / "home-slow", server.url, slow_url, args.lease, concurrent=share)
                try:
                    for _ in range(3) if want & {"overhead", "paced"} else ():
                        fleet.add()
                    if fleet.procs:
                        fleet.settle()
                        urls = [p.url for p in fleet.procs]
                        asyncio.run(throughput(urls, 10, 1))  # warm-up: the SDK is imported on first use
                    if "overhead" in want:
                        over = asyncio.run(overhead(urls, args.slow_sessions, args.model_latency))
                        rows.append((f"intake-to-reply overhead p50, 3 processes, {args.slow_sessions} sessions at "
                                     f"one instant, {args.model_latency * 1000:.0f} ms model", f"{pct(over, 0.5):.0f} ms", ""))
                        rows.append(("  the same, p99", f"{pct(over, 0.99):.0f} ms", "< 50 ms"))
                    for rate in paced_rates if "paced" in want else ():
                        # every message opens a new session (costlier than the throughput rows' next message
                        # in a known one), and at a low rate nothing is batched: how busy the cores were says
                        # how close to the machine's limit a rate is
                        meter = CpuMeter({"workers": [p.proc.pid for p in fleet.procs if p.proc],
                                          "redis": [server.proc.pid] if server.proc else [], "model": [slow.pid],
                                          "clients": [os.getpid()]})
                        meter.start()
                        started = time.perf_counter()
                        over, lost = asyncio.run(paced(urls, args.slow_sessions, rate, args.model_latency))
                        meter.stop()
                        busy = sum(meter.used.values()) / (time.perf_counter() - started)
                        cost, _ = meter.per_message(args.slow_sessions)
                        rows.append((f"paced: {args.slow_sessions} sessions at {rate:g} msg/s (the bench's parts kept "
                                     f"{busy / (os.cpu_count() or 1):.0%} of the cores busy, {cost} CPU per message), "
                                     f"{args.model_latency * 1000:.0f} ms model, overhead p50 / p95 / p99",
                                     f"{pct(over, 0.5):.0f} / {pct(over, 0.95):.0f} / {pct(over, 0.99):.0f} ms",
                                     "p99 < 50 ms" + (f"; {lost} replies missing" if lost else "")))
                finally:
                    fleet.stop()
            finally:
                slow.terminate()
            if "failover" not in want:
                raise _Done
            fleet = BenchFleet(Path(tmp) / "home-failover", server.url, fast_url, args.lease)
            try:
                for _ in range(3):
                    fleet.add()
                fleet.settle()
                asyncio.run(throughput([p.url for p in fleet.procs], 10, 2))
                times = failover(fleet, args.kills)
            finally:
                fleet.stop()
            rows.append((f"failover after SIGKILL, p50 of {args.kills} (lease {args.lease:g} s)",
                         f"{statistics.median(times):.1f} s", "< lease + 5 s"))
            rows.append(("  the same, p99", f"{pct(times, 0.99):.1f} s", ""))
        except _Done:
            pass  # the parts asked for with --only have run
        finally:
            fast.terminate()
            server.kill()
    print(f"clawgate fleet bench ({os.cpu_count()} cores, one redis-server with AOF, fsync on, zero-latency fake model "
          "unless stated)")
    width = max(len(r[0]) for r in rows)
    print(f"{'':{width}}  {'measured':>12}  goal")
    for name, value, goal in rows:
        print(f"{name:{width}}  {value:>12}  {goal}")


if __name__ == "__main__":
    main()
