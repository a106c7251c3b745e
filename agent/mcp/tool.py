"""One MCP server tool as a clawgate Tool: namespaced name, passed-through schema, the same rules.

Why a Tool subclass rather than a side path: the registry then validates, asks approval, audits
and emits events for MCP calls exactly as for built-in tools, and the loop journals them (intent
before, done after; durably unless the owner marked the tool read-only).

The gate (who may call, whether approval is needed, whether the server is up) is decided once,
in `needs_approval`, and remembered on the call's arguments; `run` obeys that decision, so a
server that comes back between the two can never turn a call that skipped approval into one
that runs.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import TYPE_CHECKING, Any, Literal, Mapping, Protocol

from pydantic import BaseModel, ConfigDict, PrivateAttr

from clawgate.config.agents import agent_id_of

from ..tools.base import Tool, ToolContext, ToolError
from ..trust.untrusted import wrap_untrusted

if TYPE_CHECKING:
    from clawgate.config.mcp import McpServerSettings

NAME_MAX = 64  # the Messages API: ^[a-zA-Z0-9_-]{1,64}$
DESCRIPTION_CAP = 2000
_INVALID = re.compile(r"[^A-Za-z0-9_-]")

Gate = Literal["run", "guest", "down", "elsewhere"]


class ServerLink(Protocol):
    """What a tool needs of its server's connection (connection.py's McpConnection): the connection
    lists the tools and builds on this module, so the tool knows it only by these two calls."""

    def down_message(self) -> str:
        """Empty when calls can go through; else the one line the model gets instead of a result."""
        ...

    async def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        """The server's result for one call, or ToolError naming why not."""
        ...


class McpArgs(BaseModel):
    """Whatever the model sent: the server checks it against its own schema."""

    model_config = ConfigDict(extra="allow", defer_build=True)
    _gate: Gate = PrivateAttr("down")
    _down: str = PrivateAttr("")


def needs_task(remote: Any) -> bool:
    """True when the server accepts calls of this tool only as MCP tasks (spec 2025-11-25: tool
    `execution.taskSupport` "required"; the SDK's `Tool.execution.task_support`). "optional" and
    "forbidden" tools take a direct call, the only kind clawgate makes."""
    execution = getattr(remote, "execution", None)
    return getattr(execution, "task_support", None) == "required"


def tool_name(server: str, tool: str, taken: set[str]) -> str:
    """`mcp_<server>_<tool>` in the characters the Messages API allows, unique among `taken`.

    Too long or colliding names get a short hash of the original, so the name stays stable across
    restarts (the same server tool always maps to the same name)."""
    base = _INVALID.sub("_", f"mcp_{server}_{tool}")
    if len(base) <= NAME_MAX and base not in taken:
        return base
    digest = hashlib.sha1(f"{server}\0{tool}".encode()).hexdigest()[:8]
    return f"{base[:NAME_MAX - 9]}_{digest}"


class McpTool(Tool):
    Arguments = McpArgs

    def __init__(self, *, name: str, server: str, remote: str, description: str, schema: dict[str, Any],
                 settings: "McpServerSettings", connection: ServerLink,
                 by_agent: Mapping[str | None, ServerLink] | None = None) -> None:
        """`by_agent`: the server's process of each agent that uses it (manager.py), by the id in its session
        keys (None the default agent); a call goes to its own agent's, never another's. None: `connection`."""
        self.name = name  # type: ignore[misc]  (per instance: one class serves every server tool)
        self.server, self.remote = server, remote
        self.settings, self.connection, self.by_agent = settings, connection, by_agent
        self.read_only = settings.is_read_only(remote)
        self.side_effects = not self.read_only  # type: ignore[misc]
        text = " ".join((description or "").split())[:DESCRIPTION_CAP] or "(no description)"
        # The server wrote this description; say so, so the model weighs it as the server's claim.
        self.description = f"[MCP server '{server}', tool '{remote}'] {text}"  # type: ignore[misc]
        self.schema = schema

    def definition(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "input_schema": self.schema}

    def summarize(self, args: Any) -> str:
        return f"MCP server '{self.server}': {self.remote} {json.dumps(args.model_extra or {}, ensure_ascii=False)}"

    def link(self, ctx: ToolContext) -> ServerLink | None:
        """The server's process of the calling run's agent (None: that agent does not use this server)."""
        if self.by_agent is None:
            return self.connection
        return self.by_agent.get(agent_id_of(ctx.session_key))

    def needs_approval(self, args: Any, ctx: ToolContext) -> str | None:
        if not ctx.owner and not self.settings.guests:
            args._gate = "guest"
            return None  # refused in run: no point asking the owner about a call guests may not make
        link = self.link(ctx)
        if link is None:
            args._gate = "elsewhere"
            return None
        down = link.down_message()
        if down:
            args._gate, args._down = "down", down
            return None
        args._gate = "run"
        if self.read_only or self.settings.approval == "never":
            return None
        return (f"'{self.remote}' is a tool of the MCP server '{self.server}' (another program); it may change "
                "things outside clawgate")

    async def run(self, args: Any, ctx: ToolContext) -> str:
        if args._gate == "guest":
            raise ToolError(f"the tools of MCP server '{self.server}' are for the owner only",
                            "do this another way, or ask the owner (they can allow guests with "
                            f"mcp.servers.{self.server}.guests = true)")
        link = self.link(ctx)
        if args._gate == "elsewhere" or link is None:
            raise ToolError(f"the MCP server '{self.server}' does not run for this agent",
                            "the owner can list it in the agent's tools.mcp_servers")
        if args._gate != "run":
            raise ToolError(args._down or f"MCP server '{self.server}' is down", "try again later")
        result = await link.call(self.remote, args.model_extra or {})
        text = render_result(result)
        wrapped = wrap_untrusted(f"mcp {self.server}.{self.remote}", text)
        if getattr(result, "is_error", False):
            raise ToolError(f"the MCP tool {self.server}.{self.remote} reported an error:\n{wrapped}")
        return wrapped


def render_result(result: Any) -> str:
    """A CallToolResult as text: text blocks as they are, other blocks named, structured content as JSON
    when there is no text."""
    parts: list[str] = []
    for block in getattr(result, "content", None) or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind in ("image", "audio"):
            parts.append(f"[{kind} omitted: {getattr(block, 'mime_type', '?')}]")
        elif kind == "resource_link":
            parts.append(f"[resource link: {getattr(block, 'uri', '?')}]")
        elif kind == "resource":
            resource = block.resource
            text = getattr(resource, "text", None)
            parts.append(text if text is not None else f"[binary resource omitted: {getattr(resource, 'uri', '?')}]")
        else:
            parts.append(f"[{kind or 'unknown'} content omitted]")
    structured = getattr(result, "structured_content", None)
    if not parts and structured is not None:
        parts.append(json.dumps(structured, ensure_ascii=False))
    return "\n".join(parts) if parts else "(no output)"
