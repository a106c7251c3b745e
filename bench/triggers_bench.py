"""Triggers: what an idle heartbeat costs, and how punctual cron jobs are.

Runs the real `clawgate gateway` process against the in-process fake Messages API and
prints a table:

- heartbeat, idle (template HEARTBEAT.md, no in-progress task): model requests and tokens
  over many fast ticks, extrapolated to a day at the default 300 s interval (goal: 0);
- heartbeat, one in-progress task that stops moving (the model only answers HEARTBEAT_OK):
  requests and tokens per day — bounded by heartbeat.max_beats_without_progress;
- cron start delay: `at` jobs spread over a few seconds; delay = publish time - due time,
  as measured by the daemon (goal: p99 < 1 s).

Usage: python bench/triggers_bench.py [--seconds 6] [--jobs 60]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from clawgate.gateway.client import GatewayClient  # noqa: E402
from tests.fakes.anthropic_api import FakeAnthropic, text, tool_use  # noqa: E402
from tests.harness import DaemonProcess  # noqa: E402

DAY = 86_400
DEFAULT_INTERVAL = 300


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def frames_for(client: GatewayClient, seconds: float) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    async def scan() -> None:
        async for frame in client.events():
            out.append(frame)
    try:
        await asyncio.wait_for(scan(), seconds)
    except asyncio.TimeoutError:
        pass
    return out


def tokens(frames: list[dict[str, Any]], run_prefix: str) -> int:
    total = 0
    for f in frames:
        p = f["payload"]
        if f["event"] == "agent" and p.get("stream") == "turn_end" and str(p.get("runId", "")).startswith(run_prefix):
            usage = p.get("usage") or {}
            total += sum(int(usage.get(k) or 0) for k in ("input_tokens", "output_tokens",
                                                          "cache_creation_input_tokens", "cache_read_input_tokens"))
    return total


async def heartbeat(seconds: float, interval: float, stalled_task: bool) -> dict[str, float]:
    with FakeAnthropic() as fake, tempfile.TemporaryDirectory() as home:
        env = {"CLAWGATE_HEARTBEAT__INTERVAL_SECONDS": str(interval), "CLAWGATE_HEARTBEAT__MODEL": "bench-heartbeat",
               "CLAWGATE_LOG__LEVEL": "warning"}
        daemon = DaemonProcess(Path(home), anthropic_url=fake.base_url, env=env)
        daemon.init()
        daemon.start()
        try:
            async with daemon.client(subscribe="*") as client:
                if stalled_task:
                    fake.enqueue_for("write the report", tool_use("task", {"action": "plan", "goal": "Write the report",
                                                                           "steps": ["outline", "draft"]}), text("Planned."))
                    fake.responder = lambda body: text("HEARTBEAT_OK")
                    await client.chat("please write the report", session="work")
                frames = await frames_for(client, seconds)
        finally:
            daemon.terminate()
    ticks = sum(1 for f in frames if f["event"] == "heartbeat" and "status" in f["payload"]
                and f["payload"]["status"] in ("idle", "active", "skipped"))
    requests = sum(1 for r in fake.requests if r["model"] == "bench-heartbeat")
    used = tokens(frames, "hb:")
    per_day_ticks = DAY / DEFAULT_INTERVAL
    return {"ticks": ticks, "requests": requests, "tokens": used,
            # idle: the per-tick rate scaled to a day; stalled: the guard makes it a fixed number
            "requests_day": requests if stalled_task else requests / max(ticks, 1) * per_day_ticks,
            "tokens_day": used if stalled_task else used / max(ticks, 1) * per_day_ticks}


async def cron_delay(jobs: int) -> list[float]:
    with FakeAnthropic() as fake, tempfile.TemporaryDirectory() as home:
        daemon = DaemonProcess(Path(home), anthropic_url=fake.base_url,
                               env={"CLAWGATE_LOG__LEVEL": "warning", "CLAWGATE_HEARTBEAT__ENABLED": "false"})
        daemon.init()
        daemon.start()
        try:
            async with daemon.client(subscribe="*") as client:
                first = time.time() + 2.0
                for i in range(jobs):
                    await client.request("cron.add", {"message": f"job {i}", "at": first + i * 0.07,
                                                      "deliver": "none"})
                late: list[float] = []

                async def scan() -> None:
                    async for f in client.events():
                        if f["event"] == "cron" and f["payload"]["action"] == "run_start":
                            late.append(f["payload"]["lateMs"])
                            if len(late) == jobs:
                                return
                await asyncio.wait_for(scan(), 2.0 + jobs * 0.07 + 30)
        finally:
            daemon.terminate()
    return late


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=6.0, help="how long each heartbeat scenario runs")
    parser.add_argument("--interval", type=float, default=0.05, help="heartbeat interval while measuring")
    parser.add_argument("--jobs", type=int, default=60, help="cron jobs for the start-delay measure")
    args = parser.parse_args()

    idle = await heartbeat(args.seconds, args.interval, stalled_task=False)
    stalled = await heartbeat(args.seconds, args.interval, stalled_task=True)
    late = await cron_delay(args.jobs)

    rows = [
        ("heartbeat idle: ticks observed", f"{idle['ticks']:.0f}", f"interval {args.interval}s for {args.seconds}s"),
        ("heartbeat idle: model requests", f"{idle['requests']:.0f}", ""),
        ("heartbeat idle: requests per day", f"{idle['requests_day']:.1f}", f"at {DEFAULT_INTERVAL}s; goal 0"),
        ("heartbeat idle: tokens per day", f"{idle['tokens_day']:.0f}", "goal 0"),
        ("heartbeat stalled task: ticks observed", f"{stalled['ticks']:.0f}", ""),
        ("heartbeat stalled task: requests per day", f"{stalled['requests_day']:.0f}",
         "3 beats (max_beats_without_progress), then none until the task moves"),
        ("heartbeat stalled task: tokens per day", f"{stalled['tokens_day']:.0f}", "fake-model token estimate"),
        ("cron start delay p50 (ms)", f"{statistics.median(late):.1f}", f"{len(late)} jobs"),
        ("cron start delay p99 (ms)", f"{pct(late, 0.99):.1f}", "goal < 1000"),
        ("cron start delay max (ms)", f"{max(late):.1f}", ""),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"{'measure':{width}}  {'value':>10}  note")
    print("-" * (width + 40))
    for name, value, note in rows:
        print(f"{name:{width}}  {value:>10}  {note}")


if __name__ == "__main__":
    asyncio.run(main())
