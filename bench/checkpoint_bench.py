"""Checkpoint bench: cost per step on a 1,000-file workspace, restore at step 1,000, disk per 1,000 steps.

In-process on real files (the same CheckpointService the daemon wires), playing the records a
run appends: 100 tasks of 10 steps, each step writes one workspace file and completes the step
(a step checkpoint with a workspace snapshot). Before each step the run makes two more model
turns, as drift control's turn checkpoints (`checkpoints.every_turns` = 1) see them: a read that
changes nothing, and a command that changes one file (its changes recorded for replay).
Prints a table:

1. checkpoint cost per step: the extra time the step-boundary append takes (snapshot + JSON),
   median and p95, fsync on and off; the same for a turn checkpoint after the read, and for the
   command's turn (the two snapshots around the command plus its turn checkpoint);
2. restore (conversation and files) of the checkpoint at step 1,000 from step 1,010, and of
   the one at step 500 (more files to write back);
3. disk used by checkpoints per 1,000 steps (the workspace's own first copy not counted).

    .venv/bin/python bench/checkpoint_bench.py [--files 1000] [--steps 1000] [--dir FOLDER]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from clawgate.agent.checkpoints import CheckpointService  # noqa: E402
from clawgate.agent.core.events import EventHub  # noqa: E402
from clawgate.agent.session import SessionManager  # noqa: E402
from clawgate.agent.tasks.store import Step, Task, TaskStore  # noqa: E402
from clawgate.config.schema import CheckpointSettings  # noqa: E402


def _du(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def _turn(session: Any, call: str, name: str, args: dict[str, Any], effect: Callable[[], Any] | None) -> float:
    """One model turn with one tool call; the time of the appends that take checkpoints or snapshots
    (the intent and result of a command, the tool results), in ms."""
    session.append("assistant", content=[{"type": "tool_use", "id": call, "name": name, "input": args}])
    started = time.perf_counter()
    session.append("tool_intent", id=call, name=name, input=args)
    spent = time.perf_counter() - started
    if effect is not None:
        effect()
    started = time.perf_counter()
    session.append("tool_done", id=call, content="ok", is_error=False, status="ok")
    session.append("tool_results", results=[{"tool_use_id": call, "content": "ok"}])
    return (spent + time.perf_counter() - started) * 1000


def run(files: int, steps: int, fsync: bool, where: str | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(dir=where) as tmp:
        home = Path(tmp)
        ws = home / "workspace"
        for i in range(files):
            path = ws / f"dir{i % 20}" / f"file{i}.txt"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"file {i}\n" + "x" * 1000)
        sessions = SessionManager(home / "state/sessions", fsync=fsync)
        tasks = TaskStore(home / "state/tasks", fsync=False)
        service = CheckpointService(folder=home / "state/checkpoints", workspace=ws, sessions=sessions, tasks=tasks,
                                    events=EventHub(), settings=CheckpointSettings(every_events=50, keep_count=100_000),
                                    version="bench", busy=lambda k: False, invalidate=lambda k: None, fsync=fsync)
        sessions.observers += [service.tapes.on_append, service.on_append]
        session = sessions.get("bench")
        session.append("user", text="work through the tasks", inbound_id="in1", channel="bench", chat_id="1")
        baseline = _du(home / "state/checkpoints")
        costs: list[float] = []
        cpu_costs: list[float] = []
        plain: list[float] = []
        read_costs: list[float] = []
        exec_costs: list[float] = []
        step_ids: dict[int, str] = {}
        task: Task | None = None
        n = 0
        for n in range(1, steps + 11):
            k = (n - 1) % 10
            if k == 0:
                task = Task(goal=f"batch {n // 10}", session_key="bench", status="in_progress",
                            steps=[Step(text=f"edit file {n + j}") for j in range(10)])
                tasks.save(task)
            assert task is not None
            read_costs.append(_turn(session, f"toolu_r{n}", "read_file", {"path": "dir0/file0.txt"}, None))
            target = ws / f"dir{(n + 7) % 20}" / f"file{(n * 7) % files}.txt"
            exec_costs.append(_turn(session, f"toolu_x{n}", "exec", {"argv": ["touch", str(target)]},
                                    lambda: target.write_text(f"command {n}\n" + "z" * 1000)))
            call = f"toolu_{n}"
            args = {"action": "complete", "step": k + 1, "verification": "read back"}
            session.append("assistant", content=[{"type": "tool_use", "id": call, "name": "task", "input": args}])
            session.append("tool_intent", id=call, name="task", input=args)
            (ws / f"dir{n % 20}" / f"file{n % files}.txt").write_text(f"step {n}\n" + "y" * 1000)
            task.steps[k].status, task.steps[k].verification = "done", "read back"
            tasks.save(task)
            session.append("tool_done", id=call, content="done", is_error=False, status="ok")
            started, cpu = time.perf_counter(), time.process_time()
            session.append("tool_results", results=[{"tool_use_id": call, "content": "done"}])
            elapsed, cpu_ms = (time.perf_counter() - started) * 1000, (time.process_time() - cpu) * 1000
            if n <= steps:
                costs.append(elapsed)
                cpu_costs.append(cpu_ms)
            started = time.perf_counter()
            session.append("event", name="bench_baseline")  # an append that takes no checkpoint
            plain.append((time.perf_counter() - started) * 1000)
            step_ids[n] = service.store.head("bench") or ""
        disk = _du(home / "state/checkpoints") - baseline
        log_size = (home / "state/sessions/bench.jsonl").stat().st_size
        timings = {}
        for at in (steps, steps // 2):
            started, cpu = time.perf_counter(), time.process_time()
            result = service.restore(step_ids[at], "both", confirm=True)
            timings[at] = ((time.perf_counter() - started) * 1000, len(result["files"]["written"]),
                           (time.process_time() - cpu) * 1000)
            # back to the end for the next measurement (restoring the newest one the same way)
            service.restore(step_ids[steps + 10], "both", confirm=True)
        base = statistics.median(plain)
        # the three appends of a turn, less what three appends that take nothing cost
        return {"read": statistics.median(read_costs) - 3 * base, "exec": statistics.median(exec_costs) - 3 * base,
                "median": statistics.median(costs) - base, "cpu": statistics.median(cpu_costs), "p95": sorted(costs)[int(len(costs) * 0.95)] - base,
                "restore": timings, "disk": disk * 1000 / steps, "log": log_size, "count": len(service.store.all())}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--dir", help="where the temporary home goes (default: the system's temp folder)")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    print(f"checkpoints: {args.files}-file workspace, {args.steps} steps ({os.cpu_count()} cores, load {load:.1f})")
    print(f"{'measure':58} {'fsync on':>12} {'fsync off':>12}")
    results = {fs: run(args.files, args.steps, fs, args.dir) for fs in (True, False)}
    on, off = results[True], results[False]
    print(f"{'checkpoint cost per step, median (goal < 20 ms)':58} {on['median']:>9.2f} ms {off['median']:>9.2f} ms")
    print(f"{'checkpoint cost per step, p95':58} {on['p95']:>9.2f} ms {off['p95']:>9.2f} ms")
    print(f"{'checkpoint CPU time per step, median':58} {on['cpu']:>9.2f} ms {off['cpu']:>9.2f} ms")
    print(f"{'turn checkpoint after a read (nothing changed), median':58} {on['read']:>9.2f} ms {off['read']:>9.2f} ms")
    print(f"{'command turn (2 snapshots + record + turn checkpoint), median':58} {on['exec']:>9.2f} ms "
          f"{off['exec']:>9.2f} ms")
    for at in (args.steps, args.steps // 2):
        label = f"restore step {at} from step {args.steps + 10}, conversation + files"
        print(f"{label:58} {on['restore'][at][0]:>9.1f} ms {off['restore'][at][0]:>9.1f} ms"
              f"   ({on['restore'][at][1]} files written back)")
        print(f"{'  of which CPU time':58} {on['restore'][at][2]:>9.1f} ms {off['restore'][at][2]:>9.1f} ms")
    print(f"{'disk per 1,000 steps (checkpoints + new blobs + trees)':58} {on['disk'] / 1e6:>9.2f} MB "
          f"{off['disk'] / 1e6:>9.2f} MB")
    print(f"{'session log for the same run (for scale)':58} {on['log'] / 1e6:>9.2f} MB {off['log'] / 1e6:>9.2f} MB")


if __name__ == "__main__":
    main()
