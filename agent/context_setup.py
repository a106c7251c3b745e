"""Plug context engineering into a daemon: compaction, heartbeat task states, identity
restatement and consolidation. One call from Daemon.__init__; nothing here touches the loop."""

from __future__ import annotations

from typing import Any

from .compaction import Compactor
from .consolidation import Consolidator
from .memory import Memory
from .restatement import Restatement


def install_context(daemon: Any) -> None:
    """Needs daemon.settings, .context, .tasks, .agent, .provider, .workspace, .events."""
    agent = daemon.settings.agent
    context = daemon.context
    context.compactor = Compactor(keep=agent.compact_keep_messages,
                                  chunk_chars=int(agent.context_tokens * 4 * agent.compact_chunk_ratio))
    context.active_tasks = lambda: [task.status_line() for task in daemon.tasks.active()]
    restate = Restatement(agent.name, daemon.tasks.current, after_turns=agent.restate_after_turns)
    context.contributors.append(restate)
    context.followups.append(restate)
    daemon.memory = Memory(daemon.workspace.root)
    daemon.consolidator = Consolidator(provider=daemon.provider, context=context, memory=daemon.memory,
                                       settings=agent, events=daemon.events)
    daemon.agent.after_run.append(daemon.consolidator)
