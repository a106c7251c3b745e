"""Chat commands (/start /new /status /stop /tasks): control of a session, answered at once.

Any channel hands a command here with the session it came from; the answer is plain text for
that channel to show. Commands never reach the model and never wait in the session's queue
(see agent/control.py for why).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .errors import Conflict

if TYPE_CHECKING:
    from .control import SessionControl, TaskControl
    from .status import Status

COMMANDS: list[tuple[str, str]] = [
    ("start", "What this bot is and how to use it"),
    ("new", "Start a fresh conversation (the old one is archived)"),
    ("status", "Is the agent working, what is queued, which model"),
    ("stop", "Cancel what the agent is doing right now"),
    ("tasks", "List the long tasks of this chat"),
]
NAMES = frozenset(name for name, _ in COMMANDS)


class CommandRouter:
    def __init__(self, *, agent_name: str, sessions: "SessionControl", tasks: "TaskControl", status: "Status") -> None:
        self.agent_name = agent_name
        self.sessions = sessions
        self.tasks = tasks
        self.status = status

    def handle(self, name: str, session_key: str) -> str | None:
        """The reply to `/name` in `session_key`; None when the loop itself answers (a stop does, in
        order, through the bus). Unknown names get the list of commands."""
        if name not in NAMES:
            return f"Unknown command /{name}. " + self._list()
        return getattr(self, f"_{name}")(session_key)

    def _list(self) -> str:
        return "Commands: " + ", ".join(f"/{name}" for name, _ in COMMANDS) + "."

    def _start(self, key: str) -> str:
        lines = [f"Hi, I'm {self.agent_name}. Send me a message and I'll work on it with my tools.", ""]
        lines += [f"/{name} — {text}" for name, text in COMMANDS if name != "start"]
        return "\n".join(lines)

    def _new(self, key: str) -> str:
        try:
            archived = self.sessions.reset(key)
        except Conflict:
            return "I'm still working on your last message. Send /stop first (or wait), then /new."
        return "Started a new conversation." + (" The previous one is archived." if archived else "")

    def _stop(self, key: str) -> str | None:
        if self.sessions.stop(key):
            return None
        return "Nothing is running right now."

    def _status(self, key: str) -> str:
        busy, queued = self.sessions.busy(key), self.sessions.queued(key)
        lines = [
            f"{self.agent_name} · model {self.status.get('model')} · provider {self.status.get('provider')}",
            f"This chat: {'working' if busy else 'idle'}" + (f", {queued} queued" if queued else "")
            + f", {self.sessions.message_count(key)} messages in the conversation",
            f"Active tasks: {len(self.tasks.list(session=key))}",
            f"Up for {_duration(self.status.uptime())}",
        ]
        return "\n".join(lines)

    def _tasks(self, key: str) -> str:
        tasks = self.tasks.list(session=key)
        if not tasks:
            return "No active tasks in this chat."
        return "\n".join(["Active tasks:"] + [f"• {task.status_line()}" for task in tasks])


def _duration(seconds: float) -> str:
    minutes, _ = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}m"
    return f"{minutes}m" if minutes else "less than a minute"
