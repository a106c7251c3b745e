"""Settings for MCP tool servers (`[mcp.servers.<name>]`), kept beside schema.py.

Why so many knobs default to "ask": an MCP server is somebody else's program. Its tools can do
anything its process can, and what it says about itself (descriptions, "read-only" hints) is
its own claim. So every call needs the owner's approval unless the owner marks the server or
single tools as safe here, guests cannot use it unless allowed, and its output is data.
"""

# No `from __future__ import annotations` here: pydantic would compile every field's annotation text at each start.

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

SERVER_NAME = re.compile(r"^[A-Za-z0-9_-]{1,32}$")


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class McpServerSettings(_Section):
    """One server: either a program clawgate starts (stdio) or a streamable-HTTP endpoint."""

    enabled: bool = True
    # stdio: the program and its arguments (no shell), extra environment, working folder
    command: str | None = Field(None, min_length=1, description="program to start (stdio transport), found on PATH")
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict, description=(
        "extra environment for the server; it inherits only HOME, LOGNAME, PATH, SHELL, TERM and USER"))
    cwd: str | None = Field(None, description="working folder of the server; default: the workspace")
    # streamable HTTP
    url: str | None = Field(None, pattern=r"^https?://", description="endpoint of a streamable-HTTP server")
    headers: dict[str, str] = Field(default_factory=dict, description="sent with every request (e.g. Authorization); never logged")
    # what the agent may use, and how
    tools: list[str] | None = Field(None, description="only these tools of the server (its own names); default: all")
    read_only_tools: list[str] = Field(default_factory=list, description=(
        "tools that only read: no approval, no durable journal, may run again after a crash; [\"*\"]: all"))
    approval: Literal["ask", "never"] = Field("ask", description=(
        "ask: every call of a tool not in read_only_tools waits for the owner's yes; never: a trusted server"))
    guests: bool = Field(False, description="guests' runs (not the owner's) may call this server's tools")
    startup_timeout_seconds: float = Field(30.0, gt=0, description="to start, hand-shake and list tools")
    call_timeout_seconds: float = Field(120.0, gt=0, description="one tool call")
    ping_interval_seconds: float = Field(10.0, gt=0, description="how often a connected server is checked for life")
    restart_base_seconds: float = Field(1.0, gt=0, description="first delay before restarting a server that died; doubles each failed try")
    restart_max_seconds: float = Field(60.0, gt=0, description="longest delay between restart tries")

    @model_validator(mode="after")
    def _one_transport(self) -> "McpServerSettings":
        if (self.command is None) == (self.url is None):
            raise ValueError("set either command (a program to start) or url (a streamable-HTTP endpoint), not both or neither")
        if self.url is not None and (self.args or self.env or self.cwd):
            raise ValueError("args, env and cwd are for a started program (command), not for a url")
        if self.command is not None and self.headers:
            raise ValueError("headers are for a url, not for a started program (pass secrets to it in env)")
        return self

    def is_read_only(self, tool: str) -> bool:
        return "*" in self.read_only_tools or tool in self.read_only_tools


class McpSettings(_Section):
    servers: dict[str, McpServerSettings] = Field(default_factory=dict)
    startup_wait_seconds: float = Field(15.0, ge=0, description=(
        "how long the daemon waits at start for servers to come up before it serves (they keep starting after)"))

    @field_validator("servers")
    @classmethod
    def _names(cls, servers: dict[str, McpServerSettings]) -> dict[str, McpServerSettings]:
        for name in servers:
            if not SERVER_NAME.match(name):
                raise ValueError(f"server name {name[:40]!r} must be 1-32 letters, digits, '_' or '-'")
        return servers
