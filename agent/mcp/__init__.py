"""MCP tool servers (docs/mcp.md): connections, their tools in the registry, restarts."""

from .manager import McpManager

__all__ = ["McpManager"]
