"""The browser: time per action, and what it costs the daemon in memory.

1. Time per action: the `browser` tool (real Chromium, through its registry) against a form page served
   on 127.0.0.1: first navigate (Chromium start included), then navigate / snapshot / type / click, median.
2. RSS: a real `clawgate gateway` against the fake Messages API — before any browser use (the browser
   closed: no Playwright or Chromium in the process; goal: the same as without the tool), then after one
   navigate + snapshot (the daemon's own RSS, and Chromium's process tree beside it).

Usage: python bench/browser_bench.py [--rounds 10]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from clawgate.agent.approvals import ApprovalBroker  # noqa: E402
from clawgate.agent.core.events import EventHub  # noqa: E402
from clawgate.agent.tools import ToolContext, ToolRegistry  # noqa: E402
from clawgate.agent.tools.browser import Browser  # noqa: E402
from clawgate.config.web_tools import BrowserSettings  # noqa: E402
from clawgate.workspace.guard import WorkspaceGuard  # noqa: E402
from tests.fakes.anthropic_api import FakeAnthropic, text, tool_use  # noqa: E402
from tests.fakes.loopback import html, web_page  # noqa: E402
from tests.harness import DaemonProcess  # noqa: E402

FORM = "<title>Form</title><form action=/done><label>Name <input name=n></label><button>Go</button></form>"


def mb(process: psutil.Process, tree: bool = False) -> float:
    processes = [process, *(process.children(recursive=True) if tree else [])]
    return sum(p.memory_info().rss for p in processes if p.is_running()) / 1e6


async def action_times(port: int, rounds: int, home: Path) -> dict[str, list[float]]:
    tool = Browser(BrowserSettings(allowed_private_hosts=["127.0.0.1"]))
    registry = ToolRegistry([tool], events=EventHub(), approvals=ApprovalBroker(EventHub(), mode="deny"))
    ctx = ToolContext(session_key="b", channel="bench", chat_id="b", sender_id="o", run_id="r",
                      workspace=WorkspaceGuard(home / "ws"), owner=True)
    times: dict[str, list[float]] = {"first navigate (starts Chromium)": [], "navigate": [], "snapshot": [],
                                     "type": [], "click (submits)": []}

    async def timed(name: str, **args: object) -> str:
        started = time.perf_counter()
        out = await registry.execute({"id": "1", "name": "browser", "input": args}, ctx)
        times[name].append((time.perf_counter() - started) * 1000)
        assert not out.is_error, out.content
        return out.content

    try:
        await timed("first navigate (starts Chromium)", action="navigate", url=f"http://127.0.0.1:{port}/")
        for _ in range(rounds):
            await timed("navigate", action="navigate", url=f"http://127.0.0.1:{port}/")
            snap = await timed("snapshot", action="snapshot")
            box = snap.split('textbox "Name" [ref=')[1].split("]")[0]
            button = snap.split('button "Go" [ref=')[1].split("]")[0]
            await timed("type", action="type", ref=box, text="bench")
            await timed("click (submits)", action="click", ref=button)
    finally:
        await tool.host.close()
    return times


async def daemon_rss(port: int, home: Path) -> tuple[float, float, float]:
    with FakeAnthropic() as model:
        return await _measure(model, port, home)


async def _measure(model: FakeAnthropic, port: int, home: Path) -> tuple[float, float, float]:
    daemon = DaemonProcess(home / "home", anthropic_url=model.base_url,
                           env={"CLAWGATE_TOOLS__BROWSER__ALLOWED_PRIVATE_HOSTS": json.dumps(["127.0.0.1"])})
    daemon.init()
    daemon.start()
    try:
        process = psutil.Process(daemon.proc.pid)  # type: ignore[union-attr]
        async with daemon.client(subscribe=["main"]) as client:
            model.enqueue(text("hello"))
            await client.chat("hi")
            closed = mb(process)
            model.enqueue(tool_use("browser", {"action": "navigate", "url": f"http://127.0.0.1:{port}/"}),
                          tool_use("browser", {"action": "snapshot"}), text("done"))
            await client.chat("open the page")
        idle, with_chromium = mb(process), mb(process, tree=True)
    finally:
        daemon.kill()
    return closed, idle, with_chromium


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, web_page(lambda path, port: html(FORM)) as (port, _):
        times = asyncio.run(action_times(port, args.rounds, Path(tmp)))
        closed, idle, tree = asyncio.run(daemon_rss(port, Path(tmp)))
    print(f"{'measure':40} {'value':>12}")
    for name, values in times.items():
        print(f"{name:40} {statistics.median(values):>9.0f} ms")
    print(f"{'daemon RSS, browser never used':40} {closed:>9.0f} MB")
    print(f"{'daemon RSS, browser idle':40} {idle:>9.0f} MB")
    print(f"{'daemon + Chromium, browser idle':40} {tree:>9.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
