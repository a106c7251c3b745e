"""What a tool is: a name, a description written for the model, typed arguments, a run.

Arguments are pydantic models, so the JSON schema the model sees and the validation of
what it sends come from one definition. Errors raised as ToolError reach the model as
structured text that says how to fix the call.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Callable, ClassVar, Literal

from pydantic import BaseModel, ConfigDict

from clawgate.workspace.guard import WorkspaceGuard

from ..trust.taint import Taint

if TYPE_CHECKING:
    from clawgate.agent.bus import OutboundMessage


class Args(BaseModel):
    # Each tool's arguments are built after the ready line (gateway/runtime.py) or at their first use,
    # not at import: with the gateway methods' parameters, ~40 models and about a tenth of a start.
    model_config = ConfigDict(extra="forbid", defer_build=True)


class ToolError(Exception):
    """A failure the model can act on: what went wrong and how to fix the call."""

    def __init__(self, problem: str, fix: str = "") -> None:
        super().__init__(problem)
        self.problem = problem
        self.fix = fix

    def render(self) -> str:
        return f"error: {self.problem}" + (f"\nfix: {self.fix}" if self.fix else "")


# How a call cut by a crash (its intent saved, its result not) is resolved when the daemon restarts:
#   "rerun"   — safe to run again: it only reads, or repeating it continues recorded work (spawn);
#   "check"   — the tool compares the world with what the call meant (`Tool.check`) and the call is run
#               again only when its effect is missing (write_file, edit_file);
#   "unknown" — an outward effect (exec, a message, a web request, a cron change): never repeated, the
#               model and the user are told its outcome is unknown.
Recovery = Literal["rerun", "check", "unknown"]


@dataclass
class Checked:
    """What `Tool.check` found after a restart. done: True the effect is in place, False it is
    missing and running the call again is safe, None it cannot be told; note says what was seen."""

    done: bool | None
    note: str


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
    # Whose workspace `workspace` is: "" the owner, "<channel>:<id>" a guest (workspace/users.py).
    # Whatever the run starts for later (a sub-agent, a cron job) keeps this person's workspace.
    user: str = ""
    # exec's per-person HOME/TMPDIR parent, outside every workspace (None: inside the workspace, tests).
    scratch: Path | None = None
    # Whether untrusted content entered this run (one object for the whole run, see agent/trust/taint.py).
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
    # How a call cut by a crash is resolved (see Recovery); None: "unknown" with side effects, else "rerun".
    recovery: ClassVar[Recovery | None] = None
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

    async def check(self, args: Any, ctx: ToolContext) -> Checked:
        """For recovery "check": whether this call's effect is already in place after a restart."""
        return Checked(None, f"{self.name} has no way to check its effect")

    @abstractmethod
    async def run(self, args: Any, ctx: ToolContext) -> str:
        """Do the work; raise ToolError for failures the model should fix."""

    def result_status(self, result: str) -> str:
        """The step's status for people watching (tool_end, the history): "failed" when the work ran
        but did not succeed (a program's non-zero exit), so no client shows it with a check mark."""
        return "ok"

    def definition(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "input_schema": _clean_schema(self.Arguments)}


def _clean_schema(model: type[BaseModel]) -> dict[str, Any]:
    """Pydantic's schema minus titles, and an optional field (`X | None = None`) shown as plain X:
    the model omits what it does not set, and validation still accepts an explicit null. About a
    tenth of the tool definitions' bytes, sent with every request, for the same meaning."""
    def strip(node: Any) -> Any:
        if isinstance(node, dict):
            options = node.get("anyOf")
            if (isinstance(options, list) and len(options) == 2 and {"type": "null"} in options
                    and "default" in node and node["default"] is None):
                kept = next(o for o in options if o != {"type": "null"})
                node = {**kept, **{k: v for k, v in node.items() if k not in ("anyOf", "default")}}
            return {k: strip(v) for k, v in node.items() if k != "title"}
        if isinstance(node, list):
            return [strip(v) for v in node]
        return node

    schema = strip(model.model_json_schema())
    schema.setdefault("properties", {})
    return schema

