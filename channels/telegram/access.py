"""Who may reach the agent over Telegram, and whether a group message is meant for the bot.

Pure decisions, no I/O: the channel looks up the facts (is the sender paired, were they
refused before) and acts on the verdict. That keeps every rule testable without a network.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from typing import Iterable, Literal

DmPolicy = Literal["pairing", "allowlist", "open"]
GroupPolicy = Literal["allowlist", "open", "disabled"]

COMMANDS = ("start", "new", "status", "stop", "tasks")
_COMMAND = re.compile(r"^/([A-Za-z0-9_]{1,32})(?:@([A-Za-z0-9_]+))?(?:\s+(.*))?$", re.DOTALL)


class Verdict(Enum):
    ADMIT = "admit"  # hand the message on
    PAIR = "pair"  # unknown private user under `pairing`: issue (or keep) a one-time code
    REFUSE = "refuse"  # one short refusal
    IGNORE = "ignore"  # silence (already refused, or groups disabled)


@dataclass(frozen=True)
class Sender:
    user_id: str
    username: str | None = None


@dataclass(frozen=True)
class AccessPolicy:
    dm_policy: DmPolicy = "pairing"
    group_policy: GroupPolicy = "allowlist"
    allow_from: frozenset[str] = frozenset()

    @classmethod
    def build(cls, dm_policy: DmPolicy, group_policy: GroupPolicy, allow_from: Iterable[str | int]) -> "AccessPolicy":
        """Normalise `allow_from`: ids as strings, usernames lower-case without '@'; '*' allows all."""
        entries = {str(e).strip().lstrip("@").lower() for e in allow_from if str(e).strip()}
        return cls(dm_policy, group_policy, frozenset(entries))

    def listed(self, sender: Sender) -> bool:
        if "*" in self.allow_from or sender.user_id in self.allow_from:
            return True
        return bool(sender.username) and sender.username.lower() in self.allow_from  # type: ignore[union-attr]


def decide(policy: AccessPolicy, sender: Sender, *, private: bool, paired: bool, refused_before: bool) -> Verdict:
    """The verdict for one message from `sender` (the caller has already checked it is addressed to us)."""
    if private:
        if policy.dm_policy == "open" or paired or policy.listed(sender):
            return Verdict.ADMIT
        if policy.dm_policy == "pairing":
            return Verdict.PAIR
    else:
        if policy.group_policy == "disabled":
            return Verdict.IGNORE
        if policy.group_policy == "open" or paired or policy.listed(sender):
            return Verdict.ADMIT
    return Verdict.IGNORE if refused_before else Verdict.REFUSE


def may_approve(policy: AccessPolicy, sender: Sender, *, private: bool, chat_id: str, paired: bool) -> bool:
    """Who may press Approve: in a private chat its own (admitted) user; in a group a listed or paired one."""
    if private:
        return sender.user_id == chat_id and decide(policy, sender, private=True, paired=paired,
                                                    refused_before=True) is Verdict.ADMIT
    return paired or policy.listed(sender)


@dataclass(frozen=True)
class Addressed:
    """A message as the bot reads it: for us or not, the command (if any) and the text to pass on."""

    for_us: bool
    text: str
    command: str | None = None
    args: str = ""


def read_message(text: str, *, private: bool, bot_username: str, mentioned: bool, reply_to_bot: bool) -> Addressed:
    """Decide whether `text` is for the bot. Groups: only when mentioned, replied to, or `/cmd@bot`.

    `mentioned` is true when Telegram marked an @mention (or text mention) of the bot. Known
    commands come back in `command`; unknown `/words` are ordinary text for the model.
    """
    stripped = text.strip()
    match = _COMMAND.match(stripped)
    if match:
        name, target, args = match.group(1).lower(), match.group(2), (match.group(3) or "").strip()
        ours = target is None or target.lower() == bot_username.lower()
        if not ours:  # `/cmd@otherbot`
            return Addressed(False, stripped)
        if name in COMMANDS:  # a bare `/cmd` in a group is for every bot there, us included
            return Addressed(True, stripped, name, args)
    for_us = private or mentioned or reply_to_bot
    cleaned = _strip_mention(stripped, bot_username) if mentioned else stripped
    return Addressed(for_us, cleaned or stripped)


def _strip_mention(text: str, bot_username: str) -> str:
    return re.sub(rf"@{re.escape(bot_username)}\b", "", text, flags=re.IGNORECASE).strip()


def session_key(chat_id: int | str, thread_id: int | None = None) -> str:
    """`telegram:<chat>` for private chats and groups, `telegram:<chat>:<thread>` for forum topics."""
    return f"telegram:{chat_id}" if thread_id is None else f"telegram:{chat_id}:{thread_id}"


def parse_session_key(key: str) -> tuple[str, int | None] | None:
    """The chat id and topic of a Telegram session key; None for another channel's key."""
    parts = key.split(":")
    if len(parts) not in (2, 3) or parts[0] != "telegram":
        return None
    try:
        return parts[1], (int(parts[2]) if len(parts) == 3 else None)
    except ValueError:
        return None
