"""A scripted "model" that runs an N-step job through real tools, deciding each move from
the conversation it is sent — so it behaves correctly however often the daemon is killed.

Each step appends one line to log.txt with `exec` (not idempotent: a repeated step shows as a
doubled line), then completes the step in the task plan with its verification. A call whose
outcome is reported unknown is verified by reading log.txt before anything is redone.
"""

from __future__ import annotations

import json
import re
import threading
from typing import Any

from tests.fakes.anthropic_api import Reply, text, tool_use

GOAL = "write the job log"


def step_argv(k: int) -> list[str]:
    return ["python3", "-c", f"open('log.txt','a').write('step {k}\\n')"]


class ScriptedJob:
    def __init__(self, steps: int = 12, delay: float = 0.0) -> None:
        self.steps = steps
        self.delay = delay
        self.lock = threading.Lock()
        self.calls = 0
        self.unknown_seen = 0
        self.reads = 0

    def __call__(self, body: dict[str, Any]) -> Reply:
        with self.lock:
            self.calls += 1
        reply = self.decide(body["messages"])
        reply.delay = self.delay
        return reply

    def decide(self, messages: list[dict[str, Any]]) -> Reply:
        uses: dict[str, dict[str, Any]] = {}
        results: dict[str, dict[str, Any]] = {}
        order: list[str] = []
        for message in messages:
            for block in message["content"] if isinstance(message["content"], list) else []:
                if block.get("type") == "tool_use":
                    uses[block["id"]] = block
                    order.append(block["id"])
                elif block.get("type") == "tool_result":
                    results[block["tool_use_id"]] = block
        planned = False
        executed: set[int] = set()
        completed: set[int] = set()
        unverified: set[int] = set()
        finished = False
        for uid in order:
            use, result = uses[uid], results.get(uid)
            content = _content(result)
            args = use["input"]
            if use["name"] == "task":
                if args.get("action") == "plan" and result and not result.get("is_error"):
                    planned = True
                elif args.get("action") == "complete" and result and not result.get("is_error"):
                    completed.add(args["step"])
                elif args.get("action") == "finish":
                    finished = True
            elif use["name"] == "exec":
                k = int(re.search(r"step (\d+)", json.dumps(args)).group(1))
                if content.startswith("exit code 0"):
                    executed.add(k)
                elif "outcome is unknown" in content:
                    unverified.add(k)
                    self.unknown_seen += 1
            elif use["name"] == "read_file" and result:
                unverified.clear()
                executed |= {int(n) for n in re.findall(r"step (\d+)", content)}
        if finished:
            return text(f"All {self.steps} steps are done and verified: log.txt has one line per step.")
        if not planned:
            return tool_use("task", {"action": "plan", "goal": GOAL, "steps": [f"step {k}" for k in range(1, self.steps + 1)]})
        if unverified - executed:
            self.reads += 1
            return tool_use("read_file", {"path": "log.txt"})
        for k in range(1, self.steps + 1):
            if k in completed:
                continue
            if k in executed:
                return tool_use("task", {"action": "complete", "step": k, "verification": f"log.txt has 'step {k}'"})
            return tool_use("exec", {"argv": step_argv(k)})
        return tool_use("task", {"action": "finish", "status": "completed",
                                 "result": f"{self.steps} lines written; verified each in log.txt; nothing remains"})


def _content(result: dict[str, Any] | None) -> str:
    if not result:
        return ""
    content = result.get("content")
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict))
    return content or ""
