"""Bot commands: control of the session, answered by the channel itself, never sent to the model.

They act through the daemon object (reset a session, stop a turn, read status and tasks) so
they work while the session is busy — `/stop` must not wait in the queue behind the very turn
it is meant to cancel.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gateway.daemon import Daemon

BOT_COMMANDS: list[tuple[str, str]] = [
    ("start", "What this bot is and how to use it"),
    ("new", "Start a fresh conversation (the old one is archived)"),
    ("status", "Is the agent working, what is queued, which model"),
    ("stop", "Cancel what the agent is doing right now"),
    ("tasks", "List the long tasks of this chat"),
]


class Commands:
    def __init__(self, daemon: "Daemon") -> None:
        self.daemon = daemon

    def handle(self, name: str, key: str) -> str | None:
        """The reply to `/name` in session `key`; None when the loop answers on its own (a stop)."""
        return getattr(self, f"_{name}")(key)

    def _start(self, key: str) -> str:
        agent = self.daemon.settings.agent.name
        lines = [f"Hi, I'm {agent}. Send me a message and I'll work on it with my tools.", ""]
        lines += [f"/{name} — {text}" for name, text in BOT_COMMANDS if name != "start"]
        return "\n".join(lines)

    def _new(self, key: str) -> str:
        if self.daemon.agent.busy(key):
            return "I'm still working on your last message. Send /stop first (or wait), then /new."
        archived = self.daemon.reset_session(key)
        return "Started a new conversation." + (" The previous one is archived." if archived else "")

    def _stop(self, key: str) -> str | None:
        if self.daemon.agent.stop_current(key):
            return None  # the loop itself answers "Stopped." through the bus, in order
        return "Nothing is running right now."

    def _status(self, key: str) -> str:
        daemon = self.daemon
        busy = daemon.agent.busy(key)
        queued = max(daemon.agent.lanes.pending(key) - (1 if busy else 0), 0)
        messages = daemon.sessions.get(key).message_count if daemon.sessions.exists(key) else 0
        lines = [
            f"{daemon.settings.agent.name} · model {daemon.settings.agent.model} · provider {daemon.provider.name}",
            f"This chat: {'working' if busy else 'idle'}" + (f", {queued} queued" if queued else "")
            + f", {messages} messages in the conversation",
        ]
        tasks = _active_tasks(daemon, key)
        if tasks is not None:
            lines.append(f"Active tasks: {len(tasks)}")
        lines.append(f"Up for {_duration(time.time() - daemon.started_at)}")
        return "\n".join(lines)

    def _tasks(self, key: str) -> str:
        tasks = _active_tasks(self.daemon, key)
        if tasks is None:
            return "This daemon does not track long tasks."
        if not tasks:
            return "No active tasks in this chat."
        return "\n".join(["Active tasks:"] + [f"• {task.status_line()}" for task in tasks])


def _active_tasks(daemon: Any, key: str) -> list[Any] | None:
    store = getattr(daemon, "tasks", None)
    return None if store is None else list(store.active(key))


def _duration(seconds: float) -> str:
    minutes, _ = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}m"
    return f"{minutes}m" if minutes else "less than a minute"
