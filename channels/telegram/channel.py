"""The Telegram adapter: the Bot API's protocol, and nothing the other channels share.

Receiving (long polling that confirms an offset only after the kit decided the update durably,
or a webhook answered 200 only then), an update as the kit's Incoming (the bot's @mention
removed, addressed when private, mentioned or replied to), Markdown as text plus entities
(render.py), sends under Telegram's rules (delivery.py), approval buttons as an inline keyboard,
and setMyCommands. Access, pairing, commands, files, retries, progress and approvals are the
kit's (channels/kit/).
"""

from __future__ import annotations

import asyncio
import logging
import re
from typing import Any, ClassVar
from urllib.parse import urlsplit

from pydantic import BaseModel
from telegram import (Bot, BotCommand, CallbackQuery, InlineKeyboardButton, InlineKeyboardMarkup, Message,
                      MessageEntity, Update)
from telegram.constants import ChatAction
from telegram.error import Forbidden, InvalidToken, NetworkError, TelegramError
from telegram.request import HTTPXRequest

from clawgate.channels.kit.access import Sender as Who
from clawgate.channels.kit.adapter import (Capabilities, ChannelAuthError, ChannelUnavailable, Incoming,
                                           PlatformAdapter, Target)
from clawgate.channels.kit.adapter import AdapterKit
from clawgate.channels.kit.probe import ProbeResult, logged_in, refused, unreachable, wrong_base_url
from clawgate.config.schema import TelegramSettings

from .delivery import MAX_FILE_BYTES, Sender
from .media import incoming_files
from .polling import ALLOWED_UPDATES, Poller
from .render import MAX_CHARS, Chunk, render
from .webhook import WebhookServer, default_secret

log = logging.getLogger("clawgate.telegram")
NAME = "telegram"
DEFAULT_BASE_URL = "https://api.telegram.org/bot"
PREFIX = "ap:"  # callback data of approval buttons: ap:<approval id>:y|n
# What @BotFather hands out: the bot's numeric id, a colon, letters. Telegram answers 404 (not 401) to a
# token of another shape, so only a well-shaped token makes a 404 mean a wrong base_url.
TOKEN_SHAPE = re.compile(r"^\d+:[A-Za-z0-9_-]+$")
TOKEN_FIX = "TELEGRAM_BOT_TOKEN (or channels.telegram.token)"


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


def strip_mention(text: str, bot_username: str) -> str:
    """`text` without the bot's @mention (what the person said to the bot)."""
    return re.sub(rf"@{re.escape(bot_username)}\b", "", text, flags=re.IGNORECASE).strip()


class _Offsets:
    """The poller's offset, kept as the kit store's cursor."""

    def __init__(self, kit: AdapterKit) -> None:
        self.store = kit.store

    def offset(self) -> int:
        return int(self.store.cursor() or 0)

    def save_offset(self, offset: int) -> None:
        self.store.save_cursor(str(offset))


class TelegramAdapter(PlatformAdapter):
    name: ClassVar[str] = NAME
    settings_model: ClassVar[type[BaseModel]] = TelegramSettings
    exclusive_connection: ClassVar[bool] = False  # the Bot API sends from any process; run() leases the poller
    capabilities: ClassVar[Capabilities] = Capabilities(max_chars=MAX_CHARS, edit=True, typing=True, buttons=True,
                                                        threads=True, native_commands=True, dm_is_user_id=True,
                                                        files=True, max_file_bytes=MAX_FILE_BYTES)

    def owner_chat(self, owner: str) -> str | None:
        """A user id is the id of the private chat with them (Telegram opens it once they started the bot);
        an owner named by username is reached at the id it was bound to when they first wrote."""
        return owner if owner.isdigit() else None

    def __init__(self, settings: BaseModel, kit: AdapterKit, *, bot: Bot | None = None) -> None:
        super().__init__(settings, kit)
        assert isinstance(settings, TelegramSettings)
        self.settings: TelegramSettings = settings
        self.bot = bot or make_bot(settings)
        s = settings
        # control messages, typing, edits: Telegram's rules with their own retries
        self.sender = Sender(self.bot, retries=s.send_retries, base_delay=s.retry_base_seconds,
                             on_migrated=kit.store.record_migration)
        # reply chunks: one attempt each, the kit's Delivery retries (and honours retry_after)
        self.once = Sender(self.bot, retries=0, max_retry_after=0, on_migrated=kit.store.record_migration)
        self.poller: Poller | None = None
        self.webhook: WebhookServer | None = None
        self._initialized = False

    @classmethod
    def enabled(cls, settings: BaseModel) -> bool:
        """On when a token is present, unless enabled = false."""
        assert isinstance(settings, TelegramSettings)
        if settings.enabled is False:
            return False
        if not settings.token:
            if settings.enabled:
                log.error("channels.telegram.enabled is true but no bot token is set; set TELEGRAM_BOT_TOKEN "
                          "(from @BotFather) or channels.telegram.token")
            return False
        return True

    @classmethod
    async def probe(cls, settings: BaseModel) -> ProbeResult:
        """getMe through python-telegram-bot, as connect() does; nothing else is called."""
        assert isinstance(settings, TelegramSettings)
        base = settings.base_url or DEFAULT_BASE_URL
        if not settings.token:
            return ProbeResult("fail", "no bot token is set", f"set {TOKEN_FIX}: copy it from @BotFather")
        if not TOKEN_SHAPE.match(settings.token):
            return ProbeResult("fail", "the bot token is not shaped like one from @BotFather (digits:letters)",
                               f"set {TOKEN_FIX}: copy it whole from @BotFather")
        bot = make_bot(settings)
        try:
            await bot.initialize()  # getMe
        except InvalidToken as exc:
            answer = exc.__cause__ if isinstance(exc.__cause__, TelegramError) else exc  # PTB re-raises getMe's
            if "Not Found" in answer.message:
                return wrong_base_url("Telegram", base + "…/getMe", 404, "channels.telegram.base_url")
            return refused("Telegram", "bot token", TOKEN_FIX, "copy it from @BotFather")
        except Forbidden:
            return refused("Telegram", "bot token", TOKEN_FIX, "copy it from @BotFather")
        except NetworkError as exc:
            return unreachable("Telegram", base, exc.message.replace(settings.token or "", "***"),
                               "channels.telegram.base_url")
        except TelegramError:  # an answer that is not the Bot API's JSON
            return wrong_base_url("Telegram", base, 200, "channels.telegram.base_url")
        try:
            return logged_in(f"logged in as @{bot.username}")
        finally:
            await bot.shutdown()

    def _token_setting(self) -> str:
        """Where this account's token is set: the default account's, or its own accounts table."""
        account = getattr(self.kit, "account", "default")
        if account == "default":
            return "TELEGRAM_BOT_TOKEN (or channels.telegram.token)"
        return f"channels.telegram.accounts.{account}.token"

    # lifecycle -----------------------------------------------------------------------------
    async def connect(self) -> None:
        """getMe, webhook off when polling. A rejected token fails; an unreachable API is retried."""
        try:
            await self.bot.initialize()
            self._initialized = True
            if not self.settings.webhook_url:  # polling; in webhook mode setWebhook (in run) replaces it
                await self.bot.delete_webhook(drop_pending_updates=False)
        except InvalidToken as exc:
            raise ChannelAuthError(f"Telegram rejected the bot token ({exc.message}); set a valid {self._token_setting()} "
                                   "from @BotFather") from None
        except NetworkError as exc:
            raise ChannelUnavailable(f"cannot reach the Bot API ({exc.message})") from None
        self.kit.bot_name = self.bot.username
        log.info("connected to Telegram as @%s (dm_policy=%s, group_policy=%s)", self.bot.username,
                 self.settings.dm_policy, self.settings.group_policy)
        if not self.kit.policy.owners:
            log.warning("channels.telegram.owner is not set: nobody on Telegram can approve risky tool calls "
                        "(answer them with the gateway); set it to your Telegram user id")

    async def register_commands(self, commands: list[tuple[str, str]]) -> None:
        await self.sender.best_effort("setMyCommands", lambda: self.bot.set_my_commands(
            [BotCommand(name, text) for name, text in commands]))

    async def run(self) -> None:
        s = self.settings
        if s.webhook_url:
            await self._serve_webhook()
            return

        async def poll() -> None:
            self.poller = Poller(self.bot, self._on_update, _Offsets(self.kit), timeout=s.poll_timeout_seconds,
                                 stall_after=max(s.stall_seconds, s.poll_timeout_seconds + 5.0),
                                 on_health=self.kit.report_problem)
            await self.poller.run()

        await self.kit.exclusive(f"telegram-poller:{self.bot.id}", poll)  # once per bot, in a fleet too

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

    async def disconnect(self) -> None:
        """Release the Bot API client, once the dispatcher has delivered what it could."""
        if self._initialized:
            self._initialized = False
            await self.bot.shutdown()

    def status(self) -> dict[str, Any]:
        return {"bot": f"@{self.bot.username}"} if self._initialized else {}

    # inbound -------------------------------------------------------------------------------
    async def _on_update(self, update: Update) -> None:
        """Hand an update to the kit. Returns once its decision is durable (the poller then confirms it)."""
        if update.callback_query is not None:
            if self.kit.store.first_time(f"callback:{update.callback_query.id}"):
                self.kit.spawn(self._on_callback(update.callback_query))
            return
        msg = update.message
        if msg is not None and (msg.migrate_to_chat_id or msg.migrate_from_chat_id):
            old, new = ((msg.chat.id, msg.migrate_to_chat_id) if msg.migrate_to_chat_id
                        else (msg.migrate_from_chat_id, msg.chat.id))
            self.kit.store.record_migration(old, new)
            log.info("group %s became supergroup %s; its conversation continues there", old, new)
            return
        if msg is None or msg.from_user is None:
            return
        incoming = self.incoming(msg)
        if await self.kit.receive(incoming) and self.settings.ack_reaction:
            # accepted (committed): tell the sender it arrived
            self.kit.spawn(self.sender.best_effort("setMessageReaction", lambda: self.bot.set_message_reaction(
                msg.chat.id, msg.message_id, reaction=self.settings.ack_reaction)))

    def incoming(self, msg: Message) -> Incoming:
        """A Telegram message as the kit reads it."""
        chat, user = msg.chat, msg.from_user
        assert user is not None
        private = chat.type == "private"
        text = (msg.text if msg.text is not None else msg.caption) or ""
        mentioned, reply_to_bot = self._addressing(msg)
        stripped = text.strip()
        cleaned = (strip_mention(stripped, self.bot.username) or stripped) if mentioned else stripped
        files = incoming_files(self.bot, msg) if msg.text is None else ()
        return Incoming(
            message_id=str(msg.message_id), chat_id=str(chat.id),
            sender=Who(str(user.id), user.username, user.full_name), private=private, text=cleaned,
            addressed=private or mentioned or reply_to_bot,
            thread_id=str(msg.message_thread_id) if msg.is_topic_message and msg.message_thread_id else None,
            files=files, sender_is_bot=user.is_bot, metadata={"chat_type": chat.type},
            unreadable=msg.text is None and not files)

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

    async def _on_callback(self, query: CallbackQuery) -> None:
        """A button press: the kit decides; the message is edited when the broker reports the result."""
        data = query.data or ""
        if not data.startswith(PREFIX) or data.count(":") != 2:
            answer = "This button is no longer used."
        else:
            approval_id, choice = data[len(PREFIX):].rsplit(":", 1)
            chat_id = str(query.message.chat.id) if query.message else ""
            answer = await self.kit.approval_answer(approval_id, Who(str(query.from_user.id), query.from_user.username),
                                                    choice == "y", chat_id=chat_id)
        await self.sender.best_effort("answerCallbackQuery", lambda: self.bot.answer_callback_query(query.id, text=answer))

    # outbound ------------------------------------------------------------------------------
    def render(self, markdown: str) -> list[str]:
        return list(render(markdown))

    async def send_text(self, target: Target, text: str) -> str:
        chat_id = _chat_id(target.chat_id)
        group = isinstance(chat_id, int) and chat_id < 0  # a private chat's reply needs no quote
        reply_to = int(target.reply_to) if target.reply_to and group and target.reply_to.isdigit() else None
        sent = await self.once.send_chunk(chat_id, _chunk(text), thread_id=_thread(target), reply_to=reply_to)
        return str(sent.message_id)

    async def send_file(self, target: Target, name: str, data: bytes, caption: str) -> str:
        sent = await self.once.send_document(_chat_id(target.chat_id), name, data, caption, thread_id=_thread(target))
        return str(sent.message_id)

    async def typing(self, target: Target) -> None:
        await self.sender.best_effort("sendChatAction", lambda: self.bot.send_chat_action(
            _chat_id(target.chat_id), ChatAction.TYPING, message_thread_id=_thread(target)))

    async def edit_text(self, target: Target, message_id: str, text: str) -> None:
        chunk = _chunk(text)
        await self.sender.call("editMessageText", lambda: self.bot.edit_message_text(
            chunk.text, chat_id=_chat_id(target.chat_id), message_id=int(message_id),
            entities=_entities(chunk)))

    async def delete(self, target: Target, message_id: str) -> None:
        await self.sender.call("deleteMessage", lambda: self.bot.delete_message(_chat_id(target.chat_id),
                                                                                 int(message_id)))

    async def send_approval(self, target: Target, approval_id: str, text: str) -> str | None:
        markup = InlineKeyboardMarkup([[InlineKeyboardButton("✅ Approve", callback_data=f"{PREFIX}{approval_id}:y"),
                                        InlineKeyboardButton("❌ Deny", callback_data=f"{PREFIX}{approval_id}:n")]])
        sent = await self.sender.send_chunk(_chat_id(target.chat_id), _chunk(text), thread_id=_thread(target),
                                            markup=markup)
        return str(sent.message_id)


def _chunk(text: str) -> Chunk:
    return text if isinstance(text, Chunk) else Chunk(text)


def _entities(chunk: Chunk) -> list[MessageEntity] | None:
    return [MessageEntity.de_json(e, None) for e in chunk.entities] or None


def _thread(target: Target) -> int | None:
    return int(target.thread_id) if target.thread_id and target.thread_id.lstrip("-").isdigit() else None


def _chat_id(value: str | int) -> int | str:
    text = str(value)
    return int(text) if text.lstrip("-").isdigit() else text


__all__ = ["TelegramAdapter", "make_bot", "strip_mention"]
