"""The Telegram adapter: start / stop / send, and the route from an update to the bus.

An update becomes, in this order: ignored (not for us), refused or paired (access), a
command (answered by the shared command router), or an InboundMessage published to the bus
with an id stable across redelivery (`telegram:<chat>:<message>`). Everything the user sees
while the agent works (typing, status, approval buttons) hangs off the event hub, not the loop.
The channel reaches the agent only through its Services.
"""

from __future__ import annotations

import asyncio
import logging
import math
import sqlite3
from pathlib import Path
from typing import Any, Awaitable
from urllib.parse import urlsplit

from telegram import Bot, BotCommand, CallbackQuery, Message, Update
from telegram.constants import ChatAction, ParseMode
from telegram.error import InvalidToken, NetworkError, TelegramError
from telegram.request import HTTPXRequest

from clawgate.agent.bus import InboundMessage, OutboundMessage
from clawgate.agent.commands import COMMANDS
from clawgate.agent.services import Services
from clawgate.channels.base import Channel, DeliveryError
from clawgate.config.schema import TelegramSettings
from clawgate.workspace.users import OWNER, Workspaces

from .access import AccessPolicy, Sender as Who, Verdict, decide, may_approve, parse_session_key, read_message, session_key
from .approvals import ApprovalPrompts
from .delivery import Sender, Unconfirmed
from .media import Received, receive
from .pairing import PairingStore
from .polling import ALLOWED_UPDATES, Poller
from .progress import Progress
from .render import render
from .state import ChannelState
from .webhook import WebhookServer, default_secret

log = logging.getLogger("clawgate.telegram")
NAME = "telegram"
DEFAULT_BASE_URL = "https://api.telegram.org/bot"
REFUSAL = "Sorry, this is a private assistant and you are not on its list."
NOT_TEXT = "I can read text, photos and documents; I can't read this kind of message."
FETCH_FAILED = "I couldn't fetch that file from Telegram; please send it again."


class ChannelError(Exception):
    """The channel cannot run as configured; the message names the fix."""


def make_bot(settings: TelegramSettings) -> Bot:
    timeout = settings.request_timeout_seconds
    base_url = settings.base_url or DEFAULT_BASE_URL
    return Bot(
        settings.token or "",
        base_url=base_url,
        # files are served beside the API: https://api.telegram.org/file/bot<token>/<path>; the
        # config keeps base_url ending in /bot whichever way it was written
        base_file_url=base_url.removesuffix("bot") + "file/bot",
        # 16 connections is plenty (Telegram allows ~30 messages/s) and measurably faster than a
        # big pool under load; a send waits for a free connection rather than failing.
        request=HTTPXRequest(connection_pool_size=16, read_timeout=timeout, write_timeout=timeout,
                             connect_timeout=10.0, pool_timeout=None),
        # getUpdates adds its long-poll timeout to this read timeout.
        get_updates_request=HTTPXRequest(connection_pool_size=2, read_timeout=timeout, connect_timeout=10.0,
                                         pool_timeout=10.0),
    )


class TelegramChannel(Channel):
    name = NAME

    def __init__(self, settings: TelegramSettings, services: Services, db: sqlite3.Connection, *,
                 bot: Bot | None = None, workspace: Path | None = None, workspaces: Workspaces | None = None) -> None:
        """`db`: the state database (agent/core/statedb.py) for the channel's own tables and pairing;
        `workspace`: where the owner's documents are saved (settings.files_dir inside it); `workspaces`:
        each guest's own workspace, where theirs go (without it, `workspace`)."""
        self.settings = settings
        self.workspace = workspace
        self.workspaces = workspaces
        self.services = services
        self.policy = AccessPolicy.build(settings.dm_policy, settings.group_policy, settings.allow_from,
                                         settings.owner)
        self.state = ChannelState(db)
        self._impostors: set[str] = set()  # ids seen writing with an owner's username after it was bound
        self.policy.bound.update({name: uid for name, uid in self.state.owner_ids().items() if name in self.policy.owners})
        self.pairing = PairingStore(db, ttl_seconds=settings.pairing_ttl_seconds,
                                    max_pending=settings.pairing_max_pending,
                                    interval_seconds=settings.pairing_request_interval_seconds)
        self.bot = bot or make_bot(settings)
        self.sender = Sender(self.bot, retries=settings.send_retries, base_delay=settings.retry_base_seconds,
                             on_migrated=self.state.record_migration)
        self.ops = _ChatOps(self.bot, self.sender)
        self.progress = Progress(self.ops, services.sessions.busy, typing_interval=settings.typing_interval_seconds,
                                 edit_interval=settings.progress_interval_seconds, status_messages=settings.progress)
        self.prompts = ApprovalPrompts(self.ops, resolve=services.approvals.resolve, may_approve=self._may_approve,
                                       answer=self._answer, owner_chats=self.policy.owner_chats())
        self.poller: Poller | None = None
        self.webhook: WebhookServer | None = None
        self._connected = asyncio.Event()
        self._tasks: list[asyncio.Task[Any]] = []
        self._background: set[asyncio.Task[Any]] = set()
        self._unsubscribe: list[Any] = []

    # lifecycle -----------------------------------------------------------------------------
    async def start(self) -> None:
        """Connect (getMe, webhook off, commands) and start polling; a network outage is retried in the background."""
        try:
            await self._connect()
        except NetworkError as exc:
            log.warning("cannot reach the Bot API yet (%s); retrying in the background", exc.message)
        self.state.prune()
        self._unsubscribe = [self.services.events.subscribe(self.progress.on_event),
                             self.services.events.subscribe(self.prompts.on_event)]
        self._tasks = [asyncio.create_task(self._run(), name="telegram"),
                       asyncio.create_task(self._tell_paired(), name="telegram-pairing")]

    async def _connect(self) -> None:
        try:
            await self.bot.initialize()
        except InvalidToken as exc:
            raise ChannelError(f"Telegram rejected the bot token ({exc.message}); set a valid TELEGRAM_BOT_TOKEN "
                               "from @BotFather (or channels.telegram.token)") from None
        if not self.settings.webhook_url:  # polling; in webhook mode setWebhook (in _run) replaces it
            await self.bot.delete_webhook(drop_pending_updates=False)
        await self.sender.best_effort("setMyCommands", lambda: self.bot.set_my_commands(
            [BotCommand(name, text) for name, text in COMMANDS]))
        self._connected.set()
        log.info("connected as @%s (dm_policy=%s, group_policy=%s)", self.bot.username,
                 self.settings.dm_policy, self.settings.group_policy)
        if not self.policy.owners:
            log.warning("channels.telegram.owner is not set: nobody on Telegram can approve risky tool calls "
                        "(answer them with the gateway); set it to your Telegram user id")

    async def _run(self) -> None:
        delay = 1.0
        while not self.connected:
            await asyncio.sleep(delay)
            try:
                await self._connect()
            except NetworkError as exc:
                delay = min(delay * 2, 60.0)
                log.info("still cannot reach the Bot API (%s); next try in %.0fs", exc.message, delay)
            except ChannelError as exc:
                log.error("%s", exc)
                return
        s = self.settings
        if s.webhook_url:
            await self._serve_webhook()
            return

        async def poll() -> None:
            self.poller = Poller(self.bot, self._on_update, self.state, timeout=s.poll_timeout_seconds,
                                 stall_after=max(s.stall_seconds, s.poll_timeout_seconds + 5.0))
            await self.poller.run()

        await self.exclusive(f"telegram-poller:{self.bot.id}", poll)  # once per bot, in a fleet too

    async def _serve_webhook(self) -> None:
        """Listen first, then tell Telegram where to post; serve until stopped."""
        s = self.settings
        assert s.webhook_url is not None
        secret = s.webhook_secret or default_secret(s.token or "")
        self.webhook = WebhookServer(self.bot, self._on_update, host=s.webhook_listen, port=s.webhook_port,
                                     path=urlsplit(s.webhook_url).path or "/", secret=secret)
        try:
            await self.webhook.start()
        except OSError as exc:
            log.error("the Telegram webhook cannot listen on %s:%d (%s); set channels.telegram.webhook_port to a "
                      "free port, then restart", s.webhook_listen, s.webhook_port, exc.strerror or exc)
            return
        try:
            try:
                await self.bot.set_webhook(s.webhook_url, secret_token=secret, allowed_updates=list(ALLOWED_UPDATES))
            except TelegramError as exc:
                log.error("Telegram refused the webhook %s (%s); fix channels.telegram.webhook_url (a public https "
                          "URL) or remove it to use long polling, then restart", s.webhook_url, exc.message)
                return
            log.info("webhook set: Telegram posts updates to %s", s.webhook_url)
            await asyncio.Event().wait()
        finally:
            await self.webhook.stop()

    @property
    def connected(self) -> bool:
        return self._connected.is_set()

    async def stop(self) -> None:
        """Stop taking updates. The HTTP client stays open (close() releases it) so replies finishing
        during shutdown still go out."""
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe = []
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.progress.close()
        await self.prompts.close()

    async def close(self) -> None:
        """Release the Bot API client, once the dispatcher has delivered what it could."""
        await self.stop()
        background, self._background = list(self._background), set()
        for task in background:
            task.cancel()
        await asyncio.gather(*background, return_exceptions=True)
        if self.connected:
            try:
                await self.bot.shutdown()
            except Exception as exc:  # the process is ending; a failing close must not hide why
                log.warning("closing the Bot API client failed: %s", exc)

    # outbound ------------------------------------------------------------------------------
    async def send(self, msg: OutboundMessage) -> None:
        """Deliver a reply in order, chunk by chunk; a chunk already sent is never sent again."""
        if not self.connected:  # e.g. replies replayed at start while the Bot API is still unreachable
            try:
                await asyncio.wait_for(self._connected.wait(), timeout=3 * self.settings.request_timeout_seconds)
            except asyncio.TimeoutError:
                raise DeliveryError("the Telegram channel cannot reach the Bot API yet", retry_after=30.0) from None
        chat_id = _chat_id(msg.chat_id)
        where = parse_session_key(msg.session_key or "")
        thread_id = msg.metadata.get("thread_id") or (where[1] if where and where[0] == msg.chat_id else None)
        group = isinstance(chat_id, int) and chat_id < 0
        reply_to = msg.metadata.get("message_id") if group and msg.kind == "reply" else None
        text = f"⚠️ {msg.text}" if msg.kind == "error" else msg.text
        chunks = render(text)
        done = self.state.chunks_sent(msg.id)
        for index, chunk in enumerate(chunks):
            if index < done:
                continue
            try:
                await self.sender.send_chunk(chat_id, chunk, thread_id=thread_id, reply_to=reply_to if index == 0 else None)
            except Unconfirmed as exc:
                log.warning("reply %s part %d/%d unconfirmed (%s); not resent, to avoid a duplicate",
                            msg.id, index + 1, len(chunks), exc)
            if len(chunks) > 1:
                self.state.record_chunk(msg.id, index + 1)

    # inbound -------------------------------------------------------------------------------
    async def _on_update(self, update: Update) -> None:
        """Decide what an update is. Returns once that decision is durable (the poller then confirms it)."""
        if update.callback_query is not None:
            if self.state.first_time(f"callback:{update.callback_query.id}"):
                self._spawn(self.prompts.on_callback(update.callback_query))
            return
        msg = update.message
        if msg is not None and (msg.migrate_to_chat_id or msg.migrate_from_chat_id):
            old, new = ((msg.chat.id, msg.migrate_to_chat_id) if msg.migrate_to_chat_id
                        else (msg.migrate_from_chat_id, msg.chat.id))
            self.state.record_migration(old, new)
            log.info("group %s became supergroup %s; its conversation continues there", old, new)
            return
        if msg is None or msg.from_user is None or msg.from_user.is_bot:
            return
        chat, user = msg.chat, msg.from_user
        private = chat.type == "private"
        who = Who(str(user.id), user.username)
        thread_id = msg.message_thread_id if msg.is_topic_message else None  # forum topics only
        text = msg.text if msg.text is not None else msg.caption
        mentioned, reply_to_bot = self._addressing(msg)
        addressed = read_message(text or "", private=private, bot_username=self.bot.username,
                                 mentioned=mentioned, reply_to_bot=reply_to_bot)
        if not addressed.for_us:
            return
        self._bind_owner(who)
        verdict = decide(self.policy, who, private=private, paired=self.pairing.is_paired(NAME, who.user_id),
                         refused_before=self.state.refused_before(who.user_id))
        if verdict is Verdict.PAIR:
            self._pair(who, str(chat.id))
            return
        if verdict is Verdict.REFUSE:
            self.state.mark_refused(who.user_id)
            log.info("refused user %s (not allowed by policy)", who.user_id)
            self._say(chat.id, REFUSAL, thread_id)
            return
        if verdict is Verdict.IGNORE:
            return
        key = session_key(self.state.session_chat(chat.id), thread_id)  # a migrated group keeps its session
        if addressed.command is not None:
            if self.state.first_time(f"command:{chat.id}:{msg.message_id}"):
                reply = self.services.commands.handle(addressed.command, key, addressed.args, user=self._user(who))
                if reply:
                    self._say(chat.id, reply, thread_id)
            return
        received = Received(text=addressed.text) if msg.text is not None else await self._media(msg, addressed.text, who)
        if received.refusal or not received.text:
            self._say(chat.id, received.refusal or NOT_TEXT, thread_id)
            return
        inbound = InboundMessage(
            id=f"telegram:{chat.id}:{msg.message_id}", channel=NAME, chat_id=str(chat.id), sender_id=who.user_id,
            session_key=key, text=received.text, attachments=received.attachments,
            metadata={"message_id": msg.message_id, "thread_id": thread_id, "username": user.username,
                      "chat_type": chat.type, "owner": self.policy.is_owner(who)},
        )
        accepted = self.services.intake.publish_inbound(inbound)
        await self.services.intake.durable()  # before the offset (or the webhook's 200) confirms it
        if accepted:
            self.progress.started(key, str(chat.id), thread_id, inbound.id)
            if self.settings.ack_reaction:  # accepted (committed): tell the sender it arrived
                self._spawn(self.sender.best_effort("setMessageReaction", lambda: self.bot.set_message_reaction(
                    chat.id, msg.message_id, reaction=self.settings.ack_reaction)))

    def _bind_owner(self, who: Who) -> None:
        """First contact of an owner named by username: keep their id, which alone is the owner from now on."""
        name = self.policy.claim(who)
        if name is None:
            if who.username and who.username.lower() in self.policy.owners and not self.policy.is_owner(who) \
                    and who.user_id not in self._impostors:
                self._impostors.add(who.user_id)
                log.warning("user %s writes as @%s, an owner's username, but that owner is user %s; treated as "
                            "not the owner", who.user_id, who.username, self.policy.bound.get(who.username.lower()))
            return
        self.state.bind_owner(name, who.user_id)
        self.policy.bound[name] = who.user_id
        self.prompts.set_owner_chats(self.policy.owner_chats())
        log.info("owner @%s is user %s (bound at first contact; the username alone no longer makes an owner)",
                 name, who.user_id)

    def _user(self, who: Who) -> str:
        """Whose workspace this sender works in: OWNER, or their own as a guest (the loop's rule)."""
        return OWNER if self.policy.is_owner(who) else f"{NAME}:{who.user_id}"

    async def _media(self, msg: Message, caption: str, who: Who) -> Received:
        """A photo, document or voice note as content for the agent (or a refusal line), saved in the
        sender's own workspace."""
        s = self.settings
        user = self._user(who)
        workspace = self.workspace if self.workspaces is None or user == OWNER else self.workspaces.guard(user).root
        try:
            return await receive(self.bot, msg, caption=caption or None, workspace=workspace,
                                 files_dir=s.files_dir, max_file_bytes=s.max_file_bytes, transcription=s.transcription)
        except (TelegramError, OSError, ValueError) as exc:
            log.warning("could not fetch the file of message %s in chat %s: %s", msg.message_id, msg.chat.id, exc)
            return Received(refusal=FETCH_FAILED)

    def _addressing(self, msg: Message) -> tuple[bool, bool]:
        """(the bot is @mentioned, the message replies to the bot)."""
        me = f"@{self.bot.username}".lower()
        mentioned = any(
            (entity.type == "mention" and text.lower() == me)
            or (entity.type == "text_mention" and entity.user is not None and entity.user.id == self.bot.id)
            for entity, text in {**msg.parse_entities(), **msg.parse_caption_entities()}.items()
        )
        replied = msg.reply_to_message
        reply_to_bot = bool(replied and replied.from_user and replied.from_user.id == self.bot.id)
        return mentioned, reply_to_bot

    def _pair(self, who: Who, chat_id: str) -> None:
        request = self.pairing.request(NAME, who.user_id, who.username, chat_id)
        if request.replaced:  # pushed out by a flood of newer requests: once, say when to ask again
            if not request.code_sent:
                self.pairing.mark_code_sent(NAME, request.code)
                wait = max(1, math.ceil((request.expires_at - self.pairing.clock()) / 60))
                self._say(int(chat_id), "This is a private assistant. Many access requests arrived after yours, so "
                                        f"your code expired early; send a message again in {wait} minutes for a "
                                        "new one.", None)
            return
        if request.code_sent:
            return  # one reply per code: further messages stay unanswered until the owner decides
        log.info("pairing code issued to user %s; approve with `clawgate pairing approve telegram CODE`",
                 who.user_id)
        minutes = round(self.settings.pairing_ttl_seconds / 60)
        text = (f"Hi! This is a private assistant. To get access, send this code to its owner:\n\n{request.code}\n\n"
                f"They approve it with: clawgate pairing approve telegram {request.code}\n"
                f"The code is valid for {minutes} minutes.")

        self.pairing.mark_code_sent(NAME, request.code)  # before sending: a quick second message stays silent

        async def send_code() -> None:
            if await self.ops.post(chat_id, text, None) is None:
                self.pairing.mark_code_sent(NAME, request.code, False)  # not delivered: the next message retries

        self._spawn(send_code())

    async def _tell_paired(self) -> None:
        """Tell users the owner approved (the CLI writes the database; the daemon notices within seconds)."""
        while True:
            await asyncio.sleep(self.settings.pairing_check_seconds)
            if not self.connected:
                continue
            for user_id, chat_id in self.pairing.unnotified(NAME):
                self.pairing.mark_notified(NAME, user_id)  # at most once, even if the send fails
                await self.ops.post(chat_id, "✅ You're approved. Send me a message whenever you like.", None)

    # approvals -----------------------------------------------------------------------------
    def _may_approve(self, query: CallbackQuery) -> bool:
        return may_approve(self.policy, Who(str(query.from_user.id), query.from_user.username))

    async def _answer(self, query: CallbackQuery, text: str) -> None:
        await self.sender.best_effort("answerCallbackQuery", lambda: self.bot.answer_callback_query(query.id, text=text))

    # helpers -------------------------------------------------------------------------------
    def _say(self, chat_id: int, text: str, thread_id: int | None) -> None:
        """A control message (refusal, command answer): sent in the background, never blocking polling."""
        self._spawn(self.ops.post(str(chat_id), text, thread_id))

    def _spawn(self, coro: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)


class _ChatOps:
    """Best-effort chat operations for progress, approvals and control messages."""

    def __init__(self, bot: Bot, sender: Sender) -> None:
        self.bot = bot
        self.sender = sender

    async def typing(self, chat_id: str, thread_id: int | None) -> None:
        await self.sender.best_effort("sendChatAction", lambda: self.bot.send_chat_action(
            _chat_id(chat_id), ChatAction.TYPING, message_thread_id=thread_id))

    async def post(self, chat_id: str, text: str, thread_id: int | None, *, markup: Any = None,
                   html: bool = False) -> int | None:
        sent = await self.sender.best_effort("sendMessage", lambda: self.bot.send_message(
            _chat_id(chat_id), text, message_thread_id=thread_id, reply_markup=markup,
            parse_mode=ParseMode.HTML if html else None))
        return sent.message_id if sent is not None else None

    async def edit(self, chat_id: str, message_id: int, text: str, *, html: bool = False) -> bool:
        done = await self.sender.best_effort("editMessageText", lambda: self.bot.edit_message_text(
            text, chat_id=_chat_id(chat_id), message_id=message_id, parse_mode=ParseMode.HTML if html else None))
        return done is not None

    async def delete(self, chat_id: str, message_id: int) -> None:
        await self.sender.best_effort("deleteMessage", lambda: self.bot.delete_message(_chat_id(chat_id), message_id))


def _chat_id(value: str | int) -> int | str:
    text = str(value)
    return int(text) if text.lstrip("-").isdigit() else text


__all__ = ["TelegramChannel", "ChannelError", "make_bot"]
