"""What a tool is: a name, a description written for the model, typed arguments, a run.

Arguments are pydantic models, so the JSON schema the model sees and the validation of
what it sends come from one definition. Errors raised as ToolError reach the model as
structured text that says how to fix the call.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Awaitable, Callable, ClassVar

from pydantic import BaseModel, ConfigDict

from workspace.guard import WorkspaceGuard

from ..taint import Taint

if TYPE_CHECKING:
    from agent.bus import OutboundMessage


class Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ToolError(Exception):
    """A failure the model can act on: what went wrong and how to fix the call."""

    def __init__(self, problem: str, fix: str = "") -> None:
        super().__init__(problem)
        self.problem = problem
        self.fix = fix

    def render(self) -> str:
        return f"error: {self.problem}" + (f"\nfix: {self.fix}" if self.fix else "")


@dataclass
class ToolContext:
    """Where a call happens; tools read this instead of reaching for globals."""

    session_key: str
    channel: str
    chat_id: str
    sender_id: str
    run_id: str
    workspace: WorkspaceGuard
    send: Callable[["OutboundMessage"], None] | None = None
    # The run acts for the owner (config `owner`, or the gateway token holder). Guests' runs see
    # only their own data and need the owner's approval to change what steers every session.
    owner: bool = False
    # The tool_use id of the call being run (set by the registry per call): a tool whose work is
    # keyed by it (a sub-agent's transcript) finds the same work again after a restart.
    call_id: str = ""
    # Whether untrusted content entered this run (one object for the whole run, see agent/taint.py).
    taint: Taint = field(default_factory=Taint)
    # Set by the registry for the one call the owner approved: a tool may then use what the
    # approval covered (exec: writing the agent's own files, the network).
    approved: bool = False


class Tool(ABC):
    name: ClassVar[str]
    description: ClassVar[str]
    Arguments: ClassVar[type[Args]]
    # Tools with side effects are journalled durably and never re-run blindly after a crash.
    side_effects: ClassVar[bool] = False
    # Re-running a call with the same id continues its recorded work instead of repeating it (a
    # sub-agent resumes from its own log), so after a crash it is re-run rather than reported unknown.
    resumable: ClassVar[bool] = False
    # Several calls of one turn may run at the same time when every one of them says so.
    concurrent: ClassVar[bool] = False

    def needs_approval(self, args: Any, ctx: ToolContext) -> str | None | Awaitable[str | None]:
        """Return a reason when this call must be approved by the user first.

        May be a coroutine when the check must wait (a DNS lookup); the registry awaits it.
        """
        return None

    def lasting_effect(self, args: Any, ctx: ToolContext) -> str | None:
        """What this call would change beyond the run (the agent's files, memory, cron, other chats,
        a new web host, a sub-agent), if anything: in a tainted run such a call waits for the owner."""
        return None

    def summarize(self, args: Any) -> str:
        """What an approval prompt shows: complete (the prompt itself says when it has to cut)."""
        return f"{self.name} {args.model_dump_json()}"

    @abstractmethod
    async def run(self, args: Any, ctx: ToolContext) -> str:
        """Do the work; raise ToolError for failures the model should fix."""

    def definition(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "input_schema": _clean_schema(self.Arguments)}


def _clean_schema(model: type[BaseModel]) -> dict[str, Any]:
    """Pydantic's schema minus titles: fewer tokens, same meaning."""
    def strip(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: strip(v) for k, v in node.items() if k != "title"}
        if isinstance(node, list):
            return [strip(v) for v in node]
        return node

    schema = strip(model.model_json_schema())
    schema.setdefault("properties", {})
    return schema

