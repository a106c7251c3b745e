"""Shared helpers for the context / memory / consolidation tests: real parts, no sockets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agent.compaction import Compactor
from agent.context import ContextBuilder
from agent.events import EventHub
from agent.session import Session
from agent.tools import ToolContext, ToolRegistry
from agent.toolset import default_tools
from config.schema import Settings
from gateway.init import write_workspace
from workspace.guard import WorkspaceGuard


def workspace(tmp: Path) -> Path:
    root = tmp / "workspace"
    write_workspace(root)
    return root


def registry(sessions: Path | None = None) -> ToolRegistry:
    class _Daemon:  # what default_tools reads from a daemon
        class paths:
            pass

    daemon = None
    if sessions is not None:
        daemon = _Daemon()
        daemon.paths.sessions = sessions
        daemon.paths.state = sessions.parent  # exec's sandbox protects state/ and config.toml
        daemon.paths.config_file = sessions.parent.parent / "config.toml"
        from agent.tasks import TaskStore
        daemon.tasks = TaskStore(sessions.parent / "tasks", fsync=False)
    return ToolRegistry(default_tools(Settings(), daemon), events=EventHub())


def builder(root: Path, *, compactor: Compactor | None = None, clock: Any = lambda: 1_750_000_000.0) -> ContextBuilder:
    return ContextBuilder(root, tools=registry().definitions, model="claude-test", max_tokens=1024,
                          compactor=compactor, clock=clock)


def tool_context(root: Path, session: str = "main") -> ToolContext:
    return ToolContext(session_key=session, channel="gateway", chat_id=session, sender_id="u1", run_id="r1",
                       workspace=WorkspaceGuard(root))


def user(session: Session, text: str, ctx: ContextBuilder | None = None) -> None:
    context = ctx.runtime_block(session, channel="gateway", chat_id=session.key) if ctx else f"[runtime] {text[:10]}"
    session.append("user", text=text, inbound_id=f"in{session.seq}", channel="gateway", chat_id=session.key,
                   sender_id="u1", context=context)


def tool_round(session: Session, name: str, args: dict[str, Any], output: str) -> str:
    call_id = f"toolu_{session.seq:06d}"
    session.append("assistant", content=[{"type": "tool_use", "id": call_id, "name": name, "input": args}])
    session.append("tool_results", results=[{"tool_use_id": call_id, "content": output, "is_error": False}])
    return call_id


def answer(session: Session, text: str) -> None:
    session.append("assistant", content=[{"type": "text", "text": text}])


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
