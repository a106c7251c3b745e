"""Chat commands (/help /start /new /status /stop /tasks /undo): control of a session, answered at once.

Any channel (and the gateway's own chat, gateway/api/chat.py) hands a command here with the
session it came from and who sent it; the answer is plain text for that channel to show.
Commands never reach the model and never wait in the session's queue (see agent/control.py for
why). In a conversation several people share, a guest's /stop acts on what is theirs only (their
run, their queued messages, the background jobs their runs started) and resetting it is the
owner's; the owner's /stop stops whatever runs there.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Callable, Sequence

from clawgate.workspace.users import OWNER

from .core.errors import Conflict, DomainError

if TYPE_CHECKING:
    from .checkpoints import CheckpointService
    from .control import SessionControl, TaskControl
    from .health import Health
    from .usage.ledger import UsageLedger

COMMANDS: list[tuple[str, str]] = [
    ("start", "What this bot is and how to use it"),
    ("help", "List the commands"),
    ("new", "Start a fresh conversation (the old one is archived)"),
    ("status", "Is the agent working, what is queued, which model"),
    ("stop", "Cancel what the agent is doing for you right now, background jobs included"),
    ("tasks", "List the long tasks of this chat"),
    ("undo", "Go back N steps in the current task (/undo 2); files too"),
]
NAMES = frozenset(name for name, _ in COMMANDS)
OWNER_ONLY_RESET = ("Only the owner can start this shared conversation afresh; "
                    "/stop stops your own run.")


class CommandRouter:
    def __init__(self, *, agent_name: str, sessions: "SessionControl", tasks: "TaskControl", status: "Health",
                 checkpoints: "CheckpointService | None" = None, usage: "UsageLedger | None" = None) -> None:
        self.agent_name = agent_name
        # (name, model) of a session's agent (config/agents.py); None: agent_name and the daemon's model
        self.identity: Callable[[str], tuple[str, str]] | None = None
        self.usage = usage
        self.sessions = sessions
        self.tasks = tasks
        self.status = status
        self.checkpoints = checkpoints

    def handle(self, name: str, session_key: str, args: str = "", *, user: str | None = None, shared: bool = False,
               reply_to: str | None = None, extra: Sequence[tuple[str, str]] = ()) -> str | None:
        """The reply to `/name args` in `session_key`; None when the loop itself answers (a stop does,
        in order, through the bus). Unknown names get the list of commands. `user`: who sent it (OWNER
        or "<channel>:<id>"; None: the owner on the machine); `shared`: the conversation has several
        people; `reply_to`: the platform message of the command (a stop's "Stopped." answers it too);
        `extra`: commands the caller answers itself (/approve ID where there are no buttons), for /help."""
        if name not in NAMES:
            return f"Unknown command /{name}. " + self._list(extra)
        owner = user is None or user == OWNER  # None: the owner on the machine
        if name == "undo":  # a guest's own changes only; in a shared conversation their files, not the talk
            return self._undo(session_key, args, user, rewind=owner or not shared)
        if name == "new":
            return self._new(session_key) if owner or not shared else OWNER_ONLY_RESET
        if name == "stop":
            return self._stop(session_key, None if owner else user, reply_to)
        if name == "help":
            return self._help(extra)
        if name == "start":
            return self._start(extra, session_key)
        if name == "tasks":  # in a shared conversation a guest sees their own tasks, not the owner's goals
            return self._tasks(session_key, None if owner or not shared else user)
        return getattr(self, f"_{name}")(session_key)

    def _list(self, extra: Sequence[tuple[str, str]] = ()) -> str:
        return "Commands: " + ", ".join(f"/{name}" for name, _ in [*COMMANDS, *extra]) + ". /help explains them."

    def _help(self, extra: Sequence[tuple[str, str]] = ()) -> str:
        return "\n".join(["Commands (answered at once, even while I'm working):"]
                         + [f"/{name} — {text}" for name, text in [*COMMANDS, *extra] if name != "help"])

    def _who(self, key: str) -> tuple[str, str]:
        """(name, model) of the agent answering in session `key`."""
        return self.identity(key) if self.identity is not None else (self.agent_name, str(self.status.get("model")))

    def _start(self, extra: Sequence[tuple[str, str]] = (), key: str = "") -> str:
        lines = [f"Hi, I'm {self._who(key)[0]}. Send me a message and I'll work on it with my tools.", ""]
        lines += [f"/{name} — {text}" for name, text in [*COMMANDS, *extra] if name != "start"]
        return "\n".join(lines)

    def _new(self, key: str) -> str:
        try:
            archived = self.sessions.reset(key)
        except Conflict:
            return "I'm still working on your last message. Send /stop first (or wait), then /new."
        return "Started a new conversation." + (" The previous one is archived." if archived else "")

    def _stop(self, key: str, user: str | None, reply_to: str | None) -> str | None:
        """`user`: a guest, whose /stop reaches only what is theirs; None: everything in the session."""
        jobs = self.sessions.stop_background(key, user=user)
        cancelled = f"Cancelled background job{'s' if len(jobs) > 1 else ''} {', '.join(jobs)}." if jobs else None
        if self.sessions.stop(key, user=user, reply_to=reply_to):
            return cancelled  # the loop itself answers "Stopped." for the turn, in order
        if user is not None and self.sessions.busy(key):
            return cancelled or "Nothing of yours is running or waiting; the run going on here is someone else's."
        return cancelled or "Nothing is running right now."

    def _status(self, key: str) -> str:
        busy, queued = self.sessions.busy(key), self.sessions.queued(key)
        lines = [
            f"{self._who(key)[0]} · model {self._who(key)[1]} · provider {self.status.get('provider')}",
            f"This chat: {'working' if busy else 'idle'}" + (f", {queued} queued" if queued else "")
            + f", {self.sessions.message_count(key)} messages in the conversation",
            f"Active tasks: {len(self.tasks.list(session=key))}",
            *[f"Background job {job['id']}: {job['summary'][:80]} (running {_seconds(job['runningSeconds'])})"
              for job in self.sessions.background_jobs(key)],
            f"Up for {_duration(self.status.uptime())}",
        ]
        if self.usage is not None:  # this chat's own figures only: a guest never sees other chats'
            today, total = self.usage.session_today(key), self.usage.by_session.get(key)
            lines.append(f"Tokens in this chat: today {_tokens(today)}; in all {_tokens(total)}")
        paused = [p for p in self.status.get("providers", []) if p.get("state") != "closed"]
        lines += [f"Provider {p['name']} is paused after repeated failures; it is tried again "
                  + ("shortly" if p.get("state") == "half_open" else f"at {time.strftime('%H:%M', time.localtime(p['retryAt']))}")
                  for p in paused]
        return "\n".join(lines)

    def _tasks(self, key: str, person: str | None = None) -> str:
        """The conversation's active tasks; `person` set: only that person's (a guest in a shared one)."""
        tasks = [t for t in self.tasks.list(session=key) if person is None or t.belongs_to(person)]
        if not tasks:
            return "No active tasks in this chat." if person is None else "You have no active tasks in this chat."
        return "\n".join(["Active tasks:"] + [f"• {task.status_line()}" for task in tasks])


    def _undo(self, key: str, args: str, user: str | None = None, *, rewind: bool = True) -> str:
        """/undo [N] [confirm]: back N step boundaries of the current task, conversation and files.
        Effects that cannot be undone are listed first and need `confirm`. `rewind=False`: the files
        only (a guest in a shared conversation: rewinding the conversation is the owner's)."""
        if self.checkpoints is None:
            return "Checkpoints are not available here."
        words = args.lower().split()
        confirm = "confirm" in words
        numbers = [w for w in words if w != "confirm"]
        if len(numbers) > 1 or (numbers and not numbers[0].isdigit()):
            return "Usage: /undo [N] [confirm] — e.g. /undo 2 goes back two steps."
        steps = int(numbers[0]) if numbers else 1
        try:
            result = self.checkpoints.undo(key, steps, confirm=confirm, user=user, conversation=rewind)
        except DomainError as exc:
            return f"Cannot undo: {exc.message}."
        effects = result["irreversible"]
        if not result["restored"]:
            lines = [f"Going back {steps} step(s) cannot undo these:"]
            lines += [f"• {e['what']}: {e['summary']}" for e in effects[:10]]
            lines.append(f"Send /undo {steps} confirm to go back anyway.")
            return "\n".join(lines)
        cp = result["checkpoint"]
        files = result.get("files") or {}
        changed = len(files.get("written", [])) + len(files.get("removed", []))
        where = cp["description"] if cp["kind"] == "step" else "before the task's first step"
        if not rewind:
            return (f"Put your files back {steps} step(s): {where}. {changed} file(s) restored. The conversation "
                    "is shared, so it stays as it is (only the owner rewinds it).")
        return (f"Went back {steps} step(s): {where}. {changed} file(s) restored. "
                "Send a message (e.g. 'continue') to go on from there.")


def _seconds(seconds: float) -> str:
    return f"{seconds:.0f}s" if seconds < 60 else _duration(seconds)


def _duration(seconds: float) -> str:
    minutes, _ = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}m"
    return f"{minutes}m" if minutes else "less than a minute"


def _tokens(counts: "dict[str, Any] | None") -> str:
    counts = counts or {}
    return f"{counts.get('input_tokens', 0):,} in / {counts.get('output_tokens', 0):,} out"
