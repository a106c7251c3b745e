"""Shared helpers for the context / memory / consolidation tests: real parts, no sockets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from clawgate.agent.context.compaction import Compactor
from clawgate.agent.context.builder import ContextBuilder
from clawgate.agent.core.events import EventHub
from clawgate.agent.session import Session
from clawgate.agent.tools import ToolContext, ToolRegistry
from clawgate.agent.tools.sandbox import SandboxPolicy
from clawgate.agent.toolset import default_tools
from clawgate.config.schema import Settings
from clawgate.gateway.home_setup import write_workspace
from clawgate.workspace.guard import WorkspaceGuard


def workspace(tmp: Path) -> Path:
    root = tmp / "workspace"
    write_workspace(root)
    return root


def registry(sessions: Path | None = None) -> ToolRegistry:
    if sessions is None:
        return ToolRegistry(default_tools(Settings()), events=EventHub())
    from clawgate.agent.tasks.store import TaskStore

    tasks = TaskStore(sessions.parent / "tasks", fsync=False)
    # exec's sandbox protects the state folder (here: the sessions' parent) and config.toml
    sandbox = SandboxPolicy((sessions.parent, sessions.parent.parent / "config.toml"))
    return ToolRegistry(default_tools(Settings(), sessions=sessions, tasks=tasks, exec_sandbox=sandbox,
                                      written_ledger=sessions.parent / "written.json"), events=EventHub())


def builder(root: Path, *, compactor: Compactor | None = None, clock: Any = lambda: 1_750_000_000.0) -> ContextBuilder:
    return ContextBuilder(root, tools=registry().definitions, model="claude-test", max_tokens=1024,
                          compactor=compactor, clock=clock)


def tool_context(root: Path, session: str = "main", *, owner: bool = True) -> ToolContext:
    """A call on a gateway session: the token holder, i.e. the owner, unless owner=False (a guest)."""
    return ToolContext(session_key=session, channel="gateway", chat_id=session, sender_id="u1", run_id="r1",
                       workspace=WorkspaceGuard(root), owner=owner)


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
