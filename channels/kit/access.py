"""Who may reach the agent over a channel: one pure decision for every platform.

No I/O: the kit looks up the facts (is the sender paired, were they refused before) and acts on
the verdict, so every rule is testable without a network. The matrix (docs/channels.md):

- owners are always admitted, in private and in groups (unless group_policy is "disabled");
- private chats: "open" admits everyone, "pairing" admits listed and paired users and gives
  others a one-time code, "allowlist" admits listed and paired users, "disabled" nobody else;
- groups read only messages addressing the bot (the kit checks that first); then "open" admits
  everyone, "allowlist" listed and paired users, "mention" whoever the private-chat rules admit
  (without pairing in the group), "disabled" nobody;
- someone not admitted gets one short refusal, then silence.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Iterable

from clawgate.config.access import AccessSettings, DmPolicy, GroupPolicy


class Verdict(Enum):
    ADMIT = "admit"  # hand the message on
    PAIR = "pair"  # unknown private user under `pairing`: issue (or keep) a one-time code
    REFUSE = "refuse"  # one short refusal
    IGNORE = "ignore"  # silence (already refused, or that kind of chat is off)


@dataclass(frozen=True)
class Sender:
    user_id: str
    username: str | None = None
    display: str | None = None


@dataclass(frozen=True)
class AccessPolicy:
    dm_policy: DmPolicy = "pairing"
    group_policy: GroupPolicy = "mention"
    allow_from: frozenset[str] = frozenset()
    owners: frozenset[str] = frozenset()
    # An owner named by username is the id first seen with it, for good (the kit keeps these): a
    # username can be given up and registered by someone else, an id cannot.
    bound: dict[str, str] = field(default_factory=dict, compare=False, hash=False)

    @classmethod
    def build(cls, dm_policy: DmPolicy, group_policy: GroupPolicy, allow_from: Iterable[str | int],
              owners: Iterable[str | int] = ()) -> "AccessPolicy":
        """Normalise `allow_from` and `owners`: ids as strings, usernames lower-case without '@';
        '*' allows all in `allow_from` (never in `owners`: an owner is one named person)."""
        return cls(dm_policy, group_policy, _entries(allow_from), _entries(owners) - {"*"})

    @classmethod
    def from_settings(cls, settings: AccessSettings) -> "AccessPolicy":
        return cls.build(settings.dm_policy, settings.group_policy, settings.allow_from, settings.owner)

    def listed(self, sender: Sender) -> bool:
        return "*" in self.allow_from or _matches(self.allow_from, sender)

    def is_owner(self, sender: Sender) -> bool:
        """Owners by id, or by a username whose first user (`bound`) this sender is: a renamed or
        re-registered username never carries ownership to another id."""
        if sender.user_id.strip().lstrip("@").lower() in self.owners:  # spelled as `owner` entries are
            return True
        name = _username(sender)
        return name is not None and name in self.owners and self.bound.get(name) == sender.user_id

    def claim(self, sender: Sender) -> str | None:
        """The owner username `sender` is the first to write with (bind it to their id now), or None."""
        name = _username(sender)
        if name is None or name not in self.owners or name in self.bound:
            return None
        return name


def _entries(values: Iterable[str | int]) -> frozenset[str]:
    return frozenset(str(e).strip().lstrip("@").lower() for e in values if str(e).strip())


def _username(sender: Sender) -> str | None:
    """The sender's username as `owner` entries spell it (lower case), or None; never a digit string,
    which would read as an id."""
    name = (sender.username or "").strip().lstrip("@").lower()
    return name if name and not name.isdigit() else None


def _matches(entries: frozenset[str], sender: Sender) -> bool:
    if sender.user_id.lower() in entries:
        return True
    return bool(sender.username) and sender.username.lower().lstrip("@") in entries  # type: ignore[union-attr]


def decide(policy: AccessPolicy, sender: Sender, *, private: bool, paired: bool, refused_before: bool) -> Verdict:
    """The verdict for one message from `sender` (the caller has already checked it is addressed to us)."""
    if policy.is_owner(sender):
        return Verdict.ADMIT if private or policy.group_policy != "disabled" else Verdict.IGNORE
    known = paired or policy.listed(sender)
    if private:
        if policy.dm_policy == "disabled":
            return Verdict.IGNORE
        if policy.dm_policy == "open" or known:
            return Verdict.ADMIT
        if policy.dm_policy == "pairing":
            return Verdict.PAIR
    else:
        if policy.group_policy == "disabled":
            return Verdict.IGNORE
        if policy.group_policy == "open" or known or (policy.group_policy == "mention" and policy.dm_policy == "open"):
            return Verdict.ADMIT
    return Verdict.IGNORE if refused_before else Verdict.REFUSE


def may_approve(policy: AccessPolicy, sender: Sender) -> bool:
    """Only an owner answers approval requests: pairing a friend never gives them a shell, and whoever
    asked for a risky call cannot approve it unless they are the owner."""
    return policy.is_owner(sender)


__all__ = ["AccessPolicy", "AccessSettings", "DmPolicy", "GroupPolicy", "Sender", "Verdict", "decide", "may_approve"]
