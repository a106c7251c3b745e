"""The default tool set, assembled from settings. New tools are added here, not in the loop.

Tools that need a part of the daemon get exactly that part: the sessions folder (transcript
search), the task store (the plan), the cron service (scheduling). Without it, the tool is left
out — unit tests and benches build a smaller set the same way.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from clawgate.config.schema import Settings

from .tools.base import Tool
from .triggers.cron_tool import CronTool
from .tools.files import EditFile, ListDir, ReadFile, WriteFile
from .tools.ledger import WrittenLedger
from .tools.memory import MemoryAppend, MemoryGet, MemoryReplace, MemorySearchTool
from .tools.message import Message
from .tools.send_file import SendFile
from .tools.sandbox import SandboxPolicy
from .tools.shell import Exec
from .tools.skills import LoadSkill
from .tasks.task_tool import TaskTool
from .tools.web import WebFetch
from .tools.web_search import WebSearch

if TYPE_CHECKING:
    from .jobs.background import BackgroundJobs
    from .tasks.store import TaskStore
    from .triggers.cron import CronService


def default_tools(settings: Settings, *, sessions: Path | None = None, tasks: "TaskStore | None" = None,
                  cron: "CronService | None" = None, written_ledger: Path | None = None,
                  exec_sandbox: SandboxPolicy | None = None, background: "BackgroundJobs | None" = None,
                  outbox_files: Path | None = None, browser_state: Path | None = None) -> list[Tool]:
    """`exec_sandbox`: what exec's sandbox protects (the daemon's state and config); without it,
    exec protects those of the CLAWGATE_HOME in the environment. `background`: where slow exec
    calls go (without it, every call runs in the foreground). `outbox_files`: where send_file keeps the
    files it queues (without it, send_file answers that files cannot be sent). `browser_state`: where the
    browser keeps logins when tools.browser.keep_logins is on (without it, none are kept)."""
    tools = settings.tools
    # One ledger for the three file tools: read_file trusts what write_file/edit_file wrote.
    ledger = WrittenLedger(written_ledger)
    chosen: list[Tool] = [
        ReadFile(tools.read_cap_bytes, ledger),
        WriteFile(ledger),
        EditFile(ledger),
        ListDir(),
        Exec(tools.exec, sandbox=exec_sandbox, background=background),
        WebFetch(tools.web_fetch_cap_bytes),
        WebSearch(tools.web_search),
        Message(),
        SendFile(outbox_files, fsync=settings.state.fsync),
        LoadSkill(), MemoryAppend(), MemoryReplace(), MemorySearchTool(sessions), MemoryGet(sessions),
    ]
    if tools.browser.enabled:  # Chromium starts on the first call, not here
        from .tools.browser import Browser

        chosen.append(Browser(tools.browser, state_folder=browser_state))
    if tasks is not None:
        chosen.append(TaskTool(tasks))
    if cron is not None:
        chosen.append(CronTool(cron))
    return chosen
