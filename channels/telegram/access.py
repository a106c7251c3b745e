"""Who may reach the agent over Telegram, and whether a group message is meant for the bot.

Pure decisions, no I/O: the channel looks up the facts (is the sender paired, were they
refused before) and acts on the verdict. That keeps every rule testable without a network.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum
from typing import Iterable, Literal

from clawgate.agent.commands import NAMES as COMMAND_NAMES
from clawgate.agent.session import check_session_key

DmPolicy = Literal["pairing", "allowlist", "open"]
GroupPolicy = Literal["allowlist", "open", "disabled"]

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
    owners: frozenset[str] = frozenset()
    # An owner named by username is the numeric id first seen with it, for good (the channel keeps
    # these): a username can be given up and registered by someone else, an id cannot.
    bound: dict[str, str] = field(default_factory=dict, compare=False, hash=False)

    @classmethod
    def build(cls, dm_policy: DmPolicy, group_policy: GroupPolicy, allow_from: Iterable[str | int],
              owners: Iterable[str | int] = ()) -> "AccessPolicy":
        """Normalise `allow_from` and `owners`: ids as strings, usernames lower-case without '@';
        '*' allows all in `allow_from` (never in `owners`: an owner is one named person)."""
        return cls(dm_policy, group_policy, _entries(allow_from), _entries(owners) - {"*"})

    def listed(self, sender: Sender) -> bool:
        return "*" in self.allow_from or _matches(self.allow_from, sender)

    def is_owner(self, sender: Sender) -> bool:
        """Owners by id, or by a username whose first user (`bound`) this sender is: a renamed or
        re-registered username never carries ownership to another id."""
        if sender.user_id in self.owners:
            return True
        name = _username(sender)
        return name is not None and name in self.owners and self.bound.get(name) == sender.user_id

    def claim(self, sender: Sender) -> str | None:
        """The owner username `sender` is the first to write with (bind it to their id now), or None."""
        name = _username(sender)
        if name is None or name not in self.owners or name in self.bound:
            return None
        return name

    def owner_chats(self) -> list[str]:
        """Private chats of the owners, named by id or bound by username (a private chat's id is the user's id)."""
        return sorted({entry for entry in self.owners if entry.isdigit()} | set(self.bound.values()))


def _entries(values: Iterable[str | int]) -> frozenset[str]:
    return frozenset(str(e).strip().lstrip("@").lower() for e in values if str(e).strip())


def _username(sender: Sender) -> str | None:
    """The sender's username as `owner` entries spell it (lower case), or None; never a digit string,
    which would read as an id."""
    name = (sender.username or "").strip().lstrip("@").lower()
    return name if name and not name.isdigit() else None


def _matches(entries: frozenset[str], sender: Sender) -> bool:
    if sender.user_id in entries:
        return True
    return bool(sender.username) and sender.username.lower() in entries  # type: ignore[union-attr]


def decide(policy: AccessPolicy, sender: Sender, *, private: bool, paired: bool, refused_before: bool) -> Verdict:
    """The verdict for one message from `sender` (the caller has already checked it is addressed to us)."""
    if policy.is_owner(sender):
        return Verdict.ADMIT if private or policy.group_policy != "disabled" else Verdict.IGNORE
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


def may_approve(policy: AccessPolicy, sender: Sender) -> bool:
    """Only an owner answers approval requests: pairing a friend never gives them a shell, and whoever
    asked for a risky call cannot approve it unless they are the owner."""
    return policy.is_owner(sender)


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
        if name in COMMAND_NAMES:  # a bare `/cmd` in a group is for every bot there, us included
            return Addressed(True, stripped, name, args)
    for_us = private or mentioned or reply_to_bot
    cleaned = _strip_mention(stripped, bot_username) if mentioned else stripped
    return Addressed(for_us, cleaned or stripped)


def _strip_mention(text: str, bot_username: str) -> str:
    return re.sub(rf"@{re.escape(bot_username)}\b", "", text, flags=re.IGNORECASE).strip()


def session_key(chat_id: int | str, thread_id: int | None = None) -> str:
    """`telegram:<chat>` for private chats and groups, `telegram:<chat>:<thread>` for forum topics.
    Checked by the rule every key obeys (InvalidSessionKey), though Telegram's numeric ids fit it."""
    return check_session_key(f"telegram:{chat_id}" if thread_id is None else f"telegram:{chat_id}:{thread_id}")


def parse_session_key(key: str) -> tuple[str, int | None] | None:
    """The chat id and topic of a Telegram session key; None for another channel's key."""
    parts = key.split(":")
    if len(parts) not in (2, 3) or parts[0] != "telegram":
        return None
    try:
        return parts[1], (int(parts[2]) if len(parts) == 3 else None)
    except ValueError:
        return None
