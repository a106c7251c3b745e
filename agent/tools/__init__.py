"""Tools the agent can call. Each module holds tools of one kind; the registry runs them."""

from .base import Tool, ToolContext, ToolError
from .registry import ToolOutcome, ToolRegistry

__all__ = ["Tool", "ToolContext", "ToolError", "ToolOutcome", "ToolRegistry"]
