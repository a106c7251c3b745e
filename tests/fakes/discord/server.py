"""FakeDiscord: the REST API, the Gateway and the CDN of Discord on one 127.0.0.1 port.

Why: the Discord adapter is tested with the real discord.py (its Gateway session, heartbeats,
RESUME and rate-limit handling are part of what is tested), without the network. The server runs
on its own thread and event loop, so a test can drive it from a blocking thread (daemon in a
subprocess) or from the event loop that runs an in-process ``discord.Client``.

The world it starts with: the bot user, an application, one guild with a text channel
``#general`` and a public thread under it, and two people (``alice``, the application owner,
and ``bob``).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import threading
from collections.abc import Iterator
from typing import Any

from aiohttp import web

from tests.fakes.discord import payloads as P
from tests.fakes.discord.gateway import Gateway
from tests.fakes.discord.interactions import Interaction, Interactions
from tests.fakes.discord.records import GatewayFrame, Recorder, RestCall, UploadedFile
from tests.fakes.discord.rest import API_PREFIX, Rest

JSONDict = dict[str, Any]


class FakeDiscord(Recorder, Interactions):
    def __init__(self, token: str | None = None, *, heartbeat_interval_ms: int = 41250,
                 privileged_intents: int = P.INTENT_MESSAGE_CONTENT, port: int = 0) -> None:
        self._cond = threading.Condition()
        self.token = token or f"{secrets.token_urlsafe(18)}.GfAkE1.{secrets.token_urlsafe(27)}"
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.privileged_intents = privileged_intents  # what the Developer Portal would have switched on
        self.calls: list[RestCall] = []
        self.frames: list[GatewayFrame] = []
        self.messages: dict[str, list[JSONDict]] = {}
        self.commands: dict[str | None, list[JSONDict]] = {}  # None: global commands
        self.interactions: dict[str, Interaction] = {}
        self.attachments: dict[str, tuple[bytes, str | None]] = {}  # CDN path -> (data, content type)
        self.identifies = 0
        self.resumes = 0

        self.application_id = P.snowflake()
        self.bot_user = P.user(self.application_id, "clawgate-bot", bot=True)
        self.owner_user = P.user(P.snowflake(), "alice")
        self.human_user = self.owner_user
        self.other_user = P.user(P.snowflake(), "bob")
        self.users: dict[str, JSONDict] = {u["id"]: u for u in (self.bot_user, self.owner_user, self.other_user)}
        guild_id = P.snowflake()
        self.guild_id = guild_id
        self.guilds: dict[str, JSONDict] = {guild_id: {"id": guild_id, "name": "clawgate-test",
                                                       "owner_id": self.owner_user["id"]}}
        self.channel_id = P.snowflake()
        self.channels: dict[str, JSONDict] = {self.channel_id: P.text_channel(self.channel_id, "general", guild_id)}
        self.thread_id = P.snowflake()  # a public thread under #general, started by alice
        self.channels[self.thread_id] = P.thread(self.thread_id, "long task", guild_id, self.channel_id,
                                                 self.owner_user["id"])
        self.bot_role_id = P.snowflake()  # the managed role Discord gives a bot when it is invited
        self.roles: dict[str, list[JSONDict]] = {guild_id: [P.role(self.bot_role_id, "clawgate-bot", managed=True)]}
        self.guild_members: dict[str, list[JSONDict]] = {
            guild_id: [P.member(self.bot_user, roles=[self.bot_role_id]),
                       *(P.member(u) for u in (self.owner_user, self.other_user))]}
        self.dm_channels: dict[str, str] = {}  # user id -> DM channel id

        self.rest = Rest(self)
        self.gateway = Gateway(self)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None
        self.port = port  # 0: a free one, chosen at the first start and kept for a restart

    # --- lifecycle -----------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def api_url(self) -> str:
        """What ``discord.http.Route.BASE`` (and an adapter's ``base_url``) should be."""
        return self.base_url + API_PREFIX

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def start(self) -> FakeDiscord:
        started = threading.Event()
        errors: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self._serve())
            except BaseException as exc:  # noqa: BLE001 - reported to start()
                errors.append(exc)
                started.set()
                return
            started.set()
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=run, name="fake-discord", daemon=True)
        self._thread.start()
        started.wait(10)
        if errors:
            raise errors[0]
        return self

    async def _serve(self) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", API_PREFIX + "/{tail:.*}", self.rest.handle)
        app.router.add_get("/attachments/{channel}/{attachment}/{filename}", self._cdn)
        app.router.add_get("/", self.gateway.handle)
        app.router.add_get("/resume-gateway", self.gateway.handle)
        self._runner = web.AppRunner(app, handle_signals=False, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self._site = site

    async def _shutdown(self) -> None:
        await self._site.stop()  # stop listening first: a client reconnecting now is refused, not left hanging
        await self.gateway.drop_connections(1001)
        await self._runner.cleanup()  # type: ignore[union-attr]

    def stop(self) -> None:
        """Go down like an outage: connections dropped, sessions forgotten; records and the world
        stay, and ``start()`` brings the server back on the same port."""
        if self._loop is None or self._thread is None:
            return
        with contextlib.suppress(Exception):
            self._call(self._shutdown(), timeout=10)
        self.gateway.expire_sessions()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop = None

    def __enter__(self) -> FakeDiscord:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _call(self, coro: Any, timeout: float = 10.0) -> Any:
        """Run ``coro`` on the fake's loop from any other thread and return its result."""
        assert self._loop is not None, "the fake is not started"
        if threading.current_thread() is self._thread:
            raise RuntimeError("FakeDiscord helpers block; call them from the test, not from the fake's own loop")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    @contextlib.contextmanager
    def discord_py_pointed_here(self) -> Iterator[None]:
        """Point discord.py at this server: its REST base and its Gateway URL, nothing else.

        discord.py's ``Client`` does not ask GET /gateway/bot (only ``AutoShardedClient`` does);
        it connects to ``DiscordWebSocket.DEFAULT_GATEWAY`` and resumes at READY's
        ``resume_gateway_url``.
        """
        import discord.gateway
        import discord.http
        import yarl

        old_base, old_gateway = discord.http.Route.BASE, discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY
        discord.http.Route.BASE = self.api_url
        discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(self.ws_url + "/")
        try:
            yield
        finally:
            discord.http.Route.BASE = old_base
            discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = old_gateway

    # --- the world -----------------------------------------------------------------------

    def guild_payload(self, guild_id: str) -> JSONDict:
        info = self.guilds[guild_id]
        mine = [c for c in self.channels.values() if c.get("guild_id") == guild_id]
        channels = [c for c in mine if c["type"] != P.CHANNEL_PUBLIC_THREAD]
        threads = [c for c in mine if c["type"] == P.CHANNEL_PUBLIC_THREAD]
        return P.guild(guild_id, info["name"], owner_id=info["owner_id"], channels=channels,
                       members=self.guild_members.get(guild_id, []), threads=threads,
                       roles=self.roles.get(guild_id, []))

    def dm_channel_for(self, user_id: str) -> JSONDict:
        with self._cond:
            user = self.users.setdefault(user_id, P.user(user_id, f"user{user_id[-4:]}"))
            channel_id = self.dm_channels.get(user_id)
            if channel_id is None:
                channel_id = self.dm_channels[user_id] = P.snowflake()
                self.channels[channel_id] = P.dm_channel(channel_id, user)
            return self.channels[channel_id]

    def store_attachment(self, channel_id: str, filename: str, data: bytes, content_type: str | None) -> JSONDict:
        """Keep ``data`` on the fake CDN; returns the attachment object that points at it."""
        attachment_id = P.snowflake()
        path = f"/attachments/{channel_id}/{attachment_id}/{filename}"
        with self._cond:
            self.attachments[path] = (data, content_type)
        url = f"{self.base_url}{path}?ex=0&is=0&hm={secrets.token_hex(8)}"
        return P.attachment(attachment_id, filename, len(data), url, content_type)

    async def _cdn(self, request: web.Request) -> web.Response:
        with self._cond:
            found = self.attachments.get(request.path)
        if found is None:
            return web.Response(status=404, text="Not Found")
        data, content_type = found
        return web.Response(body=data, content_type=content_type or "application/octet-stream")

    def _find(self, message_id: str) -> JSONDict | None:
        with self._cond:
            return next((m for ms in self.messages.values() for m in ms if m["id"] == str(message_id)), None)

    # --- events --------------------------------------------------------------------------

    def _visible(self, session: Any, event: str, data: JSONDict) -> JSONDict | None:
        """What ``session`` receives of ``event`` given its intents (None: nothing)."""
        if event not in ("MESSAGE_CREATE", "MESSAGE_UPDATE", "MESSAGE_DELETE"):
            return data
        in_guild = "guild_id" in data
        needed = P.INTENT_GUILD_MESSAGES if in_guild else P.INTENT_DIRECT_MESSAGES
        if not session.intents & needed:
            return None
        if event == "MESSAGE_DELETE" or not in_guild or session.intents & P.INTENT_MESSAGE_CONTENT:
            return data
        bot_id = self.bot_user["id"]
        if data["author"]["id"] == bot_id or any(u["id"] == bot_id for u in data.get("mentions", [])):
            return data
        # Without the MESSAGE_CONTENT intent a guild message arrives without its content.
        return {**data, "content": "", "embeds": [], "attachments": [], "components": []}

    async def _dispatch_async(self, event: str, data: JSONDict) -> None:
        for session in self.gateway.live_sessions():
            shown = self._visible(session, event, data)
            if shown is not None:
                await self.gateway.dispatch(session, event, shown)

    def _dispatch_all(self, event: str, data: JSONDict) -> None:
        self._call(self._dispatch_async(event, data))

    async def _store_and_dispatch(self, message: JSONDict) -> None:
        with self._cond:
            self.messages.setdefault(message["channel_id"], []).append(message)
            channel = self.channels.get(message["channel_id"])
            if channel is not None:
                channel["last_message_id"] = message["id"]
                if channel["type"] == P.CHANNEL_PUBLIC_THREAD:
                    channel["message_count"] += 1
                    channel["total_message_sent"] += 1
            self._cond.notify_all()
        if int(message.get("flags") or 0) & 64:
            return  # an ephemeral interaction answer is shown to one person, never dispatched
        event = dict(message)
        if "guild_id" in message and message["author"]["id"] in self.users:
            event["member"] = P.member(None)
        await self._dispatch_async("MESSAGE_CREATE", event)

    async def _apply_edit(self, message: JSONDict, body: JSONDict, files: list[UploadedFile]) -> None:
        with self._cond:
            for key in ("content", "embeds", "components", "flags"):
                if key in body and body[key] is not None:
                    message[key] = body[key]
            if "attachments" in body:
                kept = {str(a.get("id")) for a in body["attachments"] or []}
                message["attachments"] = [a for a in message["attachments"] if a["id"] in kept]
            for upload in files:
                message["attachments"].append(
                    self.store_attachment(message["channel_id"], upload.filename, upload.data, upload.content_type))
            message["edited_timestamp"] = P.iso_now()
            self._cond.notify_all()
        await self._dispatch_async("MESSAGE_UPDATE", dict(message))

    async def _delete(self, message: JSONDict) -> None:
        with self._cond:
            self.messages[message["channel_id"]].remove(message)
            self._cond.notify_all()
        data = {"id": message["id"], "channel_id": message["channel_id"]}
        if "guild_id" in message:
            data["guild_id"] = message["guild_id"]
        await self._dispatch_async("MESSAGE_DELETE", data)

    # --- what tests inject ---------------------------------------------------------------

    def _inbound(self, channel: JSONDict, author: JSONDict, content: str, *, mention_bot: bool,
                 attachments: list[tuple[str, bytes, str | None]] | None, mention_role: bool = False,
                 reply_to: JSONDict | None = None) -> JSONDict:
        if mention_bot:
            content = f"<@{self.bot_user['id']}> {content}"
        if mention_role:
            content = f"<@&{self.bot_role_id}> {content}"
        stored = [self.store_attachment(channel["id"], name, data, ctype) for name, data, ctype in attachments or []]
        mentions = [self.bot_user] if mention_bot else []
        if reply_to is not None and reply_to["author"]["id"] not in {m["id"] for m in mentions}:
            mentions.append(self.users[reply_to["author"]["id"]])  # a reply pings its author by default
        if channel.get("guild_id"):
            mentions = [{**u, "member": P.member(None)} for u in mentions]
        reference = None
        if reply_to is not None:
            reference = {"type": 0, "channel_id": reply_to["channel_id"], "message_id": reply_to["id"],
                         **({"guild_id": channel["guild_id"]} if channel.get("guild_id") else {})}
        message = P.message(P.snowflake(), channel["id"], author, content, guild_id=channel.get("guild_id"),
                            mentions=mentions, attachments=stored, message_reference=reference)
        if mention_role:
            message["mention_roles"] = [self.bot_role_id]
        if reply_to is not None:
            message["referenced_message"] = {k: v for k, v in reply_to.items() if k != "referenced_message"}
        self._call(self._store_and_dispatch(message))
        return message

    def inject_dm(self, content: str, *, user_id: str | int | None = None,
                  attachments: list[tuple[str, bytes, str | None]] | None = None) -> JSONDict:
        """Someone DMs the bot: MESSAGE_CREATE in their DM channel. ``attachments``: (name, bytes, type)."""
        author = self.users[str(user_id or self.human_user["id"])]
        channel = self.dm_channel_for(author["id"])
        return self._inbound(channel, author, content, mention_bot=False, attachments=attachments)

    def inject_guild_message(self, content: str, *, channel_id: str | int | None = None,
                             user_id: str | int | None = None, mention_bot: bool = False,
                             attachments: list[tuple[str, bytes, str | None]] | None = None,
                             mention_role: bool = False, reply_to: JSONDict | None = None) -> JSONDict:
        """Someone writes in a guild channel (``#general`` by default), mentioning the bot, the bot's
        managed role (``mention_role``), or neither; ``reply_to``: a stored message it replies to."""
        author = self.users[str(user_id or self.human_user["id"])]
        channel = self.channels[str(channel_id or self.channel_id)]
        return self._inbound(channel, author, content, mention_bot=mention_bot, attachments=attachments,
                             mention_role=mention_role, reply_to=reply_to)

    def redeliver(self, message: JSONDict) -> None:
        """Send MESSAGE_CREATE for an already delivered message again (same message id, new sequence
        number), as a client can see after a reconnect: an adapter must answer it once only."""
        event = dict(message)
        if "guild_id" in message:
            event["member"] = P.member(None)
        self._call(self._dispatch_async("MESSAGE_CREATE", event))

    def inject_event(self, event: str, data: JSONDict) -> None:
        """Dispatch any Gateway event to every live session (intents applied to MESSAGE_* events)."""
        self._call(self._dispatch_async(event, data))

    def force_reconnect(self) -> int:
        """Gateway op 7 RECONNECT to every connected session; returns how many were told."""
        return self._call(self.gateway.force_reconnect())

    def invalidate_session(self, *, resumable: bool = False) -> None:
        """Gateway op 9 INVALID_SESSION to every connected session."""
        self._call(self.gateway.invalidate(resumable))

    def drop_connections(self, code: int = 4000) -> None:
        """Close every Gateway WebSocket from the server side with ``code``."""
        self._call(self.gateway.drop_connections(code))

    def expire_sessions(self) -> None:
        """Forget every Gateway session: the next RESUME is answered with op 9."""
        self.gateway.expire_sessions()

    def rate_limit(self, path: str, *, method: str | None = None, retry_after: float = 0.5, times: int = 1,
                   is_global: bool = False) -> None:
        """The next ``times`` requests whose API path fully matches the regex ``path`` get a 429."""
        self.rest.add_rate_limit(method, path, retry_after, times, is_global)

    def fail(self, path: str, *, status: int, code: int, message: str, method: str | None = None,
             times: int = 1) -> None:
        """The next ``times`` matching requests get ``status`` with Discord's error body."""
        self.rest.add_failure(method, path, status, code, message, times)

    def connected(self) -> bool:
        """A Gateway session is open and has been sent READY or RESUMED."""
        with self._cond:
            return any(s.valid and s.connection is not None and s.events for s in self.gateway.sessions.values())
