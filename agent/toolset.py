"""The default tool set, assembled from settings. New tools are added here, not in the loop."""

from __future__ import annotations

from typing import Any

from config.schema import Settings

from .tools.base import Tool
from .tools.cron import CronTool
from .tools.files import EditFile, ListDir, ReadFile, WriteFile
from .tools.message import Message
from .tools.memory import MemoryAppend, MemoryGet, MemoryReplace, MemorySearchTool
from .tools.sandbox import SandboxPolicy
from .tools.shell import Exec
from .tools.skills import LoadSkill
from .tools.task import TaskTool
from .tools.web import WebFetch


def default_tools(settings: Settings, daemon: Any = None) -> list[Tool]:
    tools = settings.tools
    chosen: list[Tool] = [
        ReadFile(tools.read_cap_bytes),
        WriteFile(),
        EditFile(),
        ListDir(),
        Exec(tools.exec, sandbox=exec_sandbox(settings, daemon)),
        WebFetch(tools.web_fetch_cap_bytes),
        Message(),
        *memory_tools(daemon),
    ]
    if daemon is not None:
        chosen.append(TaskTool(daemon.tasks))
        chosen.append(CronTool(lambda: daemon.triggers.cron))  # resolved per call: triggers are built later
    return chosen


def exec_sandbox(settings: Settings, daemon: Any = None) -> SandboxPolicy | None:
    """Protect the daemon's own state and config; without a daemon, Exec uses CLAWGATE_HOME's."""
    if daemon is None:
        return None
    return SandboxPolicy.for_paths(daemon.paths, settings.tools.exec.sandbox_read_paths)


def memory_tools(daemon: Any = None) -> list[Tool]:
    """Skills and memory (issue 4); transcripts are searchable when the daemon's sessions folder is known."""
    sessions = daemon.paths.sessions if daemon is not None else None
    return [LoadSkill(), MemoryAppend(), MemoryReplace(), MemorySearchTool(sessions), MemoryGet(sessions)]
