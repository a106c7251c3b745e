"""The kit's contract: what a platform implements (PlatformAdapter) and what it may call back (AdapterKit).

A channel package is only its platform's protocol: connect, receive events (turned into
`Incoming`), render Markdown for the platform, send one chunk. Access, pairing, commands,
dedupe, files, retries, chunk progress, typing/status and approval prompts are the kit's
(channels/kit/), written once. How to write one: docs/channels.md ("The kit's contract").

This module is the bottom of the kit: it imports none of the kit's services (kit, intake, delivery,
forward, files ...), which all build on it; tests/unit/test_import_cycles.py keeps it so.
"""

from __future__ import annotations

import hashlib
import logging
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any, AsyncIterator, Awaitable, Callable, ClassVar, Literal, Protocol

from pydantic import BaseModel

from clawgate.channels.base import DeliveryError
from clawgate.config.access import AccessSettings

from .access import AccessPolicy, Sender
from .keys import split_chat
from .pairing import PairingStore
from .store import ChannelStore

if TYPE_CHECKING:
    from .probe import ProbeResult


@dataclass(frozen=True)
class Capabilities:
    """What the platform offers; the kit uses what is there and falls back where it is not."""

    max_chars: int  # one message's limit after rendering; 0: no limit (email)
    edit: bool = False  # edit_text / delete exist: the status line is edited in place
    typing: bool = False
    buttons: bool = False  # send_approval() shows buttons; the adapter calls kit.approval_answer()
    threads: bool = False
    native_commands: bool = False  # register_commands() exists
    dm_is_user_id: bool = False  # a user's id also names the private chat with them (PlatformAdapter.owner_chat)
    files: bool = False  # send_file() exists: the agent's send_file tool reaches the chat as an attachment
    max_file_bytes: int = 0  # the largest file send_file() may carry (with files)
    prompt_chars: int = 0  # the rendered text a send_approval() message holds, if less than max_chars (0: max_chars)


@dataclass(frozen=True)
class Target:
    """Where a message goes. `reply_to` is set on the first chunk of a reply only (the message it answers).

    `send_key` is the same for every attempt at sending one part of one reply, across restarts: a
    platform with an idempotency key (Matrix's transaction id, Mattermost's `pending_post_id`, Discord's
    enforced nonce, Feishu's `uuid`, Google Chat's `requestId` and `messageId`) is given it, so a part sent again after a crash between the send and its record is
    recognised by the platform instead of posted twice. None for what is not a reply's part."""

    chat_id: str
    thread_id: str | None = None
    reply_to: str | None = None
    send_key: str | None = None

    def key_digest(self, *scope: str) -> str | None:
        """The send_key as the platform's idempotency field is made of (`send_key_digest`); None without one."""
        return send_key_digest(self.send_key, *scope) if self.send_key else None


def send_key_digest(send_key: str, *scope: str) -> str:
    """A send_key as 64 hex characters (after `scope`, joined by NULs: Matrix scopes it by room), which each
    adapter cuts or shapes to its platform's field; the same key gives the same digest in every version,
    so a part sent again after an upgrade is still recognised."""
    return hashlib.sha256("\0".join((*scope, send_key)).encode()).hexdigest()


@dataclass(frozen=True)
class IncomingFile:
    """A file a message carries, fetched only once the sender was admitted (strangers cost no download).

    `kind`: "file" is saved in the sender's workspace inbox; "image" goes to the model as an image
    (too large: a refusal); "voice" is transcribed when transcription is set up, else refused.
    `stream`: the body in pieces, where the download's size is not known or not trusted (a body without
    Content-Length): the kit reads it no further than its limit and closes it. Without it the kit calls
    `fetch`, which must then bound what it reads itself (a declared size the kit checks first, or a cap)."""

    name: str | None
    size: int | None
    mime: str | None
    fetch: Callable[[], Awaitable[bytes]]
    kind: Literal["file", "image", "voice"] = "file"
    stream: Callable[[], AsyncIterator[bytes]] | None = None


@dataclass(frozen=True)
class Incoming:
    """One platform message, normalised. The adapter fills it; the kit decides everything else."""

    message_id: str  # the platform's id, stable across redelivery (the dedupe key)
    chat_id: str
    sender: Sender
    private: bool  # a DM / 1:1 room
    text: str  # the bot's own mention already removed by the adapter
    addressed: bool  # private, or the bot was mentioned / replied to (platform rules)
    thread_id: str | None = None
    files: tuple[IncomingFile, ...] = ()
    sender_is_bot: bool = False  # dropped by the kit (no bot loops)
    metadata: dict[str, Any] = field(default_factory=dict)  # platform extras kept on the InboundMessage
    unreadable: bool = False  # a kind of message the platform sent that carries nothing readable (a sticker)


class ChannelAuthError(Exception):
    """The platform refuses our credentials: one line naming the fix; not retried until a restart."""


class ChannelUnavailable(Exception):
    """The platform is down or unreachable: the runner retries with backoff."""


class Unconfirmed(Exception):
    """A send may or may not have reached the platform (a timeout after the request went out):
    the kit counts the chunk as sent rather than risk a duplicate."""


class AdapterKit(Protocol):
    """What an adapter may use of the kit it is given (ChannelKit implements it): nothing else.

    The kit's services (intake, delivery, progress, prompts, forwarding) are the kit's own business;
    an adapter hands messages in with `receive`, button presses with `approval_answer`, and keeps its
    platform state (cursors, ids it must remember) in `store`."""

    name: str  # the channel's name ("discord", "discord.work")
    account: str  # its bot account: "default", or the name of its [channels.<platform>.accounts.<account>] table
    log: logging.Logger
    store: ChannelStore  # this channel's durable key-value state, cursor and dedupe marks
    pairing: PairingStore  # read-only use: is a user paired (for platform-side checks before `receive`)
    policy: AccessPolicy  # read-only use: who owns the bot, the allow lists
    bot_name: str | None  # the adapter sets it once connected (commands addressed `/cmd@bot`)
    # run `body` as the once-per-bot connection: alone in one process, under the fleet's singleton lease
    exclusive: Callable[[str, Callable[[], Awaitable[None]]], Awaitable[None]]

    @property
    def in_fleet(self) -> bool:
        """This process is one of a fleet's (docs/fleet.md)."""
        ...

    @property
    def markdown(self) -> ModuleType:
        """clawgate.channels.kit.markdown (split_markdown, to_plain, escape), for render()."""
        ...

    async def receive(self, incoming: Incoming) -> bool:
        """Hand one platform message in; returns once the decision is durable (acknowledge only then)."""
        ...

    async def approval_answer(self, approval_id: str, sender: Sender, approved: bool, *,
                              chat_id: str | None = None) -> str:
        """A button press on an approval prompt: the line to show the presser."""
        ...

    def report_problem(self, problem: str | None) -> None:
        """Why receiving fails while the platform library retries by itself; None once it works again."""
        ...

    def command_names(self) -> list[tuple[str, str]]:
        """(name, description) of the chat commands, for native registration."""
        ...

    def spawn(self, coro: Awaitable[Any]) -> None:
        """Run `coro` in the background, owned (and cancelled on close) by the kit."""
        ...


class PlatformAdapter(ABC):
    name: ClassVar[str]  # "discord": also the entry-point name and the [channels.<name>] section
    settings_model: ClassVar[type[BaseModel]]  # subclass of AccessSettings
    capabilities: ClassVar[Capabilities]
    # The connection exists once per bot (a Gateway socket, a Socket Mode socket, a Matrix device): in a
    # fleet the runner connects only in the process holding the channel's singleton lease and the others
    # forward their sends to it (channels/kit/forward.py). False: this adapter sends from any process and
    # guards its own receiver (Telegram's poller takes its own lease).
    exclusive_connection: ClassVar[bool] = True
    # The settings that name the bot's account, hashed into the singleton's name so every process of a
    # fleet computes the same one before connecting; empty: all the adapter's own settings.
    account_fields: ClassVar[tuple[str, ...]] = ()

    def __init__(self, settings: BaseModel, kit: AdapterKit) -> None:
        self.settings = settings
        self.kit = kit

    @classmethod
    def enabled(cls, settings: BaseModel) -> bool:
        """Whether to run with these settings: `enabled` when set, else on once the section exists.
        Telegram overrides this (on when a token is present)."""
        return getattr(settings, "enabled", None) is not False

    @classmethod
    async def probe(cls, settings: BaseModel) -> "ProbeResult | None":
        """Log in once with these settings, as the daemon would, and say as whom (`clawgate doctor`, with or
        without a running daemon; the caller bounds it with a timeout). No kit, no state written, nothing
        received. None: this channel has no probe (doctor then only validates its settings)."""
        return None

    def owner_chat(self, owner: str) -> str | None:
        """The private chat with the person an `owner` entry (or the id a username entry was bound to) names,
        where this platform reaches them there before they ever write: approvals asked of the owner and
        heartbeat deliveries go to it. Entries are spelled as the access lists keep them (lower case, no
        leading '@'). None: the kit learns the chat when they first write. Default: the entry itself where
        a user's id names the private chat with them (capabilities.dm_is_user_id)."""
        return owner if self.capabilities.dm_is_user_id else None

    @staticmethod
    def split_chat(rest: str) -> tuple[str, str | None] | None:
        """(chat id, thread id) from a session key's part after `<channel>:` (the kit's keys.session_key).
        The default fits ids without ':'; a platform whose ids contain ':' reads them its own way. Used
        to find the chat of a run the kit did not see start (replayed, or taken in by another process)."""
        return split_chat(rest)

    @abstractmethod
    async def connect(self) -> None:
        """Authenticate and get ready to receive. Raise ChannelAuthError / ChannelUnavailable."""

    @abstractmethod
    async def run(self) -> None:
        """Receive until cancelled: for each event build Incoming, `await kit.receive(incoming)`, and
        acknowledge the platform only after that returned. Raise ChannelUnavailable on a lost connection."""

    @abstractmethod
    async def disconnect(self) -> None:
        """Release clients and sockets; safe to call twice and after a failed connect."""

    @abstractmethod
    def render(self, markdown: str) -> list[str]:
        """Markdown -> the platform's format, chunks under capabilities.max_chars (kit.markdown.split_markdown
        first, then a well-kept converter per chunk). A chunk may be a str subclass carrying more (entities)."""

    @abstractmethod
    async def send_text(self, target: Target, text: str) -> str:
        """Send one rendered chunk; return the platform message id.
        Raise DeliveryError(permanent=..., retry_after=...) or Unconfirmed."""

    # optional, per capabilities --------------------------------------------------------------
    async def typing(self, target: Target) -> None:
        """Show 'typing…' (capabilities.typing)."""
        return None

    async def edit_text(self, target: Target, message_id: str, text: str) -> None:
        """Replace a sent message's text (capabilities.edit); buttons on it go away."""
        raise NotImplementedError

    async def delete(self, target: Target, message_id: str) -> None:
        """Delete a sent message (capabilities.edit)."""
        raise NotImplementedError

    async def send_file(self, target: Target, name: str, data: bytes, caption: str) -> str:
        """Send one file (capabilities.files), `caption` (plain text, may be empty) with it; return the
        platform message id. Raise DeliveryError(permanent=..., retry_after=...) or Unconfirmed."""
        raise NotImplementedError

    async def send_approval(self, target: Target, approval_id: str, text: str) -> str | None:
        """Send `text` with Approve / Deny buttons (capabilities.buttons); return the message id."""
        raise NotImplementedError

    async def register_commands(self, commands: list[tuple[str, str]]) -> None:
        """Register the chat commands natively (capabilities.native_commands)."""
        return None

    def status(self) -> dict[str, Any]:
        """Extra facts for `clawgate channels` / status (e.g. the bot's name)."""
        return {}

    def singleton_name(self) -> str:
        """`<channel>:<12 hex of sha256 over the account's settings>`: the same on every process of a fleet
        (they share the config), different per bot, and no secret in it (a lease name shows in status)."""
        own = [f for f in type(self.settings).model_fields if f not in AccessSettings.model_fields]  # not the kit's
        fields = self.account_fields or tuple(own)
        values = []
        for field_name in fields:
            value = getattr(self.settings, field_name, None)
            value = value.get_secret_value() if hasattr(value, "get_secret_value") else value
            values.append(f"{field_name}={value!r}")
        return f"{self.name}:{hashlib.sha256(chr(0).join(values).encode()).hexdigest()[:12]}"


__all__ = ["AdapterKit", "Capabilities", "ChannelAuthError", "ChannelUnavailable", "DeliveryError", "Incoming", "IncomingFile",
           "PlatformAdapter", "Target", "Unconfirmed", "send_key_digest"]
