"""The default tool set, assembled from settings. New tools are added here, not in the loop."""

from __future__ import annotations

from typing import Any

from config.schema import Settings

from .tools.base import Tool
from .tools.files import EditFile, ListDir, ReadFile, WriteFile
from .tools.message import Message
from .tools.shell import Exec
from .tools.web import WebFetch


def default_tools(settings: Settings, daemon: Any = None) -> list[Tool]:
    tools = settings.tools
    return [
        ReadFile(tools.read_cap_bytes),
        WriteFile(),
        EditFile(),
        ListDir(),
        Exec(tools.exec),
        WebFetch(tools.web_fetch_cap_bytes),
        Message(),
    ]
