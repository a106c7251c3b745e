"""What every chat channel's conformance harness offers the suite (tests/conformance/test_conformance.py).

A harness drives one platform's fake server from the test's side: it says how the daemon is configured
for it, makes its users write (in private or in a group), reads back what the bot sent, presses approval
prompts and injects the platform's failures. To run the suite against a new channel, add one module
to tests/conformance/platforms/ that defines `HARNESS` (a PlatformHarness subclass); the suite picks it
up by itself.

Users are named by role, as the platform spells their ids: `owner` (configured as the owner),
`friend` (in allow_from: a guest), `stranger` (neither: pairing applies).
"""

from __future__ import annotations

import importlib
import pkgutil
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

Event = Any  # the platform's handle of one delivered event (Telegram: an update id)


@dataclass(frozen=True)
class Shown:
    """One message of an approval prompt as a person reads it (PlatformHarness.approval_view)."""

    text: str
    code: str
    buttons: bool


class PlatformHarness(ABC):
    name: str  # the channel's name (its [channels.<name>] section)
    max_chars: int  # one message's limit on the platform (0: none)
    buttons: bool  # approvals are pressed buttons; else `/approve ID` messages
    owner: str
    friend: str
    stranger: str

    # the fake server ---------------------------------------------------------------------------------
    @abstractmethod
    def start(self) -> None:
        """Start the fake platform server (before the daemon)."""

    @abstractmethod
    def close(self) -> None:
        """Stop everything the harness started."""

    @abstractmethod
    def env(self, **access: Any) -> dict[str, str]:
        """The daemon's environment for this channel: its section (token, base_url) and `access`
        (owner, allow_from, dm_policy, group_policy, retry_base_seconds ...) as CLAWGATE_CHANNELS__* variables."""

    def python_path(self) -> list[str]:
        """Folders the daemon needs on its PYTHONPATH (a channel installed for the test)."""
        return []

    def attach(self, daemon: Any) -> None:
        """The daemon now running with this channel (a platform without a visible acknowledgement reads
        the channel's cursor from the daemon's state)."""

    # users writing --------------------------------------------------------------------------------------
    @abstractmethod
    def send_dm(self, user: str, text: str) -> Event:
        """`user` writes `text` to the bot in private."""

    @abstractmethod
    def send_group(self, user: str, text: str, *, mention: bool) -> Event:
        """`user` writes `text` in the test group, mentioning the bot or not."""

    def send_command(self, user: str, command: str, *, group: bool = False) -> Event:
        """`user` sends the chat command `command` ("/undo 2") the platform's way, in private or in the test
        group (where it is the owner's conversation: on a threaded platform, the thread of the last mention).
        By default it is typed like any message (in a group after a mention)."""
        if group:
            return self.send_group(user, command, mention=True)
        return self.send_dm(user, command)

    def command_answers(self, chat: str) -> list[str]:
        """Plain text of the bot's answers to commands in `chat`, in order, among what else it said there
        (by default: what it sent there; a platform that answers a command elsewhere, like Discord's
        interactions, says where)."""
        return self.replies(chat)

    @abstractmethod
    def redeliver(self, event: Event) -> None:
        """The platform delivers `event` again (after a reconnect, an unacknowledged envelope)."""

    @abstractmethod
    def acknowledged(self, event: Event) -> bool:
        """The daemon acknowledged `event` to the platform (cursor past it, envelope acked)."""

    # A platform without messages of several lines (IRC): what the bot sends as one message arrives as several
    # lines, in order, and `replies` gives one entry per line; the suite then reads a message as those lines.
    lines_not_messages: bool = False
    ack_window: float = 2.0  # seconds within which an unblocked daemon acknowledges an event
    # Cases (test function names) that do not apply to the platform, each with why (mail has no groups):
    # the suite is not generated for them (tests/conformance/conftest.py), rather than skipped.
    not_applicable: dict[str, str] = {}

    # what the bot sent ------------------------------------------------------------------------------------
    @abstractmethod
    def dm_chat(self, user: str) -> str:
        """The chat id of the bot's private chat with `user`."""

    @abstractmethod
    def group_chat(self) -> str:
        """The test group's chat id."""

    @abstractmethod
    def replies(self, chat: str) -> list[str]:
        """Plain text of what the bot sent to `chat`, in order, without transient status lines."""

    def first_reply(self, chat: str) -> str:
        """The first message the bot sent to `chat` as a person reads it; where messages arrive as several lines
        (lines_not_messages), every line so far, in order."""
        replies = self.replies(chat)
        if self.lines_not_messages:
            return "\n".join(replies)
        return replies[0] if replies else ""

    @abstractmethod
    def formats(self, chat: str) -> list[set[str]]:
        """Per message the bot sent to `chat`, the formatting it carries: "bold", "italic", "code", "pre"."""

    @abstractmethod
    def prompts(self, chat: str) -> list[str]:
        """Approval ids of the prompts sent to `chat`, in order."""

    @abstractmethod
    def press_approval(self, user: str, approval_id: str, approve: bool) -> None:
        """`user` answers the prompt (presses its button, or writes `/approve ID` / `/deny ID`)."""

    @abstractmethod
    def approval_answers(self, user: str) -> list[str]:
        """What `user` was told after answering prompts (a button's answer, or the reply to the command)."""

    @abstractmethod
    def approval_view(self, chat: str) -> list[Shown]:
        """The approval prompt's messages in `chat`, in order, as a person reads them: per message its text,
        the text of its code blocks joined (markup and the platform's escaping undone), and whether it
        carries the buttons (or the `/approve ID` line where there are none)."""

    def status_lines(self, chat: str) -> list[str]:
        """The status lines the bot posted in `chat` (first text of each, as a person reads it), deleted
        ones included. Only for platforms that edit messages (the others get typing or nothing)."""
        raise NotImplementedError(f"{self.name} shows no status line")

    # failures ---------------------------------------------------------------------------------------------
    @abstractmethod
    def send_attempts(self) -> list[float]:
        """Monotonic times of every attempt to send a message (refused ones too)."""

    @abstractmethod
    def inject_429(self, seconds: int) -> None:
        """The next send is refused as rate-limited, asking to retry after `seconds`."""

    @abstractmethod
    def inject_permanent_error(self) -> None:
        """The next send is refused for good (a bad request, a blocked user)."""

    @abstractmethod
    def break_token(self) -> None:
        """From now on the platform rejects the token the daemon is configured with."""

    @abstractmethod
    def stop_server(self) -> None:
        """The platform goes away (connections refused)."""


def harness_names() -> list[str]:
    """Every module in tests/conformance/platforms/ that defines HARNESS."""
    from tests.conformance import platforms

    return sorted(m.name for m in pkgutil.iter_modules(platforms.__path__) if not m.name.startswith("_"))


def applies(name: str, case: str) -> bool:
    """Whether the conformance case `case` applies to the harness `name`."""
    module = importlib.import_module(f"tests.conformance.platforms.{name}")
    return case not in module.HARNESS.not_applicable


def make_harness(name: str) -> PlatformHarness:
    module = importlib.import_module(f"tests.conformance.platforms.{name}")
    harness: PlatformHarness = module.HARNESS()
    return harness
