"""The ChannelKit: everything an adapter gets besides its settings, built on the kit's contract (adapter.py).

An adapter sees it as `AdapterKit` (adapter.py); the kit's parts (intake, delivery, progress, prompts,
forwarding) each take what they need of it, never this module. `ChannelServices` (services.py) is all a
channel may use of the agent: the inbox, the command router and its command list, the session-key rule,
approvals, events, whether a session is busy, and where a sender's files go.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any, Awaitable, Callable

from clawgate.channels.base import run_alone
from clawgate.config.access import DEFAULT_ACCOUNT, AccessSettings
from clawgate.config.agents import Agent
from clawgate.workspace.users import OWNER

from .access import AccessPolicy, Sender, may_approve
from .adapter import PlatformAdapter, Target, Unconfirmed
from . import markdown
from .approvals import ApprovalPrompts
from .commands import KIT_COMMANDS
from .delivery import Delivery
from .forward import Forwarder, RoutedAdapter
from .intake import Intake
from .keys import parse_session_key, split_chat
from .pairing import PairingStore
from .progress import Progress
from .services import ChannelServices, CommandHandler
from .store import ChannelStore


class ChannelKit:
    """Handed to an adapter's constructor; `attach()` completes it once the adapter exists."""

    def __init__(self, name: str, settings: AccessSettings, services: ChannelServices, store: ChannelStore,
                 pairing: PairingStore, *, account: str = DEFAULT_ACCOUNT) -> None:
        self.name = name  # the channel's name: the platform's ("telegram"), or with its account ("telegram.work")
        self.account = account  # "default", or the name of its [channels.<platform>.accounts.<account>] table
        self.settings = settings
        self.services = services
        self.store = store
        self.pairing = pairing
        self.log = logging.getLogger(f"clawgate.{name}")
        self.markdown = markdown  # split_markdown, to_plain, escape, fence: for the adapter's render()
        self.bot_name: str | None = None  # the adapter sets it once connected (commands addressed `/cmd@bot`)
        self.policy = AccessPolicy.from_settings(settings)
        self.policy.bound.update({n: uid for n, uid in store.owner_ids().items() if n in self.policy.owners})
        self.command_set = frozenset(n for n, _ in [*services.command_list, *KIT_COMMANDS])
        self.routes: dict[str, tuple[str, str | None]] = {}  # session key -> (chat, thread), seen at intake
        self.connected = asyncio.Event()
        self.problem: str | None = None  # why receiving fails while the adapter retries by itself
        # a connection that may exist once per bot (a long-poller, a gateway socket) runs through this:
        # alone in one process; in a fleet the daemon sets the fleet's singleton lease (gateway/fleet.py)
        self.exclusive: Callable[[str, Callable[[], Awaitable[None]]], Awaitable[None]] = run_alone
        # in a fleet, where the platform calls of a process that does not hold the connection go (forward.py)
        self.forward: Forwarder | None = None
        self.holding = False  # this process holds the connection (set by the runner while it does)
        self.singleton = name  # the connection's singleton name (the runner sets it from the adapter)
        self._owner_chats = store.owner_chats()
        self._background: set[asyncio.Task[Any]] = set()
        self.intake = Intake(self)

    def attach(self, adapter: PlatformAdapter) -> None:
        """Build the parts that use the adapter: delivery, progress, approval prompts."""
        self.adapter = adapter
        self.singleton = adapter.singleton_name()
        self.platform = RoutedAdapter(adapter, self.route)  # the adapter, or its holder in a fleet
        caps = adapter.capabilities
        s = self.settings
        self.delivery = Delivery(self.platform, self.store, self.log, retries=s.send_retries,
                                 base_delay=s.retry_base_seconds,
                                 max_retry_after=s.max_retry_after_seconds)
        self.ops = KitOps(self)
        # a run the kit did not see start (replayed after a restart) is found by its key alone: another
        # channel's run in the owner's shared session must not get a status line here
        self.progress = Progress(self.ops, self.services.busy, locate=lambda key: parse_session_key(key, self.name, adapter.split_chat),
                                 typing_interval=s.typing_interval_seconds, edit_interval=s.progress_interval_seconds,
                                 status_messages=s.progress and caps.edit)
        self.prompts = ApprovalPrompts(self.ops, channel=self.name, resolve=self.services.resolve_approval,
                                       owner_chats=self.owner_chats, locate=self.locate, buttons=caps.buttons,
                                       edit=caps.edit)

    @property
    def in_fleet(self) -> bool:
        """This process is one of a fleet's (an HTTP listener then shares its port with the fleet's others)."""
        return self.forward is not None

    @property
    def remote(self) -> bool:
        """Platform calls go to another process: a fleet, a once-per-bot connection, held elsewhere."""
        return self.forward is not None and self.adapter.exclusive_connection and not self.holding

    def route(self) -> tuple[Forwarder, str] | None:
        """Where a platform call goes now: None to the local adapter, else the fleet's Forwarder and the
        connection's singleton name (RoutedAdapter asks at every call: the holder changes over time)."""
        return (self.forward, self.singleton) if self.forward is not None and self.remote else None

    # what adapters call ------------------------------------------------------------------------
    async def receive(self, incoming: Any) -> bool:
        """Hand one platform message in; returns once the decision is durable (True: a new inbox message)."""
        return await self.intake.receive(incoming)

    async def approval_answer(self, approval_id: str, sender: Sender, approved: bool, *,
                              chat_id: str | None = None) -> str:
        """A button press: the line to show the presser. `chat_id`: where the pressed prompt is."""
        return self.prompts.answer(approval_id, owner=self.may_answer(approval_id, sender), approved=approved,
                                   chat_id=chat_id)

    def may_answer(self, approval_id: str, sender: Sender) -> bool:
        """Whether `sender` may answer an approval request: an owner of the agent whose run asked (the agent's
        own `owners` where it names them, else the channel's owners)."""
        key, agent_of_key = self.prompts.session_of(approval_id), self.services.agent_of_key
        if key and agent_of_key is not None:
            try:
                agent = agent_of_key(key)
            except ValueError:  # a session of an agent no longer configured: nobody here answers for it
                return False
            if agent.config.owners is not None:
                return agent.owned_by(self.name, sender.user_id)
        return may_approve(self.policy, sender)

    def report_problem(self, problem: str | None) -> None:
        """For an adapter whose library retries by itself (a polling loop): why receiving fails now, or None
        once it works again. Shown as the state "retrying" with this reason."""
        if problem != self.problem:
            self.problem = problem

    def command_names(self) -> list[tuple[str, str]]:
        """(name, description) of the chat commands, for native registration (`/approve` and `/deny`
        only where approvals are not buttons)."""
        buttons = getattr(self, "adapter", None) is not None and self.adapter.capabilities.buttons
        return [*self.services.command_list, *([] if buttons else KIT_COMMANDS)]

    # used by the kit's parts -----------------------------------------------------------------------
    def locate(self, key: str) -> tuple[str, str | None] | None:
        """(chat, thread) of one of this channel's session keys, or None for another channel's."""
        split = self.adapter.split_chat if getattr(self, "adapter", None) is not None else split_chat
        return self.routes.get(key) or parse_session_key(key, self.name, split)

    def owner_chats(self, session_key: str = "") -> list[str]:
        """Private chats where owners are asked about guests' requests: of the run's agent's own `owners` where
        it names them (docs/agents.md), else of the channel's owners."""
        if self.remote:  # the holder learns owners' chats at intake; this process reads them back
            self._owner_chats = self.store.owner_chats()
        agent = self._agent_of(session_key)
        if agent is not None and agent.config.owners is not None:
            chats = {chat for user, chat in self._owner_chats.items() if agent.owned_by(self.name, user)}
            platform = self.name.split(".", 1)[0]
            named = [entry.split(":", 1)[1] for entry in agent.config.owners if entry.split(":", 1)[0] in (self.name, platform)]
            return sorted(chats | self._reachable(named))
        # the channel's owners only (an agent's owner's chat is remembered beside theirs)
        chats = {chat for user, chat in self._owner_chats.items()  # ids spelled as AccessPolicy.is_owner reads them
                 if user.strip().lstrip("@").lower() in self.policy.owners or user in self.policy.bound.values()}
        return sorted(chats | self._reachable([*self.policy.owners, *self.policy.bound.values()]))

    def _reachable(self, owners: list[str]) -> set[str]:
        """The private chats the adapter reaches these owner entries or ids at before they write (its platform's
        rule: a Telegram user id, an email address, an IRC account, a Signal number or UUID, a WhatsApp number)."""
        return {chat for owner in owners if (chat := self.adapter.owner_chat(owner))}

    def _agent_of(self, session_key: str) -> "Agent | None":
        """The agent of one of this channel's sessions (None: a daemon of one agent, or one no longer configured)."""
        agent_of_key = self.services.agent_of_key
        if not session_key or agent_of_key is None:
            return None
        try:
            return agent_of_key(session_key)
        except ValueError:
            return None

    def remember_owner_chat(self, user_id: str, chat_id: str) -> None:
        if self._owner_chats.get(user_id) != chat_id:
            self._owner_chats[user_id] = chat_id
            self.store.set_owner_chat(user_id, chat_id)

    def user_of(self, who: Sender) -> str:
        """Whose workspace this sender works in: OWNER, or their own as a guest (the loop's rule)."""
        return OWNER if self.policy.is_owner(who) else f"{self.name}:{who.user_id}"

    def workspace_of(self, who: Sender, owner: bool, session_key: str = "") -> Path | None:
        """Where a person's received files go: their workspace in the agent of `session_key` (docs/agents.md)."""
        workspaces = self.services.workspaces
        spaces = workspaces.of(session_key) if workspaces is not None else None
        if spaces is None or (owner and spaces is workspaces):
            return self.services.workspace
        # a guest here, even the channel's owner where the agent names its own owners
        return spaces.owner.root if owner else spaces.guard(f"{self.name}:{who.user_id}").root

    def say(self, chat_id: str, text: str, thread_id: str | None, reply_to: str | None = None) -> None:
        """A control message (refusal, command answer): plain text, which may quote what the model or a user
        chose (a job's arguments, a path), so it is escaped before the platform renders it: it reads as
        written and can make no link or formatting. Sent in the background, never blocking intake.
        `reply_to`: the platform message it answers (a command), so it lands on that one and no other."""
        self.spawn(self.ops.post(chat_id, markdown.escape(text), thread_id, reply_to))

    def spawn(self, coro: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def tell_paired(self) -> None:
        """Tell users the owner approved (the CLI writes the database; the daemon notices within seconds)."""
        while True:
            await asyncio.sleep(self.settings.pairing_check_seconds)
            if not self.connected.is_set() or self.remote:  # once per fleet: the connection's holder tells
                continue
            for user_id, chat_id in self.pairing.unnotified(self.name):
                if not self.pairing.mark_notified(self.name, user_id):  # at most once, even if the send fails
                    continue  # another process of the fleet told them
                await self.ops.post(chat_id, "✅ You're approved. Send me a message whenever you like.", None)

    async def close(self) -> None:
        await self.progress.close()
        await self.prompts.close()
        background, self._background = list(self._background), set()
        for task in background:
            task.cancel()
        await asyncio.gather(*background, return_exceptions=True)


class KitOps:
    """Best-effort chat operations on the adapter for progress, prompts and control messages: a
    failure (or a bug in the adapter) is logged, never raised."""

    def __init__(self, kit: ChannelKit) -> None:
        self.kit = kit

    async def _try(self, what: str, call: Callable[[], Awaitable[Any]]) -> Any:
        try:
            return await call()
        except (Unconfirmed, NotImplementedError) as exc:
            self.kit.log.info("%s not done: %s", what, exc)
        except Exception as exc:  # isolation: a failing platform call never breaks the kit's loops
            self.kit.log.info("%s not done: %s", what, getattr(exc, "message", exc))
        return None

    async def typing(self, chat_id: str, thread_id: str | None) -> None:
        if self.kit.adapter.capabilities.typing:
            await self._try("typing", lambda: self.kit.platform.typing(Target(chat_id, thread_id)))

    async def post(self, chat_id: str, text: str, thread_id: str | None, reply_to: str | None = None) -> str | None:
        """`text` is Markdown (control lines, status lines, prompts): rendered for the platform like a reply,
        so what the platform reads as markup (Slack's `<...>` and `&`) is escaped; the first message's id.
        `reply_to` goes on the first chunk (the message it answers)."""
        first: str | None = None
        for chunk in self.kit.adapter.render(text):
            target = Target(chat_id, thread_id, None if first else reply_to)
            result = await self._try("send", lambda: self.kit.delivery.send_chunk(target, chunk))
            if result is None:
                return None
            first = first or str(result)
        return first

    async def edit(self, chat_id: str, message_id: str, text: str) -> bool:
        """Replace a message with Markdown `text` (one message's worth: a status line, a prompt's last part)."""
        rendered = self.kit.adapter.render(text)[0]

        async def call() -> bool:
            await self.kit.platform.edit_text(Target(chat_id), message_id, rendered)
            return True
        return bool(await self._try("edit", call))

    def fits(self, markdown: str) -> bool:
        """`markdown` renders as one message that a prompt with buttons can carry (capabilities.prompt_chars)."""
        chunks = self.kit.adapter.render(markdown)
        limit = self.kit.adapter.capabilities.prompt_chars
        return len(chunks) == 1 and (limit <= 0 or len(chunks[0]) <= limit)

    async def delete(self, chat_id: str, message_id: str) -> None:
        await self._try("delete", lambda: self.kit.platform.delete(Target(chat_id), message_id))

    async def ask(self, chat_id: str, thread_id: str | None, approval_id: str, markdown: str) -> str | None:
        """One message with the buttons: `markdown` fits it (ApprovalPrompts splits by fits()); were it still
        more than one chunk, the others go first, so the buttons stay under the end and nothing is cut."""
        *before, rendered = self.kit.adapter.render(markdown)
        for chunk in before:
            if await self._try("approval prompt", lambda: self.kit.delivery.send_chunk(
                    Target(chat_id, thread_id), chunk)) is None:
                return None
        result = await self._try("approval prompt", lambda: self.kit.platform.send_approval(
            Target(chat_id, thread_id), approval_id, rendered))
        return None if result is None else str(result)

    async def replace(self, chat_id: str, message_id: str, markdown: str) -> bool:
        return await self.edit(chat_id, message_id, markdown)


__all__ = ["ChannelKit", "ChannelServices", "CommandHandler", "KitOps"]
