"""Per-message overhead with ten agents configured against one (docs/performance.md, "Several agents").

Three daemons, one after the other, on the same zero-latency fake model: one with a single
`[agents.a0]`; two with `[agents.a0]` … `[agents.a9]` (each its own workspace and model) and a
binding per extra agent, one sent every message for the default agent, one every message for `a9`
(named by the client, as `chat.send` takes `agent`). Each is driven over its WebSocket like
core_bench.py: sequential round trips spread over 20 sessions (so no history grows long), then 50
sessions × 10 messages at once. The daemon's CPU time per message (all threads, from /proc) is the
overhead figure; the wall round trips are beside it. The sides run in turn, round after round, and
each cell is the median of the rounds with their range beside it, so a burst of other work on the
machine does not land on one side only and the noise is in view.
Usage: python bench/agents_bench.py [--messages N] [--rounds R]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.core_bench import pct, start_fake_model  # noqa: E402
from clawgate.gateway.client import CHAT_ONLY, GatewayClient  # noqa: E402
from tests.harness import TOKEN, DaemonProcess  # noqa: E402

SESSIONS = 20
TARGET = 1.10  # ten agents' overhead per message within 10 % of one agent's


def agents_config(count: int) -> str:
    """`count` agents (a0 the default), each with a model of its own; a binding per agent past the first."""
    lines = ['[agents.a0]', 'default = true']
    for n in range(1, count):
        lines += [f'[agents.a{n}]', f'model = "claude-bench-{n}"']
    for n in range(1, count):
        lines += ['[[bindings]]', f'agent = "a{n}"', f'match = {{ channel = "telegram", peer = "{1000 + n}" }}']
    return "\n" + "\n".join(lines) + "\n"


async def sequential(url: str, pid: int, n: int, agents: list[str | None]) -> tuple[list[float], list[float]]:
    """n round trips one after the other over SESSIONS sessions, the agents taken in turn: wall ms and
    daemon CPU ms of each."""
    proc = psutil.Process(pid)
    walls, cpus = [], []
    async with GatewayClient(url, TOKEN, events=CHAT_ONLY) as client:
        for i in range(n):
            agent = agents[i % len(agents)]
            cpu = sum(proc.cpu_times()[:2])
            started = time.perf_counter()
            await client.chat(f"ping {i}", session=f"bench-{i % SESSIONS}", agent=agent)
            walls.append((time.perf_counter() - started) * 1000)
            cpus.append((sum(proc.cpu_times()[:2]) - cpu) * 1000)
    return walls, cpus


async def concurrent(url: str, sessions: int, per_session: int, agents: list[str | None]) -> float:
    async def one(s: int) -> None:
        agent = agents[s % len(agents)]
        async with GatewayClient(url, TOKEN, events=CHAT_ONLY) as client:
            for m in range(per_session):
                await client.request("chat.send", {"session": f"load-{s}", "text": f"m{m}",
                                                   **({"agent": agent} if agent else {})})
            finals = 0
            async for frame in client.events():
                if frame["event"] == "chat" and frame["payload"]["state"] in ("final", "error"):
                    finals += 1
                    if finals == per_session:
                        return

    started = time.perf_counter()
    await asyncio.gather(*(one(s) for s in range(sessions)))
    return sessions * per_session / (time.perf_counter() - started)


def measure(fake_url: str, count: int, agent: str | None, messages: int) -> dict[str, float]:
    """One daemon with `count` agents, every message to `agent` (None: the default): its figures."""
    with tempfile.TemporaryDirectory() as home:
        env = {"CLAWGATE_AGENT__MAX_CONCURRENT": "16", "CLAWGATE_LOG__LEVEL": "warning"}
        daemon = DaemonProcess(Path(home), anthropic_url=fake_url, env=env)
        daemon.init()
        with (Path(home) / "config.toml").open("a", encoding="utf-8") as out:
            out.write(agents_config(count))
        daemon.start()
        try:
            assert daemon.proc is not None
            pid = daemon.proc.pid
            asyncio.run(sequential(daemon.url, pid, 2 * SESSIONS, [agent]))  # warm: imports, each session's first run
            walls, cpus = asyncio.run(sequential(daemon.url, pid, messages, [agent]))
            proc = psutil.Process(pid)
            cpu_before = sum(proc.cpu_times()[:2])
            rate = asyncio.run(concurrent(daemon.url, 50, 10, [agent]))
            cpu_load = (sum(proc.cpu_times()[:2]) - cpu_before) * 1000 / 500
        finally:
            daemon.terminate()
    return {"p50": pct(walls, 0.5), "p99": pct(walls, 0.99), "cpu": statistics.mean(cpus),
            "cpu_load": cpu_load, "rate": rate}


SIDES = {"1 agent": (1, None), "10 agents, to the default": (10, None), "10 agents, to a9": (10, "a9")}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=400, help="sequential round trips per daemon and round")
    parser.add_argument("--rounds", type=int, default=2, help="times each side is run, in turn")
    args = parser.parse_args()
    fake, fake_url = start_fake_model()
    runs: dict[str, list[dict[str, float]]] = {side: [] for side in SIDES}
    try:
        for _ in range(args.rounds):
            for side, (count, agent) in SIDES.items():
                runs[side].append(measure(fake_url, count, agent, args.messages))
    finally:
        fake.terminate()

    def median(side: str, key: str) -> float:
        return statistics.median(run[key] for run in runs[side])

    def spread(side: str, key: str) -> str:
        values = [run[key] for run in runs[side]]
        return f"{min(values):.2f}-{max(values):.2f}"

    sides = list(SIDES)
    print(f"clawgate agents bench: 1 agent against 10 configured ({args.messages} sequential messages over "
          f"{SESSIONS} sessions, then 50 sessions x 10 at once; {args.rounds} rounds, the sides in turn; "
          "zero-latency fake model). Each cell: the median of the rounds (lowest-highest); cost: the worse "
          "10-agent side's median over the 1-agent side's")
    width = 44
    print(f"| {'measure':{width}} | " + " | ".join(f"{side:>28}" for side in sides) + f" | {'cost':>5} | {'target':>7} |")
    print(f"|{'-' * (width + 2)}|" + "|".join("-" * 30 for _ in sides) + f"|{'-' * 7}|{'-' * 9}|")
    for key, label, unit, high in (("cpu", "daemon CPU per message, sequential", "ms", False),
                                   ("p50", "round trip p50, sequential", "ms", False),
                                   ("p99", "round trip p99, sequential", "ms", False),
                                   ("cpu_load", "daemon CPU per message, 50 sessions at once", "ms", False),
                                   ("rate", "throughput, 50 sessions at once", "msg/s", True)):
        values = [median(side, key) for side in sides]
        one, tens = values[0], values[1:]
        cost = (one / min(tens)) if high else (max(tens) / one)
        target = f"<= {TARGET:.2f}" if key in ("cpu", "cpu_load") else ""
        cells = [f"{v:.2f} {unit} ({spread(side, key)})" for v, side in zip(values, sides)]
        print(f"| {label:{width}} | " + " | ".join(f"{c:>28}" for c in cells) + f" | {cost:>5.2f} | {target:>7} |")


if __name__ == "__main__":
    main()
