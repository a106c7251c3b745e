"""Shared parts of the background-job tests: a job the test releases, and a scripted model.

The job never depends on wall-clock time: it records that it ran, then waits until the test
creates `release` in the workspace, so "the second reply came while the job still ran" holds by
construction, however loaded the machine is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import psutil

from clawgate.agent.session import session_file_name
from tests.jsonl import complete_records
from tests.fakes.anthropic_api import Reply, text, tool_use

JOB = (
    "import os, time\n"
    "open('pid.txt', 'w').write(str(os.getpid()))\n"
    "open('marker.txt', 'a').write('ran\\n')\n"
    "deadline = time.time() + 120\n"
    "while not os.path.exists('release') and time.time() < deadline:\n"
    "    time.sleep(0.05)\n"
    "print('BUILD' + '-OK' if os.path.exists('release') else 'NO-RELEASE')\n"
    "open('marker.txt', 'a').write('finished\\n')\n"
)


def background_exec(**extra: Any) -> Reply:
    return tool_use("exec", {"argv": ["python3", "-c", JOB], "background": True, "timeout": 300, **extra})


def person_text(body: dict[str, Any]) -> str:
    """What started the current run: the newest user text that is not a clawgate runtime line."""
    for message in reversed(body["messages"]):
        if message["role"] != "user" or not isinstance(message["content"], list):
            continue
        for block in reversed(message["content"]):
            if block.get("type") == "text" and not block["text"].startswith("[runtime]"):
                return block["text"]
    return ""


def after_tool(body: dict[str, Any]) -> bool:
    """The request follows a tool call of this run (its last message holds a tool_result)."""
    content = body["messages"][-1]["content"]
    return isinstance(content, list) and any(b.get("type") == "tool_result" for b in content)


def last_message_text(body: dict[str, Any]) -> str:
    content = body["messages"][-1]["content"]
    return "\n".join(b.get("text", "") for b in content if b.get("type") == "text") if isinstance(content, list) else content


class Script:
    """A responder: for each person's message (matched by a phrase), a reply before and after a tool."""

    def __init__(self) -> None:
        self.routes: list[tuple[str, Callable[[dict[str, Any]], Reply], Callable[[dict[str, Any]], Reply]]] = []

    def on(self, phrase: str, first: Reply | Callable[[dict[str, Any]], Reply],
           then: Reply | Callable[[dict[str, Any]], Reply] | None = None) -> None:
        as_fn = (lambda r: r if callable(r) else (lambda body: r))
        self.routes.append((phrase, as_fn(first), as_fn(then or text("ok"))))

    def __call__(self, body: dict[str, Any]) -> Reply:
        said = person_text(body)
        for phrase, first, then in self.routes:
            if phrase in said:
                return then(body) if after_tool(body) else first(body)
        return text("ok")


def session_records(home: Path, key: str = "main") -> list[dict[str, Any]]:
    return complete_records(home / "state/sessions" / session_file_name(key))


def events_named(home: Path, name: str, key: str = "main") -> list[dict[str, Any]]:
    return [r for r in session_records(home, key) if r["kind"] == "event" and r.get("name") == name]


def job_gone(workspace: Path) -> bool:
    """The job's process (its pid written by the job) no longer runs (a zombie awaiting its reaper counts as gone)."""
    try:
        process = psutil.Process(int((workspace / "pid.txt").read_text()))
        return process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def marker(workspace: Path) -> list[str]:
    path = workspace / "marker.txt"
    return path.read_text().splitlines() if path.exists() else []
