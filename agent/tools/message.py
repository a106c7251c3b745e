"""`message`: send a message to the current chat or, with approval, to another one."""

from __future__ import annotations

from typing import Callable

from pydantic import Field

from clawgate.agent.bus import OutboundMessage

from .base import Args, Tool, ToolContext, ToolError


class Message(Tool):
    name = "message"
    description = (
        "Send a message now: a progress note to this chat, or (approved by the user) to another chat. "
        "Your final answer is sent anyway; don't repeat it."
    )
    side_effects = True

    class Arguments(Args):
        text: str = Field(min_length=1, max_length=20000)
        channel: str | None = Field(None, description="e.g. 'telegram', or an account's: 'telegram.work'; default: this one")
        chat_id: str | None = Field(None, description="default: this chat")

    def __init__(self, may_post: Callable[[str, str, str], bool] | None = None) -> None:
        """`may_post(session key, channel, chat id)`: whether the run's agent may post into that chat; a chat
        another agent answers is refused (gateway/agent_scope.py). None: one agent, every chat is its own."""
        self.may_post = may_post

    def _refused(self, args: Arguments, ctx: ToolContext) -> bool:
        channel, chat_id = args.channel or ctx.channel, args.chat_id or ctx.chat_id
        if (channel, chat_id) == (ctx.channel, ctx.chat_id) or self.may_post is None:  # this chat is the run's own
            return False
        return not self.may_post(ctx.session_key, channel, chat_id)

    def needs_approval(self, args: Arguments, ctx: ToolContext) -> str | None:
        if self._refused(args, ctx):
            return None  # refused when run, without asking anyone to approve what cannot happen
        if (args.channel or ctx.channel) != ctx.channel or (args.chat_id or ctx.chat_id) != ctx.chat_id:
            return "sending to a chat other than the current one"
        return None

    def lasting_effect(self, args: Arguments, ctx: ToolContext) -> str | None:
        return self.needs_approval(args, ctx)

    def summarize(self, args: Arguments) -> str:
        return f"message to {args.channel or 'this channel'}:{args.chat_id or 'this chat'}: {args.text[:200]}"

    async def run(self, args: Arguments, ctx: ToolContext) -> str:
        if ctx.send is None:
            raise ToolError("messages cannot be sent from this context", "put the text in your final answer instead")
        channel = args.channel or ctx.channel
        chat_id = args.chat_id or ctx.chat_id
        if self._refused(args, ctx):
            raise ToolError(f"{channel}:{chat_id} is another agent's chat; this agent cannot post there",
                            "post only to this agent's own chats, or put the text in your final answer")
        ctx.send(OutboundMessage(channel=channel, chat_id=chat_id, text=args.text, session_key=ctx.session_key,
                                 kind="notice", in_reply_to=ctx.run_id))
        return f"queued for delivery to {channel}:{chat_id}"
