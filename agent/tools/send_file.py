"""`send_file`: send a file from the run's own workspace to the chat the run answers.

The file is read through folder descriptors like the other file tools (no way out of the
workspace, no symlinks), copied durably into the state folder and queued like a reply, so a
restart or an outage delays it but never loses or repeats it (agent/bus/outbox_files.py).
Sending data out is an outward effect: in a run that read untrusted content, the owner approves it.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from pathlib import Path

from pydantic import Field

from clawgate.agent.bus import OutboundMessage, store_file
from clawgate.agent.bus.outbox_files import size_text

from .base import Args, Tool, ToolContext, ToolError
from .files import pinned_file

DEFAULT_MAX_BYTES = 50 * 1024 * 1024  # the most any chat platform here takes (Telegram's bot limit)


class SendFile(Tool):
    name = "send_file"
    description = "Send a workspace file to this chat as an attachment."
    side_effects = True

    class Arguments(Args):
        path: str = Field(min_length=1)
        caption: str | None = Field(None, max_length=1000)  # Telegram cuts captions at 1024

    def __init__(self, folder: Path | None, *, max_bytes: int = DEFAULT_MAX_BYTES,
                 limits: Mapping[str, int] | None = None, fsync: bool = True) -> None:
        """`folder`: state/outbox-files (None: files cannot be sent). `limits`: channel -> its largest
        file in bytes, filled by the gateway once the channels are built (0: the channel takes none)."""
        self.folder = folder
        self.max_bytes = max_bytes
        self.limits: Mapping[str, int] = limits if limits is not None else {}
        self.fsync = fsync

    def lasting_effect(self, args: Arguments, ctx: ToolContext) -> str | None:
        return f"sending the workspace file {args.path} out of the workspace"

    def summarize(self, args: Arguments) -> str:
        return f"send_file {args.path} to this chat" + (f" (caption: {args.caption[:200]})" if args.caption else "")

    def limit(self, channel: str) -> int:
        known = self.limits.get(channel)
        return self.max_bytes if not known else min(known, self.max_bytes)

    async def run(self, args: Arguments, ctx: ToolContext) -> str:
        if ctx.send is None or self.folder is None:
            raise ToolError("files cannot be sent from this context", "describe the file in your answer instead")
        limit = self.limit(ctx.channel)
        with pinned_file(ctx, args.path) as fh:
            size = os.fstat(fh.fileno()).st_size
            if size > limit:
                raise ToolError(f"{args.path} is {size_text(size)}; {ctx.channel} takes files up to {size_text(limit)}",
                                "send a smaller file (compress or split it)")
            if size == 0:
                raise ToolError(f"{args.path} is empty", "write the content first")
            data = await asyncio.to_thread(fh.read, limit + 1)
        if len(data) > limit:
            raise ToolError(f"{args.path} grew past {size_text(limit)} while it was read", "send a smaller file")
        name = Path(args.path).name
        msg = OutboundMessage(channel=ctx.channel, chat_id=ctx.chat_id, text=args.caption or "",
                              session_key=ctx.session_key, kind="file", in_reply_to=ctx.run_id)
        await asyncio.to_thread(store_file, self.folder, msg, name, data, fsync=self.fsync)
        ctx.send(msg)
        return f"{name} ({size_text(len(data))}) queued for delivery to this chat"
