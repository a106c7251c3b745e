"""Crash recovery costs: restart-to-resume time, and what durability (fsync) costs per step.

Runs the real daemon against the fake Messages API (in this process) scripting a long task
whose every step appends a line with `exec` and records the step in the task plan.
Usage: .venv/bin/python bench/recovery_bench.py [--steps 30] [--kills 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.core_bench import print_table  # noqa: E402
from tests.fakes.anthropic_api import FakeAnthropic  # noqa: E402
from tests.harness import ALLOW_PYTHON, DaemonProcess  # noqa: E402
from tests.scripted_job import ScriptedJob  # noqa: E402


def lines(workspace: Path) -> int:
    path = workspace / "log.txt"
    return len(path.read_text().splitlines()) if path.exists() else 0


def wait(predicate, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("bench run stalled")
        time.sleep(0.001)


async def send(daemon: DaemonProcess, text: str) -> None:
    async with daemon.client() as client:
        await client.request("chat.send", {"session": "job", "text": text})


def run_job(fsync: bool, steps: int) -> float:
    """Seconds per step for a whole task, start to final answer."""
    job = ScriptedJob(steps=steps)
    with FakeAnthropic(responder=job) as fake, tempfile.TemporaryDirectory() as home:
        daemon = DaemonProcess(Path(home), anthropic_url=fake.base_url,
                               env={"CLAWGATE_STATE__FSYNC": str(fsync).lower(), "CLAWGATE_AGENT__STREAM": "false",
                                    "CLAWGATE_LOG__LEVEL": "warning", "CLAWGATE_AGENT__MAX_ITERATIONS": "500",
                                    **ALLOW_PYTHON})  # the job's steps run python3
        daemon.init()
        daemon.start()
        try:
            started = time.perf_counter()
            asyncio.run(send(daemon, "run the job"))
            wait(lambda: "steps are done and verified" in "".join(
                p.read_text() for p in (Path(home) / "state/sessions").glob("*.jsonl")))
            return (time.perf_counter() - started) / steps
        finally:
            daemon.kill()


def restart_to_resume(steps: int, kills: int) -> list[float]:
    """SIGKILL mid-task, restart, and time until the task makes its next step."""
    job = ScriptedJob(steps=steps)
    out: list[float] = []
    with FakeAnthropic(responder=job) as fake, tempfile.TemporaryDirectory() as home:
        daemon = DaemonProcess(Path(home), anthropic_url=fake.base_url,
                               env={"CLAWGATE_AGENT__STREAM": "false", "CLAWGATE_LOG__LEVEL": "warning",
                                    "CLAWGATE_AGENT__MAX_ITERATIONS": "500", **ALLOW_PYTHON})
        daemon.init()
        daemon.start()
        asyncio.run(send(daemon, "run the job"))
        try:
            for k in range(kills):
                target = (k + 1) * steps // (kills + 1)
                wait(lambda: lines(daemon.workspace) >= target)
                daemon.kill()
                before = lines(daemon.workspace)
                calls_before = job.calls
                started = time.perf_counter()
                daemon.start()
                ready = time.perf_counter()
                wait(lambda: job.calls > calls_before or lines(daemon.workspace) > before)
                out.append((time.perf_counter() - started, ready - started))
        finally:
            daemon.kill()
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--kills", type=int, default=5)
    args = parser.parse_args()
    resumes = restart_to_resume(args.steps, args.kills)
    durable = run_job(True, args.steps)
    loose = run_job(False, args.steps)
    rows = [
        (f"restart to resumed work, median of {len(resumes)} SIGKILLs", f"{statistics.median(r[0] for r in resumes) * 1000:.0f} ms", "< 2000 ms"),
        ("  of which process start to ready", f"{statistics.median(r[1] for r in resumes) * 1000:.0f} ms", ""),
        (f"time per task step, fsync on ({args.steps} steps)", f"{durable * 1000:.1f} ms", ""),
        ("time per task step, fsync off", f"{loose * 1000:.1f} ms", ""),
        ("cost of durability per step", f"{(durable - loose) * 1000:.1f} ms", ""),
    ]
    print("clawgate recovery bench (each step: a model call, exec, a model call, a task-state write)")
    print_table(rows, cell=10)


if __name__ == "__main__":
    main()
