"""The Discord adapter: discord.py's Gateway session in, its REST client out; nothing else.

discord.py keeps the Gateway alive (heartbeats, RESUME after a dropped connection, reconnect
with backoff while Discord is unreachable) and waits out short 429s itself. This module turns
its events into the kit's Incoming, sends what the kit renders, and answers interactions:
- a slash command is acknowledged at once ("thinking…", well inside Discord's 3 seconds) and
  handed to the kit as the text `/name args`; the kit's answer then replaces the placeholder;
- an approval button's custom_id carries the approval id (`clawgate:approve:<id>`), so a press
  still resolves after a restart; it is acknowledged at once, the kit decides who may answer,
  and the presser alone sees the outcome line.
REST calls go through `client.http` with ids only, so a reply never depends on discord.py's cache
(a DM channel is not cached after a restart). Every send has `allowed_mentions` = none.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, ClassVar

import aiohttp

try:
    import discord
    import discord.http
    from discord.http import handle_message_parameters
except ImportError:  # the channel is an extra: say how to get it (the registry shows this line)
    raise ImportError("the Discord channel needs discord.py; install it with: pip install 'clawgate[discord]'") from None
from pydantic import BaseModel

from clawgate.channels.kit import (
    Capabilities,
    ChannelAuthError,
    ChannelUnavailable,
    DeliveryError,
    PlatformAdapter,
    Target,
    Unconfirmed,
)

from clawgate.channels.kit.probe import ProbeResult, http_status, logged_in, refused, unreachable

from .endpoints import answer_interactions_at_own_base, gateway_address, use_account_http
from .incoming import CHAT_TYPES, from_command, from_message, place, sender_of
from .render import MAX_CHARS, render
from .settings import DiscordSettings

NO_PINGS = discord.AllowedMentions.none()
APPROVE, DENY = "clawgate:approve:", "clawgate:deny:"
INTERACTION_LIFETIME = 14 * 60.0  # Discord keeps an interaction token for 15 minutes
REMEMBERED = 4096  # sent messages whose channel is remembered for edits (a thread's messages live in the thread)
CURSORS = "cursors"  # the kit store's kv key: {Discord channel id: the last message handled there}
CATCH_UP = timedelta(hours=24)  # messages missed while offline are read back this far at most
CATCH_UP_LIMIT = 100  # per channel
RECEIVE_TRIES, RECEIVE_BACKOFF = 5, 1.0  # kit.receive retried after 1, 2, 4, 8 s
TOKEN_FIX = ("Discord rejected the bot token; copy a fresh one from the Developer Portal (your application > "
             "Bot > Reset Token) into CLAWGATE_CHANNELS__DISCORD__TOKEN or channels.discord.token")
INTENT_FIX = ("Discord refused the Message Content intent; switch on 'Message Content Intent' in the Developer "
              "Portal (your application > Bot > Privileged Gateway Intents), then restart")


def intents() -> discord.Intents:
    """What the bot reads: servers and their channels, guild and DM messages, with their text."""
    return discord.Intents(guilds=True, guild_messages=True, dm_messages=True, message_content=True)


def approval_custom_id(approval_id: str, approve: bool) -> str:
    return f"{APPROVE if approve else DENY}{approval_id}"


def parse_approval(custom_id: str) -> tuple[str, bool] | None:
    """(approval id, approved) of one of our buttons; None for anything else."""
    for prefix, approved in ((APPROVE, True), (DENY, False)):
        if custom_id.startswith(prefix) and len(custom_id) > len(prefix):
            return custom_id[len(prefix):], approved
    return None


def command_payload(commands: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """Discord's application-command objects for the router's commands (each takes optional text)."""
    out = []
    for name, description in commands:
        name = name.lower()
        if not (1 <= len(name) <= 32 and name.replace("-", "").replace("_", "").isalnum()):
            continue
        out.append({
            "name": name, "type": 1, "description": (description or name)[:100],
            "options": [{"type": 3, "name": "args", "description": "what follows the command", "required": False}],
            "contexts": [0, 1],  # servers and the bot's DMs
        })
    return out


def _same_commands(have: list[dict[str, Any]], want: list[dict[str, Any]]) -> bool:
    def key(c: dict[str, Any]) -> tuple[Any, ...]:
        options = tuple((o.get("name"), o.get("type"), bool(o.get("required"))) for o in c.get("options") or [])
        return c.get("name"), c.get("type", 1), c.get("description"), options

    return sorted(map(key, have)) == sorted(map(key, want))


def delivery_error(exc: BaseException, what: str) -> DeliveryError:
    """A failed REST call as the kit's DeliveryError: 429 carries its wait, other 4xx are permanent,
    a refused connection is retried; a request that may have reached Discord raises Unconfirmed."""
    if isinstance(exc, discord.RateLimited):
        return DeliveryError(f"Discord rate limit on {what}", retry_after=exc.retry_after)
    if isinstance(exc, discord.HTTPException):
        detail = f"{what}: Discord answered {exc.status} ({exc.code}: {exc.text or 'no detail'})"
        if exc.status == 429:
            retry = getattr(exc.response, "headers", {}).get("Retry-After")
            return DeliveryError(detail, retry_after=float(retry) if retry else 1.0)
        return DeliveryError(detail, permanent=400 <= exc.status < 500)
    if isinstance(exc, (aiohttp.ClientConnectorError, ConnectionRefusedError)):
        return DeliveryError(f"{what}: Discord unreachable ({type(exc).__name__})")
    # The request may have gone out (a timeout, a dropped connection): counted as sent, not repeated.
    raise Unconfirmed(f"{what}: no answer from Discord ({type(exc).__name__})") from exc


_NETWORK = (aiohttp.ClientError, OSError, asyncio.TimeoutError)


def _nonce(target: Target) -> str | None:
    """A reply part's send_key as a Discord nonce (at most 25 characters; sent with enforce_nonce, Discord
    returns the message it already made for a nonce it saw from this bot in the last minutes)."""
    digest = target.key_digest()
    return digest[:25] if digest else None
answer_interactions_at_own_base()


@dataclass
class _Pending:
    """A slash command acknowledged with "thinking…": its first answer replaces the placeholder."""

    interaction: discord.Interaction
    channel_id: str
    at: float = field(default_factory=time.monotonic)
    answered: bool = False


class _Client(discord.Client):
    def __init__(self, adapter: DiscordAdapter, **options: Any) -> None:
        super().__init__(**options)
        self.adapter = adapter

    async def on_ready(self) -> None:
        """READY after IDENTIFY (not after a RESUME, which replays what was missed): read back the rest."""
        self.adapter._ready.set()
        self.adapter._online(True)
        self.adapter._start_catch_up()

    async def on_resumed(self) -> None:
        self.adapter._online(True)

    async def on_disconnect(self) -> None:
        self.adapter._online(False)

    async def on_message(self, message: discord.Message) -> None:
        await self.adapter._on_live(message)

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        await self.adapter._on_interaction(interaction)

    async def on_error(self, event_method: str, /, *args: Any, **kwargs: Any) -> None:
        self.adapter.kit.log.exception("handling a Discord %s failed", event_method)


class DiscordAdapter(PlatformAdapter):
    name: ClassVar[str] = "discord"
    settings_model: ClassVar[type[BaseModel]] = DiscordSettings
    account_fields: ClassVar[tuple[str, ...]] = ("token",)
    capabilities: ClassVar[Capabilities] = Capabilities(
        max_chars=MAX_CHARS, edit=True, typing=True, buttons=True, threads=True, native_commands=True,
        files=True, max_file_bytes=10 * 1024 * 1024)  # bots' upload limit per message

    def __init__(self, settings: BaseModel, kit: Any) -> None:
        super().__init__(settings, kit)
        assert isinstance(settings, DiscordSettings)
        self.settings: DiscordSettings = settings
        self.kit = kit
        self.client: _Client | None = None
        self._gateway: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        self._pending: dict[str, _Pending] = {}
        self._sent_in: OrderedDict[str, int] = OrderedDict()  # message id -> the channel it was sent in
        self._locks: dict[int, asyncio.Lock] = {}  # per Discord channel: messages handled one at a time, in order
        self._cursors: dict[str, str] = {}
        self._read_from: dict[str, str] = {}  # the cursors as this session found them (the read-back starts there)
        self._caught_up = asyncio.Event()  # the read-back after READY is done: live messages go in after it
        self._catch_up: asyncio.Task[None] | None = None
        self._up, self._down = asyncio.Event(), asyncio.Event()  # the Gateway session is live / was lost

    @classmethod
    def enabled(cls, settings: BaseModel) -> bool:
        """On when `enabled` says so, else whenever a token is configured."""
        flag = getattr(settings, "enabled", None)
        return bool(getattr(settings, "token", None)) if flag is None else flag

    def status(self) -> dict[str, Any]:
        user = self.client.user if self.client is not None else None
        return {"bot": str(user)} if user is not None else {}

    # --- lifecycle ----------------------------------------------------------------------

    @classmethod
    async def probe(cls, settings: BaseModel) -> ProbeResult:
        """discord.py's REST log-in (GET /users/@me), as connect() starts; no Gateway session is opened."""
        assert isinstance(settings, DiscordSettings)
        token_setting = "CLAWGATE_CHANNELS__DISCORD__TOKEN (or channels.discord.token)"
        how = "Developer Portal > your application > Bot > Reset Token"
        if not settings.token:
            return ProbeResult("fail", "no bot token is set", f"set {token_setting}: {how}")
        base = settings.base_url or discord.http.Route.BASE
        client = discord.Client(intents=intents())
        use_account_http(client, settings.base_url)  # this account's base, not the process's (endpoints.py)
        try:
            await client.login(settings.token)
            who = str(client.user)
        except discord.LoginFailure:
            return refused("Discord", "bot token", token_setting, how)
        except discord.HTTPException as exc:
            return http_status("Discord", f"{base}/users/@me", exc.status, credential=token_setting,
                               base_setting="channels.discord.base_url", how=how) or \
                unreachable("Discord", base, _describe(exc), "channels.discord.base_url")
        except _NETWORK as exc:
            return unreachable("Discord", base, _describe(exc), "channels.discord.base_url")
        finally:
            await client.close()
        return logged_in(f"logged in as {who}")

    async def connect(self) -> None:
        """Log in over REST, open the Gateway and wait for READY."""
        s = self.settings
        if not s.token:
            raise ChannelAuthError("no Discord bot token; set CLAWGATE_CHANNELS__DISCORD__TOKEN or "
                                   "channels.discord.token (Developer Portal > your application > Bot > Reset Token)")
        await self.disconnect()  # a retry starts from a fresh client
        self._ready = asyncio.Event()
        self._up, self._down = asyncio.Event(), asyncio.Event()
        self._cursors = json.loads(self.kit.store.kv_get(CURSORS) or "{}")
        # read back from where this session starts: messages handled live before READY's read-back (discord.py
        # fires on_ready only once the servers streamed in) move the cursors past the ones missed meanwhile
        self._read_from = dict(self._cursors)
        self._caught_up = asyncio.Event()
        client = self.client = _Client(self, intents=intents(), allowed_mentions=NO_PINGS, max_messages=None,
                                       guild_ready_timeout=s.guild_ready_timeout_seconds)
        http = use_account_http(client, s.base_url)  # this bot's REST base and Gateway, not the process's
        try:
            await client.login(s.token)
            if s.base_url:
                _, url, _ = await client.http.get_bot_gateway()
                http.gateway = gateway_address(url)
        except discord.LoginFailure:
            await self.disconnect()
            raise ChannelAuthError(TOKEN_FIX) from None
        except (discord.HTTPException, discord.GatewayNotFound, *_NETWORK) as exc:
            await self.disconnect()
            raise ChannelUnavailable(f"cannot reach Discord ({_describe(exc)}); retrying") from None
        self._gateway = asyncio.create_task(client.connect(reconnect=True), name="discord-gateway")
        ready = asyncio.ensure_future(self._ready.wait())
        done, _ = await asyncio.wait({self._gateway, ready}, timeout=s.connect_timeout_seconds,
                                     return_when=asyncio.FIRST_COMPLETED)
        if ready not in done:
            ready.cancel()
            if self._gateway in done:
                error = self._translate(self._gateway) or ChannelUnavailable("the Discord Gateway closed before READY")
            else:
                error = ChannelUnavailable(f"no answer from the Discord Gateway within {s.connect_timeout_seconds:.0f}s")
            await self.disconnect()
            raise error
        user = client.user
        self.kit.bot_name = user.name if user is not None else None
        self.kit.log.info("connected to Discord as %s (%s server(s))", user, len(client.guilds))

    def _online(self, live: bool) -> None:
        (self._up if live else self._down).set()
        (self._down if live else self._up).clear()

    async def run(self) -> None:
        """Receive until cancelled. discord.py RESUMEs a dropped connection by itself; a session not back
        within offline_grace_seconds is reported (ChannelUnavailable), so the channel shows as retrying and
        the kit's runner reconnects from scratch (a new session, then the read-back) once Discord answers."""
        gateway = self._gateway
        if gateway is None:
            raise ChannelUnavailable("the Discord Gateway is not connected")
        grace = self.settings.offline_grace_seconds
        while not gateway.done():
            if not await _first(gateway, self._down.wait()):
                continue
            if not await _first(gateway, self._up.wait(), timeout=grace) and not gateway.done():
                raise ChannelUnavailable(f"the Discord Gateway connection was lost and is not back after "
                                         f"{grace:g}s; reconnecting")
        error = self._translate(gateway)
        if error is not None:
            raise error

    def _translate(self, task: asyncio.Task[None]) -> Exception | None:
        """How the Gateway task ended, as the kit's error (None: closed on purpose)."""
        if task.cancelled():
            return None
        exc = task.exception()
        if exc is None:
            return None
        if isinstance(exc, discord.PrivilegedIntentsRequired):
            return ChannelAuthError(INTENT_FIX)
        if isinstance(exc, discord.ConnectionClosed) and exc.code == 4004:
            return ChannelAuthError(TOKEN_FIX)
        if isinstance(exc, discord.ConnectionClosed) and exc.code in (4010, 4011, 4012, 4013):
            return ChannelAuthError(f"the Discord Gateway closed the session ({exc.code}: {exc.reason}); "
                                    "this build of clawgate cannot run this bot as configured")
        return ChannelUnavailable(f"the Discord Gateway connection ended ({_describe(exc)}); retrying")

    async def disconnect(self) -> None:
        catch_up, self._catch_up = self._catch_up, None
        if catch_up is not None:
            catch_up.cancel()
            await asyncio.gather(catch_up, return_exceptions=True)
        gateway, self._gateway = self._gateway, None
        client, self.client = self.client, None
        if client is not None:
            await client.close()
        if gateway is not None:
            gateway.cancel()
            await asyncio.gather(gateway, return_exceptions=True)
        self._pending.clear()

    # --- receiving ----------------------------------------------------------------------

    async def _on_message(self, message: discord.Message) -> None:
        """One message to the kit, then its channel's cursor moves past it (Discord has no acknowledgement:
        the cursor is what a restart reads back from, so it moves only once the kit's decision is durable)."""
        client = self.client
        if client is None or client.user is None:
            return
        async with self._locks.setdefault(message.channel.id, asyncio.Lock()):
            if message.author.id != client.user.id and message.type in CHAT_TYPES:
                await self._hand_in(from_message(message, client.user))
            self._advance(str(message.channel.id), message.id)

    async def _on_live(self, message: discord.Message) -> None:
        """A Gateway message waits for the read-back of the ones missed before this session, so a channel's
        messages are taken in order (one the read-back already took is dropped by the kit as seen)."""
        await self._caught_up.wait()
        await self._on_message(message)

    async def _hand_in(self, incoming: Any) -> None:
        """kit.receive, retried while it fails (the state database busy, a disk hiccup): the channel's later
        messages wait, so the cursor never passes one that was not taken. A message that still fails after
        RECEIVE_TRIES is logged and passed over rather than stop the channel for good."""
        for attempt in range(RECEIVE_TRIES):
            try:
                await self.kit.receive(incoming)
                return
            except Exception as exc:  # noqa: BLE001 - whatever the kit raised, the channel goes on
                if attempt == RECEIVE_TRIES - 1:
                    self.kit.log.error("Discord message %s in chat %s could not be taken in (%s: %s); passed over",
                                       incoming.message_id, incoming.chat_id, type(exc).__name__, exc)
                    return
                self.kit.log.warning("taking in Discord message %s failed (%s: %s); retrying", incoming.message_id,
                                     type(exc).__name__, exc)
                await asyncio.sleep(RECEIVE_BACKOFF * 2 ** attempt)

    def _advance(self, channel_id: str, message_id: int) -> None:
        current = self._cursors.get(channel_id)
        if current is None or message_id > int(current):
            self._cursors[channel_id] = str(message_id)
            self.kit.store.kv_set(CURSORS, json.dumps(self._cursors))

    def _start_catch_up(self) -> None:
        if self._catch_up is None or self._catch_up.done():
            self._catch_up = asyncio.create_task(self._read_back(), name="discord-catch-up")

    async def _read_back(self) -> None:
        """Messages that arrived while no session was open (a restart, an expired session), oldest first,
        in every channel the bot has read before; the kit drops any it has seen already."""
        try:
            await self._read_missed()
        finally:
            self._caught_up.set()

    async def _read_missed(self) -> None:
        client = self.client
        if client is None:
            return
        oldest = discord.utils.time_snowflake(discord.utils.utcnow() - CATCH_UP)
        for channel_id, after in list(self._read_from.items()):
            try:
                channel = client.get_channel(int(channel_id)) or await client.fetch_channel(int(channel_id))
                if not isinstance(channel, discord.abc.Messageable):
                    continue
                start = discord.Object(id=max(int(after), oldest))
                async for message in channel.history(after=start, oldest_first=True, limit=CATCH_UP_LIMIT):
                    await self._on_message(message)
            except (discord.HTTPException, *_NETWORK) as exc:
                self.kit.log.info("could not read back Discord channel %s (%s)", channel_id, _describe(exc))

    async def _on_interaction(self, interaction: discord.Interaction) -> None:
        if interaction.type is discord.InteractionType.application_command:
            await self._on_command(interaction)
        elif interaction.type is discord.InteractionType.component:
            parsed = parse_approval(str((interaction.data or {}).get("custom_id", "")))
            if parsed is not None:
                await self._on_button(interaction, *parsed)

    async def _on_command(self, interaction: discord.Interaction) -> None:
        try:  # first, inside Discord's 3 seconds: the user sees "thinking…" until the answer
            await interaction.response.defer(thinking=True)
        except discord.HTTPException as exc:
            self.kit.log.warning("could not acknowledge a Discord command in time (%s)", _describe(exc))
            return
        now = time.monotonic()
        for key in [k for k, p in self._pending.items() if now - p.at > INTERACTION_LIFETIME]:
            del self._pending[key]
        channel_id = str(interaction.channel_id)
        self._pending[str(interaction.id)] = _Pending(interaction, channel_id)
        await self.kit.receive(from_command(interaction))

    async def _on_button(self, interaction: discord.Interaction, approval_id: str, approved: bool) -> None:
        try:  # acknowledge first (the message stays as it is); the kit's decision may take longer than 3 s
            await interaction.response.defer()
        except discord.HTTPException as exc:
            self.kit.log.warning("could not acknowledge a Discord button press in time (%s)", _describe(exc))
            return
        chat_id = place(interaction.channel)[0] if interaction.channel is not None else str(interaction.channel_id)
        line = await self.kit.approval_answer(approval_id, sender_of(interaction.user), approved, chat_id=chat_id)
        try:
            await interaction.followup.send(line, ephemeral=True, allowed_mentions=NO_PINGS)
        except (discord.HTTPException, *_NETWORK) as exc:
            self.kit.log.warning("could not show the approval outcome on Discord (%s)", _describe(exc))

    # --- sending ------------------------------------------------------------------------

    def render(self, markdown: str) -> list[str]:
        return render(markdown, self.capabilities.max_chars)

    def _http(self) -> discord.http.HTTPClient:
        if self.client is None or self.client.is_closed():
            raise DeliveryError("Discord is not connected")
        return self.client.http

    @staticmethod
    def _channel(target: Target) -> int:
        return int(target.thread_id or target.chat_id)

    def _remember(self, message_id: str, channel_id: int) -> str:
        self._sent_in[message_id] = channel_id
        while len(self._sent_in) > REMEMBERED:
            self._sent_in.popitem(last=False)
        return message_id

    def _channel_of(self, target: Target, message_id: str) -> int:
        """Where a sent message lives: the kit edits by chat, and a thread's messages are in the thread."""
        return self._sent_in.get(message_id) or self._channel(target)

    def _pending_for(self, target: Target) -> _Pending | None:
        """The slash command this send answers: the one it names (`reply_to`, the interaction's id),
        never another; a command's answer and a stop's "Stopped." name theirs (channels/kit)."""
        pending = self._pending.get(target.reply_to or "")
        if pending is None or time.monotonic() - pending.at > INTERACTION_LIFETIME:
            return None
        return pending

    async def send_text(self, target: Target, text: str) -> str:
        pending = self._pending_for(target)
        if pending is not None:
            sent = await self._answer_command(pending, text)
            if sent is not None:
                return sent
        reference = None
        if target.reply_to and target.reply_to.isdigit() and target.reply_to not in self._pending:
            reference = {"message_id": target.reply_to, "channel_id": str(self._channel(target)),
                         "fail_if_not_exists": False}  # a deleted question still gets its answer
        return await self._send(target, "a message", content=text, message_reference=reference, nonce=_nonce(target))

    async def _answer_command(self, pending: _Pending, text: str) -> str | None:
        """The placeholder replaced by the first chunk, later chunks as follow-ups; None if the token expired."""
        try:
            if not pending.answered:
                message = await pending.interaction.edit_original_response(content=text, allowed_mentions=NO_PINGS)
                pending.answered = True
            else:
                message = await pending.interaction.followup.send(text, allowed_mentions=NO_PINGS, wait=True)
            return self._remember(str(message.id), message.channel.id if message.channel else int(pending.channel_id))
        except discord.NotFound:
            self._pending.pop(str(pending.interaction.id), None)
            return None
        except (discord.HTTPException, *_NETWORK) as exc:
            raise delivery_error(exc, "a command answer") from None

    async def _send(self, target: Target, what: str, **fields: Any) -> str:
        http = self._http()
        channel = self._channel(target)
        try:
            with handle_message_parameters(allowed_mentions=NO_PINGS, **fields) as params:
                data = await http.send_message(channel, params=params)
        except (discord.HTTPException, discord.RateLimited, *_NETWORK) as exc:
            raise delivery_error(exc, what) from None
        return self._remember(str(data["id"]), channel)

    async def typing(self, target: Target) -> None:
        try:
            await self._http().send_typing(self._channel(target))
        except (discord.HTTPException, discord.RateLimited, *_NETWORK) as exc:
            raise delivery_error(exc, "the typing indicator") from None

    async def edit_text(self, target: Target, message_id: str, text: str) -> None:
        """Edit a message in place; its buttons go (an answered approval prompt is no longer pressable)."""
        http = self._http()
        try:
            with handle_message_parameters(content=text, view=None, allowed_mentions=NO_PINGS) as params:
                await http.edit_message(self._channel_of(target, message_id), int(message_id), params=params)
        except (discord.HTTPException, discord.RateLimited, *_NETWORK) as exc:
            raise delivery_error(exc, "an edit") from None

    async def delete(self, target: Target, message_id: str) -> None:
        try:
            await self._http().delete_message(self._channel_of(target, message_id), int(message_id))
        except discord.NotFound:
            return
        except (discord.HTTPException, discord.RateLimited, *_NETWORK) as exc:
            raise delivery_error(exc, "a delete") from None

    async def send_approval(self, target: Target, approval_id: str, text: str) -> str | None:
        """The prompt with Approve / Deny buttons; the ids in the buttons outlive this process."""
        view = discord.ui.View(timeout=None)
        view.add_item(discord.ui.Button(label="Approve", style=discord.ButtonStyle.success,
                                        custom_id=approval_custom_id(approval_id, True)))
        view.add_item(discord.ui.Button(label="Deny", style=discord.ButtonStyle.danger,
                                        custom_id=approval_custom_id(approval_id, False)))
        return await self._send(target, "an approval prompt", content=text, view=view)

    async def send_file(self, target: Target, name: str, data: bytes, caption: str = "") -> str:
        """A file as an attachment (Discord's upload limit for bots is 10 MiB per message)."""
        file = discord.File(io.BytesIO(data), filename=name)
        return await self._send(target, "a file", content=caption or None, files=[file], nonce=_nonce(target))

    async def register_commands(self, commands: list[tuple[str, str]]) -> None:
        """Global application commands (they work in servers and DMs), written only when they changed."""
        if not self.settings.register_commands:
            return
        client = self.client
        if client is None or client.application_id is None:
            return
        want = command_payload(commands)
        try:
            have = await client.http.get_global_commands(client.application_id)
            if not _same_commands(list(have), want):
                await client.http.bulk_upsert_global_commands(client.application_id, want)  # type: ignore[arg-type]
        except (discord.HTTPException, *_NETWORK) as exc:
            self.kit.log.warning("could not register the Discord slash commands (%s); the text commands still work",
                                 _describe(exc))


async def _first(task: asyncio.Task[None], awaitable: Any, timeout: float | None = None) -> bool:
    """Wait for `awaitable` or for `task` to end; True when `awaitable` finished first (within `timeout`)."""
    other = asyncio.ensure_future(awaitable)
    try:
        await asyncio.wait({task, other}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        return other.done() and not task.done()
    finally:
        other.cancel()


def _describe(exc: BaseException) -> str:
    if isinstance(exc, discord.HTTPException):
        return f"{exc.status} {exc.text or exc.__class__.__name__}"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


class _QuietReconnects(logging.Filter):
    """discord.py logs each reconnect attempt with a traceback while Discord is down; one line says it."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.getMessage().startswith("Attempting a reconnect"):
            record.exc_info, record.exc_text = None, None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


logging.getLogger("discord.client").addFilter(_QuietReconnects())
# The bot never joins a voice channel: discord.py's warnings that its voice packages (PyNaCl, davey) are
# missing would only alarm whoever reads the log. They are class flags it checks once per client.
discord.voice_client.VoiceClient.warn_nacl = False
discord.voice_client.VoiceClient.warn_dave = False
