"""`cron`: let the agent schedule work for the user ("remind me at 9", "every Monday check …").

The tool calls the daemon's CronService, so a job added here is the same as one added with
`clawgate cron add`: validated the same way, stored, and armed at once. By default the
job's reply comes back to the chat the request came from.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from ..tools.base import Args, Tool, ToolContext, ToolError
from clawgate.config.agents import agent_id_of

from .jobs import CronError, parse_deliver

if TYPE_CHECKING:
    from .cron import CronService

TRIGGER_CHANNELS = ("cron", "heartbeat", "recovery")


class CronTool(Tool):
    name = "cron"
    description = (
        "Schedule work, list jobs or remove one (by id). add: 'message' is what you will be told when it fires, "
        "self-contained, plus 'at' (once: 2026-03-01T09:00, 'HH:MM' or '+20m'), 'every' ('30m', '1d') or 'cron' "
        "(crontab, e.g. '0 9 * * mon-fri'); 'tz' (e.g. Europe/Berlin) for local times. Goes to this chat unless "
        "'deliver' is <channel>:<chat id>, gateway:<session> or none."
    )
    side_effects = True

    class Arguments(Args):
        action: Literal["add", "list", "remove"]
        message: str | None = Field(None, max_length=20_000)
        at: str | None = None
        every: str | None = None
        cron: str | None = None
        tz: str | None = None
        name: str | None = Field(None, max_length=200)
        deliver: str | None = None
        id: str | None = None

    def __init__(self, service: "CronService") -> None:
        self._service = service

    def needs_approval(self, args: Arguments, ctx: ToolContext) -> str | None:
        """Like `message`: a job that will write to some other chat needs the user's yes."""
        if args.action != "add" or args.deliver is None:
            return None
        try:
            target = parse_deliver(args.deliver)
        except CronError:
            return None  # rejected with a clear error when it runs
        if target is None or target == _here(ctx) or (ctx.channel == "gateway" and target == "gateway"):
            return None
        return f"scheduling a job that will send to {target}, not to this chat"

    def lasting_effect(self, args: Arguments, ctx: ToolContext) -> str | None:
        if args.action == "add":
            return "schedules a cron job whose text will run later as a new turn (marked untrusted)"
        return "removes a cron job" if args.action == "remove" else None

    def summarize(self, args: Arguments) -> str:
        when = args.at or args.every or args.cron or ""
        return f"cron {args.action} {args.id or ''}{when} {(args.message or '')[:120]}".strip()

    async def run(self, args: Arguments, ctx: ToolContext) -> str:
        service = self._service
        # a guest sees and changes only their jobs, which run in the guest's own workspace
        mine = "" if ctx.owner else (ctx.user or f"{ctx.channel}:{ctx.sender_id}")
        agent = agent_id_of(ctx.session_key)  # and a run sees only its own agent's jobs (docs/agents.md)

        def visible(job: Any) -> bool:
            return agent_id_of(job.session) == agent and (ctx.owner or job.created_by == mine)
        try:
            if args.action == "list":
                return _listing([job for job in service.jobs() if visible(job)])
            if args.action == "remove":
                if not args.id:
                    raise ToolError("remove needs the job 'id'", "call cron with action=list to see the ids")
                if not visible(service.get(args.id)):
                    raise CronError(f"no cron job {args.id!r} of yours; action=list shows the ids", "not_found")
                job = service.remove(args.id)
                return f"removed job {job.id} ({job.name})"
            if not args.message:
                raise ToolError("add needs a 'message'", "say what should happen when the job fires")
            job = service.add(message=args.message, at=args.at, every=args.every, cron=args.cron, tz=args.tz,
                              name=args.name, deliver=args.deliver if args.deliver is not None else _here(ctx),
                              created_by=mine, tainted="; ".join(ctx.taint.sources),
                              agent=agent)  # the job runs for the agent that made it
        except CronError as exc:
            raise ToolError(exc.message, "correct the argument it names and call cron again") from None
        public = job.public()
        return (f"scheduled job {job.id} \"{job.name}\": {public['describe']}; next run {public['nextRun']}; "
                f"delivers to {public['deliver']}")


def _here(ctx: ToolContext) -> str:
    """The current chat as a delivery target (none when a trigger itself is running)."""
    if ctx.channel in TRIGGER_CHANNELS:
        return "none"
    if ctx.channel == "gateway":
        return f"gateway:{ctx.chat_id}"
    return f"{ctx.channel}:{ctx.chat_id}"


def _listing(jobs: list[Any]) -> str:
    if not jobs:
        return "no cron jobs"
    lines = []
    for job in jobs:
        p = job.public()
        lines.append(f"- {job.id} \"{job.name}\" {p['describe']} · next {p['nextRun'] or '-'} · {p['state']}"
                     f"{'' if job.enabled else ' (off)'} · last {p['lastStatus'] or '-'} · to {p['deliver']}"
                     f"{' · runs as untrusted' if job.tainted else ''}")
    return "\n".join(lines)
