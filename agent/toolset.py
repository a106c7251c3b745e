"""The default tool set, assembled from settings. New tools are added here, not in the loop."""

from __future__ import annotations

from typing import Any

from config.schema import Settings

from .tools.base import Tool
from .tools.cron import CronTool
from .tools.files import EditFile, ListDir, ReadFile, WriteFile
from .tools.ledger import WrittenLedger
from .tools.message import Message
from .tools.memory import MemoryAppend, MemoryGet, MemoryReplace, MemorySearchTool
from .tools.shell import Exec
from .tools.skills import LoadSkill
from .tools.task import TaskTool
from .tools.web import WebFetch


def default_tools(settings: Settings, daemon: Any = None) -> list[Tool]:
    tools = settings.tools
    # One ledger for the three file tools: read_file trusts what write_file/edit_file wrote.
    ledger = WrittenLedger(daemon.paths.written_ledger if daemon is not None else None)
    chosen: list[Tool] = [
        ReadFile(tools.read_cap_bytes, ledger),
        WriteFile(ledger),
        EditFile(ledger),
        ListDir(),
        Exec(tools.exec),
        WebFetch(tools.web_fetch_cap_bytes),
        Message(),
        *memory_tools(daemon),
    ]
    if daemon is not None:
        chosen.append(TaskTool(daemon.tasks))
        chosen.append(CronTool(lambda: daemon.triggers.cron))  # resolved per call: triggers are built later
    return chosen


def memory_tools(daemon: Any = None) -> list[Tool]:
    """Skills and memory (issue 4); transcripts are searchable when the daemon's sessions folder is known."""
    sessions = daemon.paths.sessions if daemon is not None else None
    return [LoadSkill(), MemoryAppend(), MemoryReplace(), MemorySearchTool(sessions), MemoryGet(sessions)]
