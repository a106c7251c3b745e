"""Google Chat interaction events -> the kit's Incoming, or an approval button's click (no I/O).

Who wrote is `user.name` (`users/<id>`), the user Google names in an event it signed: the only identity
trusted, kept as its digits (the kit's user id; `owner` entries are written the same way). The display
name only names the sender to the model (never when it is all digits, which would read as an id); the
email is never read. A message
addresses the app in a direct message (space type DIRECT_MESSAGE), when it @mentions the app (a
USER_MENTION annotation of a BOT user: Google strips app mentions into `argumentText`), or as a slash
command. In a space the reply goes in the message's thread; the conversation is the thread.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from clawgate.channels.kit import Incoming, Sender

APPROVAL_FUNCTION = "clawgate_approval"


@dataclass(frozen=True)
class Click:
    """A press of an approval card's button: who pressed (Google's user name), where, and its parameters."""

    user: Sender
    space: str
    message: str
    approval_id: str
    approve: bool
    secret: str


def _space(event: dict[str, Any]) -> dict[str, Any]:
    space = event.get("space") or (event.get("message") or {}).get("space") or {}
    return space if isinstance(space, dict) else {}


def is_private(space: dict[str, Any]) -> bool:
    return space.get("spaceType") == "DIRECT_MESSAGE" or space.get("type") == "DM" or bool(space.get("singleUserBotDm"))


def user_name(user_id: str) -> str:
    """The Chat API's resource name of a user id the kit holds."""
    return f"users/{user_id}"


def _sender(user: Any) -> Sender | None:
    if not isinstance(user, dict):
        return None
    found = re.fullmatch(r"users/([0-9]{1,40})", str(user.get("name") or ""))
    if found is None:
        return None
    display = str(user.get("displayName") or "").strip()
    name = display if display and not display.lstrip("@").strip().isdigit() else None
    return Sender(user_id=found.group(1), username=name, display=display or None)


def _mentions_app(message: dict[str, Any]) -> bool:
    for note in message.get("annotations") or []:
        if isinstance(note, dict) and note.get("type") == "USER_MENTION":
            user = (note.get("userMention") or {}).get("user") or {}
            if user.get("type") == "BOT":
                return True
    return False


def incoming(event: dict[str, Any]) -> Incoming | None:
    """The kit's Incoming for a MESSAGE event, or None for what is not a person's message to read."""
    if event.get("type") != "MESSAGE":
        return None
    message = event.get("message")
    if not isinstance(message, dict) or not str(message.get("name") or "").startswith("spaces/"):
        return None
    sender = _sender(message.get("sender") or event.get("user"))
    space = _space(event)
    if sender is None or not str(space.get("name") or "").startswith("spaces/"):
        return None
    private = is_private(space)
    command = message.get("slashCommand") is not None
    addressed = private or command or _mentions_app(message)
    raw = str(message.get("text") or "")
    if "argumentText" in message and not command:
        text = str(message.get("argumentText") or "").strip()
    else:
        text = raw.strip()
    thread = str((message.get("thread") or {}).get("name") or "") or None
    return Incoming(
        message_id=str(message["name"]),
        chat_id=str(space["name"]),
        sender=sender,
        private=private,
        text=text,
        addressed=addressed,
        thread_id=None if private else thread,
        sender_is_bot=str((message.get("sender") or {}).get("type") or "") == "BOT",
        unreadable=not text and bool(message.get("attachment")),
        metadata={"googlechat_space_type": space.get("spaceType") or space.get("type")},
    )


def _parameters(event: dict[str, Any]) -> dict[str, str]:
    """The pressed button's parameters: `common.parameters` (a map) or `action.parameters` (key/value list)."""
    found = dict((event.get("common") or {}).get("parameters") or {})
    for pair in (event.get("action") or {}).get("parameters") or []:
        if isinstance(pair, dict) and pair.get("key"):
            found.setdefault(str(pair["key"]), str(pair.get("value") or ""))
    return {str(k): str(v) for k, v in found.items()}


def click(event: dict[str, Any]) -> Click | None:
    """An approval button's CARD_CLICKED event, or None."""
    if event.get("type") != "CARD_CLICKED":
        return None
    function = (event.get("common") or {}).get("invokedFunction") or (event.get("action") or {}).get("actionMethodName")
    sender = _sender(event.get("user"))
    if function != APPROVAL_FUNCTION or sender is None:
        return None
    params = _parameters(event)
    if not params.get("approval_id"):
        return None
    return Click(user=sender, space=str(_space(event).get("name") or ""),
                 message=str((event.get("message") or {}).get("name") or ""), approval_id=params["approval_id"],
                 approve=params.get("approve") == "true", secret=params.get("secret", ""))
