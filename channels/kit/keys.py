"""Session keys of channel chats: `<channel>:<chat_id>`, or `<channel>:<chat_id>:<thread_id>` for a thread.

The kit builds every key a channel uses (checked by the agent's key rule, injected, so a key that
could not name a session log never reaches the agent). With `[channels] owner_shared_session`
the owner's private chats on every channel share the key OWNER_SESSION.
"""

from __future__ import annotations

OWNER_SESSION = "owner:dm"


def session_key(channel: str, chat_id: int | str, thread_id: int | str | None = None) -> str:
    return f"{channel}:{chat_id}" if thread_id is None else f"{channel}:{chat_id}:{thread_id}"


def parse_session_key(key: str, channel: str) -> tuple[str, str | None] | None:
    """(chat id, thread id) of a key of `channel` whose chat id has no ':'; None for another channel's key.
    Chats whose ids contain ':' (Matrix rooms) are found through the kit's route table instead."""
    parts = key.split(":")
    if len(parts) not in (2, 3) or parts[0] != channel or not parts[1]:
        return None
    return parts[1], (parts[2] if len(parts) == 3 else None)


__all__ = ["OWNER_SESSION", "parse_session_key", "session_key"]
