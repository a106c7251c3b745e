"""`spawn`: hand a self-contained job to a sub-agent and get back only its result (agent/jobs/subagents.py)."""

from __future__ import annotations

from pydantic import Field

from ..tools.base import Args, Tool, ToolContext, ToolError
from .subagents import ChildSpec, Subagents, tool_result


class Spawn(Tool):
    name = "spawn"
    description = (
        "Run a sub-agent on one self-contained job; only its short result comes back. It sees nothing of "
        "this chat: `task` holds all it needs (goal, inputs, files, what to return, how to check). Spawns "
        "of one turn run in parallel; background=true: the result comes later as a [sub-agent report]."
    )
    # Journalled durably like any side effect, but re-running the same call resumes the child from its
    # own log (or returns its recorded result), so a restart continues it instead of calling it unknown.
    side_effects = True
    recovery = "rerun"
    concurrent = True

    class Arguments(Args):
        task: str = Field(min_length=1, max_length=20_000)
        background: bool = False
        max_turns: int | None = Field(None, ge=1, description="model calls, below the configured limit")
        max_tokens: int | None = Field(None, ge=1000, description="below the configured limit")

    def __init__(self, subagents: "Subagents", *, depth: int = 0) -> None:
        self.subagents = subagents
        self.depth = depth  # of the agent holding this tool: 0 is the main agent

    def lasting_effect(self, args: Arguments, ctx: ToolContext) -> str | None:
        return "starts a sub-agent that acts on its own with this task"

    def summarize(self, args: Arguments) -> str:
        return f"spawn{' (background)' if args.background else ''}: {args.task[:300]}"

    async def run(self, args: Arguments, ctx: ToolContext) -> str:
        if not ctx.call_id:
            raise ToolError("spawn needs the id of its call", "call spawn as a tool from a model turn")
        turns, tokens = self.subagents.budget(args.max_turns, args.max_tokens)
        spec = ChildSpec(parent_key=ctx.session_key, parent_run=ctx.run_id, call_id=ctx.call_id, task=args.task,
                         depth=self.depth + 1, turns=turns, tokens=tokens, channel=ctx.channel, chat_id=ctx.chat_id,
                         sender_id=ctx.sender_id, owner=ctx.owner, background=args.background, user=ctx.user,
                         tainted="; ".join(ctx.taint.sources))
        if args.background:
            self.subagents.start_background(spec)
            return (f"Started sub-agent {spec.key} in the background (budget: {turns} model calls, {tokens} tokens). "
                    "Its result will arrive in this conversation as a [sub-agent report] message; do not wait for it "
                    "or poll: answer the user now.")
        return tool_result(await self.subagents.run(spec))
