"""From a platform message to the agent's inbox: the one road every channel's messages take.

In order: dropped (a bot, not addressed to us, another bot's command), decided by access (refused
once, paired, ignored), a command (answered at once by the command router, at most once per
platform message), or content (files fetched into the sender's workspace, within limits) published
to the bus with an id stable across redelivery (`<channel>:<chat>:<message>`), which the inbox
answers once. `receive` returns only once its decision is durable, so the adapter acknowledges
the platform (advances its cursor, acks the envelope) only after that.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any, Awaitable, Protocol

from clawgate.agent.bus import InboundMessage
from clawgate.config.access import AccessSettings, split_channel_name
from clawgate.config.agents import Agent, Place
from clawgate.workspace.users import OWNER

from .access import AccessPolicy, Sender, Verdict, decide
from .adapter import Incoming, PlatformAdapter
from .approvals import ApprovalPrompts
from .commands import KIT_COMMANDS, for_another_bot, parse_command
from .files import Received, receive_files
from .keys import OWNER_SESSION, session_key
from .pairing import PairingStore
from .progress import Progress
from .services import ChannelServices
from .store import ChannelStore

REFUSAL = "Sorry, this is a private assistant and you are not on its list."
NOT_TEXT = "I can read text, photos and documents; I can't read this kind of message."
FETCH_FAILED = "I couldn't fetch that file; please send it again."


class Poster(Protocol):
    """The kit's best-effort send of a control message (KitOps): the first message's id, None if not sent."""

    async def post(self, chat_id: str, text: str, thread_id: str | None,
                   reply_to: str | None = None) -> str | None: ...


class IntakeKit(Protocol):
    """What intake uses of its kit (ChannelKit implements it): the kit is built on intake, not the reverse."""

    name: str
    account: str
    settings: AccessSettings
    services: ChannelServices
    store: ChannelStore
    pairing: PairingStore
    policy: AccessPolicy
    log: logging.Logger
    bot_name: str | None
    command_set: frozenset[str]
    routes: dict[str, tuple[str, str | None]]
    adapter: PlatformAdapter
    progress: Progress
    prompts: ApprovalPrompts

    @property
    def ops(self) -> Poster: ...

    def say(self, chat_id: str, text: str, thread_id: str | None, reply_to: str | None = None) -> None: ...
    def spawn(self, coro: Awaitable[Any]) -> None: ...
    def remember_owner_chat(self, user_id: str, chat_id: str) -> None: ...
    def user_of(self, who: Sender) -> str: ...
    def workspace_of(self, who: Sender, owner: bool) -> Path | None: ...


class Intake:
    def __init__(self, kit: IntakeKit) -> None:
        self.kit = kit
        self._impostors: set[str] = set()  # ids seen writing with an owner's username after it was bound

    async def receive(self, incoming: Incoming) -> bool:
        """Decide what `incoming` is; True when it entered the inbox as a new message."""
        kit = self.kit
        if incoming.sender_is_bot or for_another_bot(incoming.text, kit.bot_name):
            return False
        command = parse_command(incoming.text, kit.command_set, kit.bot_name)
        if not (incoming.private or incoming.addressed or command):
            return False  # a group message for the people there (a bare /command is for every bot, us too)
        who = incoming.sender
        self._bind_owner(who)
        verdict = decide(kit.policy, who, private=incoming.private,
                         paired=kit.pairing.is_paired(kit.name, who.user_id),
                         refused_before=kit.store.refused_before(who.user_id))
        if verdict is Verdict.PAIR:
            self._pair(who, incoming.chat_id, incoming.message_id)
            return False
        if verdict is Verdict.REFUSE:
            kit.store.mark_refused(who.user_id)
            kit.log.info("refused user %s (not allowed by policy)", who.user_id)
            kit.say(incoming.chat_id, REFUSAL, incoming.thread_id, incoming.message_id)
            return False
        if verdict is Verdict.IGNORE:
            return False
        owner = kit.policy.is_owner(who)
        if owner and incoming.private:
            kit.remember_owner_chat(who.user_id, incoming.chat_id)
        agent = self.agent_of(incoming, who)  # after access: bindings never decide who gets in
        if agent is not None and agent.config.owners is not None:  # the agent's own owners replace the channel's
            owner = agent.owned_by(kit.name, who.user_id)
            if owner and incoming.private:  # where its guests' approval requests are asked
                kit.remember_owner_chat(who.user_id, incoming.chat_id)
        key = self.session_key(incoming, owner)
        if agent is not None:
            key = kit.services.check_session_key(agent.session_key(key))
        kit.routes[key] = (incoming.chat_id, incoming.thread_id)
        if command is not None:
            if kit.store.first_time(f"command:{incoming.chat_id}:{incoming.message_id}"):
                reply = self._command(command, key, who, owner, incoming)
                if reply:  # on the command's own message: two people's commands never swap answers
                    kit.say(incoming.chat_id, reply, incoming.thread_id, incoming.message_id)
            return False
        received = await self._content(incoming, who, owner, key)
        if received.refusal or not received.text:
            kit.say(incoming.chat_id, received.refusal or NOT_TEXT, incoming.thread_id, incoming.message_id)
            return False
        inbound = InboundMessage(
            id=f"{kit.name}:{incoming.chat_id}:{incoming.message_id}", channel=kit.name, chat_id=incoming.chat_id,
            sender_id=who.user_id, session_key=key, text=received.text, attachments=received.attachments,
            metadata={"message_id": incoming.message_id, "thread_id": incoming.thread_id, "username": who.username,
                      **incoming.metadata,  # platform extras; the kit's own decisions below, never an adapter's
                      "private": incoming.private, "owner": owner,
                      **({"agent": agent.id} if agent is not None else {})},  # the route, stored with the message
        )
        accepted = await kit.services.intake.publish_inbound_async(inbound)
        await kit.services.intake.durable()  # before the adapter acknowledges the platform
        if accepted:
            kit.progress.started(key, incoming.chat_id, incoming.thread_id, inbound.id)
        return accepted

    def agent_of(self, incoming: Incoming, who: Sender) -> Agent | None:
        """The agent this message goes to, by the bindings (None: a daemon built without a roster).
        The peer is the person in a private chat, else the group/room/channel."""
        route = self.kit.services.route
        if route is None:
            return None
        meta = incoming.metadata
        roles = meta.get("role_ids")
        return route(Place(
            channel=split_channel_name(self.kit.name)[0], account=self.kit.account,  # "telegram", "work"
            peer=who.user_id if incoming.private else incoming.chat_id,
            guild=_text(meta.get("guild_id")), roles=frozenset(str(r) for r in roles) if isinstance(roles, list) else frozenset(),
            team=_text(meta.get("team_id")), room=_text(meta.get("room_id"))))

    def session_key(self, incoming: Incoming, owner: bool) -> str:
        """`<channel>:<chat>[:<thread>]` (a chat that moved keeps its first id), or the owner's shared key."""
        kit = self.kit
        if owner and incoming.private and kit.services.owner_shared_session:
            return OWNER_SESSION
        chat = kit.store.session_chat(incoming.chat_id)
        return kit.services.check_session_key(session_key(kit.name, chat, incoming.thread_id))

    def _command(self, command: tuple[str, str], key: str, who: Sender, owner: bool, incoming: Incoming) -> str | None:
        """`incoming.private` decides whose rights apply: in a shared conversation a guest's /stop
        reaches only their own work and /new is the owner's (agent/commands.py)."""
        name, args = command
        if name in ("approve", "deny"):
            approval_id = args.split()[0] if args.split() else ""
            if not approval_id:
                return f"Say which request: /{name} ID (the id is in the prompt)."
            return self.kit.prompts.answer(approval_id, owner=self.kit.may_answer(approval_id, who),
                                           approved=name == "approve")
        buttons = self.kit.adapter.capabilities.buttons
        user = self.kit.user_of(who) if owner == self.kit.policy.is_owner(who) else \
            (OWNER if owner else f"{self.kit.name}:{who.user_id}")  # an agent's own owners decided `owner`
        return self.kit.services.commands(name, key, args, user, shared=not incoming.private,
                                          reply_to=incoming.message_id, extra=[] if buttons else KIT_COMMANDS)

    async def _content(self, incoming: Incoming, who: Sender, owner: bool, key: str = "") -> Received:
        if not incoming.files:
            return Received(text=incoming.text) if not incoming.unreadable else Received()
        kit = self.kit
        settings = kit.settings
        try:
            return await receive_files(
                incoming.files, caption=incoming.text, message_id=incoming.message_id,
                workspace=kit.workspace_of(who, owner, key), files_dir=settings.files_dir,
                max_file_bytes=settings.max_file_bytes, limit_key=f"channels.{kit.name}.max_file_bytes",
                transcription=getattr(settings, "transcription", None))
        except Exception as exc:  # a platform's download failing in any way must not stop the channel
            kit.log.warning("could not fetch the file of message %s in chat %s: %s", incoming.message_id,
                            incoming.chat_id, exc)
            return Received(refusal=FETCH_FAILED)

    def _bind_owner(self, who: Sender) -> None:
        """First contact of an owner named by username: keep their id, which alone is the owner from now on."""
        kit = self.kit
        name = kit.policy.claim(who)
        if name is None:
            if who.username and who.username.lower().lstrip("@") in kit.policy.owners \
                    and not kit.policy.is_owner(who) and who.user_id not in self._impostors:
                self._impostors.add(who.user_id)
                kit.log.warning("user %s writes as @%s, an owner's username, but that owner is user %s; treated as "
                                "not the owner", who.user_id, who.username,
                                kit.policy.bound.get(who.username.lower().lstrip("@")))
            return
        kit.store.bind_owner(name, who.user_id)
        kit.policy.bound[name] = who.user_id
        kit.log.info("owner @%s is user %s (bound at first contact; the username alone no longer makes an owner)",
                     name, who.user_id)

    def _pair(self, who: Sender, chat_id: str, reply_to: str | None = None) -> None:
        kit = self.kit
        request = kit.pairing.request(kit.name, who.user_id, who.username, chat_id)
        if request.replaced:  # pushed out by a flood of newer requests: once, say when to ask again
            if not request.code_sent:
                kit.pairing.mark_code_sent(kit.name, request.code)
                wait = max(1, math.ceil((request.expires_at - kit.pairing.clock()) / 60))
                kit.say(chat_id, "This is a private assistant. Many access requests arrived after yours, so "
                                 f"your code expired early; send a message again in {wait} minutes for a new one.", None,
                        reply_to)
            return
        if request.code_sent:
            return  # one reply per code: further messages stay unanswered until the owner decides
        kit.log.info("pairing code issued to user %s; approve with `clawgate pairing approve %s CODE`",
                     who.user_id, kit.name)
        minutes = round(kit.settings.pairing_ttl_seconds / 60)
        text = (f"Hi! This is a private assistant. To get access, send this code to its owner:\n\n{request.code}\n\n"
                f"They approve it with: clawgate pairing approve {kit.name} {request.code}\n"
                f"The code is valid for {minutes} minutes.")
        kit.pairing.mark_code_sent(kit.name, request.code)  # before sending: a quick second message stays silent

        async def send_code() -> None:
            if await kit.ops.post(chat_id, text, None, reply_to) is None:
                kit.pairing.mark_code_sent(kit.name, request.code, False)  # not delivered: the next message retries

        kit.spawn(send_code())


def _text(value: object) -> str | None:
    return str(value) if value not in (None, "") else None


__all__ = ["FETCH_FAILED", "Intake", "IntakeKit", "NOT_TEXT", "REFUSAL"]
