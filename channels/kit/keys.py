"""Session keys of channel chats: `<channel>:<chat_id>`, or `<channel>:<chat_id>:<thread_id>` for a thread.

The kit builds every key a channel uses (checked by the agent's key rule, injected, so a key that
could not name a session log never reaches the agent). With `[channels] owner_shared_session`
the owner's private chats on every channel share the key OWNER_SESSION. A session of an agent
other than the default carries `agent:<id>:` in front (config/agents.py); the place is the same.
"""

from __future__ import annotations

from typing import Callable

from clawgate.config.agents import agent_of_key

OWNER_SESSION = "owner:dm"


def session_key(channel: str, chat_id: int | str, thread_id: int | str | None = None) -> str:
    return f"{channel}:{chat_id}" if thread_id is None else f"{channel}:{chat_id}:{thread_id}"


def split_chat(rest: str) -> tuple[str, str | None] | None:
    """The default reading of a key after `<channel>:`: chat ids and thread ids have no ':'."""
    parts = rest.split(":")
    if len(parts) not in (1, 2) or not parts[0]:
        return None
    return parts[0], (parts[1] if len(parts) == 2 else None)


def parse_session_key(key: str, channel: str,
                      split: Callable[[str], tuple[str, str | None] | None] = split_chat) -> tuple[str, str | None] | None:
    """(chat id, thread id) of a key of `channel`; None for another channel's key. `split` reads the part
    after `<channel>:` — a platform whose ids contain ':' (Matrix rooms) gives its own (PlatformAdapter.split_chat)."""
    prefix = f"{channel}:"
    _, key = agent_of_key(key)  # another agent's session of the same chat is in the same place
    if not key.startswith(prefix):
        return None
    return split(key[len(prefix):])


__all__ = ["OWNER_SESSION", "parse_session_key", "session_key", "split_chat"]
