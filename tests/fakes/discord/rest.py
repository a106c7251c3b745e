"""The REST API under /api/v10 and the CDN: the endpoints discord.py calls, with Discord's refusals.

Every request is recorded first, then: ``Authorization: Bot <token>`` checked (401; interaction
callbacks and webhook-token routes are authorised by their token in the path, as on Discord),
injected failures and rate limits (429 with ``retry_after``, ``X-RateLimit-*`` and ``Via``, which
discord.py requires before it trusts a 429), then the endpoint itself with Discord's error codes
(10003 Unknown Channel, 10008 Unknown Message, 10062 Unknown interaction, 40060 already
acknowledged, 50006 empty message, 50035 Invalid Form Body, 40005 too large).
"""

from __future__ import annotations

import json
import math
import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aiohttp import web

from tests.fakes.discord import payloads as P
from tests.fakes.discord.records import RestCall, UploadedFile

if TYPE_CHECKING:
    from tests.fakes.discord.server import FakeDiscord

JSONDict = dict[str, Any]
API_PREFIX = "/api/v10"
UPLOAD_LIMIT = 10 * 1024 * 1024  # bots' default per-request upload limit
NONCE_MAX = 25  # "up to 25 characters"
NONCE_WINDOW_SECONDS = 300.0  # enforce_nonce's "past few minutes"
COMMAND_NAME = re.compile(r"^[-_\w]{1,32}$")


class ApiError(Exception):
    def __init__(self, status: int, body: JSONDict | None, headers: dict[str, str] | None = None) -> None:
        super().__init__(status, body)
        self.status, self.body, self.headers = status, body, headers or {}


def form_error(path: list[str | int], code: str, text: str) -> ApiError:
    return ApiError(400, P.error(50035, "Invalid Form Body", P.field_error(path, code, text)))


@dataclass
class Injected:
    """A failure a test asked for: the next ``times`` matching requests get it."""

    method: str | None
    path: re.Pattern[str]
    times: int
    status: int
    body: JSONDict
    headers: dict[str, str]


class Rest:
    """``FakeDiscord`` part: the REST routes."""

    def __init__(self, fake: FakeDiscord) -> None:
        self.fake = fake
        self.injected: list[Injected] = []
        self._nonces: dict[tuple[str, str], tuple[float, JSONDict]] = {}  # (author, nonce) -> (when, message)
        s = r"(\d+)"
        self.routes: list[tuple[str, re.Pattern[str], Any, bool]] = []  # method, path, handler, needs bot auth
        for method, path, handler, auth in [
            ("GET", "/gateway", self.get_gateway, False),
            ("GET", "/gateway/bot", self.get_gateway_bot, True),
            ("GET", "/users/@me", self.get_me, True),
            ("GET", "/oauth2/applications/@me", self.get_app, True),
            ("GET", f"/users/{s}", self.get_user, True),
            ("POST", "/users/@me/channels", self.open_dm, True),
            ("GET", f"/channels/{s}", self.get_channel, True),
            ("POST", f"/channels/{s}/messages", self.create_message, True),
            ("GET", f"/channels/{s}/messages", self.list_messages, True),
            ("GET", f"/channels/{s}/messages/{s}", self.get_message, True),
            ("PATCH", f"/channels/{s}/messages/{s}", self.edit_message, True),
            ("DELETE", f"/channels/{s}/messages/{s}", self.delete_message, True),
            ("POST", f"/channels/{s}/typing", self.typing, True),
            ("GET", f"/applications/{s}/commands", self.get_commands, True),
            ("PUT", f"/applications/{s}/commands", self.put_commands, True),
            ("GET", f"/applications/{s}/guilds/{s}/commands", self.get_commands, True),
            ("PUT", f"/applications/{s}/guilds/{s}/commands", self.put_commands, True),
            ("POST", rf"/interactions/{s}/([^/]+)/callback", self.interaction_callback, False),
            ("POST", rf"/webhooks/{s}/([^/]+)", self.followup, False),
            ("PATCH", rf"/webhooks/{s}/([^/]+)/messages/(@original|\d+)", self.edit_followup, False),
        ]:
            self.routes.append((method, re.compile(path + "$"), handler, auth))

    # --- plumbing ------------------------------------------------------------------------

    async def handle(self, request: web.Request) -> web.Response:
        path = request.path[len(API_PREFIX):]
        call = RestCall(request.method, path, dict(request.query), dict(request.headers))
        status, body, headers = 500, None, {}
        try:
            await self._read_body(request, call)
        finally:
            self.fake._record(call)  # recorded on arrival; status and response are filled in below
        try:
            status, body = await self._route(request, call)
        except ApiError as exc:
            status, body, headers = exc.status, exc.body, exc.headers
        with self.fake._cond:
            call.status, call.response = status, body
            self.fake._cond.notify_all()
        headers = {**self._ratelimit_headers(call), **headers}
        if body is None:
            return web.Response(status=status, headers=headers)
        # Exactly "application/json", as Discord sends it: discord.py parses JSON only then.
        headers["Content-Type"] = "application/json"
        return web.Response(body=json.dumps(body).encode(), status=status, headers=headers)

    async def _read_body(self, request: web.Request, call: RestCall) -> None:
        if request.content_type.startswith("multipart/"):
            reader = await request.multipart()
            async for part in reader:
                name = part.name or ""
                data = await part.read(decode=False)  # type: ignore[union-attr]
                if name == "payload_json":
                    call.json = json.loads(data)
                else:
                    content_type = part.headers.get("Content-Type")
                    call.files.append(UploadedFile(name, part.filename or name, content_type, bytes(data)))
        elif request.can_read_body:
            raw = await request.read()
            if raw:
                try:
                    call.json = json.loads(raw)
                except ValueError:
                    raise ApiError(400, P.error(50109, "The request body contains invalid JSON.")) from None

    async def _route(self, request: web.Request, call: RestCall) -> tuple[int, Any]:
        for method, pattern, handler, auth in self.routes:
            match = pattern.match(call.path)
            if match is None or method != call.method:
                continue
            if auth and call.headers.get("Authorization") != f"Bot {self.fake.token}":
                raise ApiError(401, P.error(0, "401: Unauthorized"))
            self._injected(call)
            return await handler(call, *match.groups())
        if any(p.match(call.path) for _, p, _, _ in self.routes):
            raise ApiError(405, P.error(0, "405: Method Not Allowed"))
        raise ApiError(404, P.error(0, "404: Not Found"))

    def _injected(self, call: RestCall) -> None:
        with self.fake._cond:
            for rule in self.injected:
                if rule.times > 0 and rule.method in (None, call.method) and rule.path.fullmatch(call.path):
                    rule.times -= 1
                    raise ApiError(rule.status, rule.body, rule.headers)

    def _ratelimit_headers(self, call: RestCall) -> dict[str, str]:
        bucket = format(abs(hash((call.method, re.sub(r"\d{6,}", "id", call.path)))) % (1 << 64), "016x")
        return {
            "X-RateLimit-Limit": "5",
            "X-RateLimit-Remaining": "4",
            "X-RateLimit-Reset": f"{time.time() + 1:.3f}",
            "X-RateLimit-Reset-After": "1.000",
            "X-RateLimit-Bucket": bucket,
            "Via": "1.1 google",
        }

    def add_rate_limit(self, method: str | None, path: str, retry_after: float, times: int, is_global: bool) -> None:
        headers = {
            "Retry-After": str(math.ceil(retry_after)),
            "X-RateLimit-Limit": "5",
            "X-RateLimit-Remaining": "0",
            "X-RateLimit-Reset": f"{time.time() + retry_after:.3f}",
            "X-RateLimit-Reset-After": f"{retry_after:.3f}",
            "X-RateLimit-Scope": "global" if is_global else "user",
            "Via": "1.1 google",
        }
        if is_global:
            headers["X-RateLimit-Global"] = "true"
        body = {"message": "You are being rate limited.", "retry_after": retry_after, "global": is_global, "code": 0}
        with self.fake._cond:
            self.injected.append(Injected(method, re.compile(path), times, 429, body, headers))

    def add_failure(self, method: str | None, path: str, status: int, code: int, message: str, times: int) -> None:
        with self.fake._cond:
            self.injected.append(Injected(method, re.compile(path), times, status, P.error(code, message), {}))

    # --- lookups -------------------------------------------------------------------------

    def _channel(self, channel_id: str) -> JSONDict:
        channel = self.fake.channels.get(channel_id)
        if channel is None:
            raise ApiError(404, P.error(10003, "Unknown Channel"))
        return channel

    def _message(self, channel_id: str, message_id: str) -> JSONDict:
        self._channel(channel_id)
        for message in self.fake.messages.get(channel_id, []):
            if message["id"] == message_id:
                return message
        raise ApiError(404, P.error(10008, "Unknown Message"))

    # --- endpoints -----------------------------------------------------------------------

    async def get_gateway(self, call: RestCall) -> tuple[int, Any]:
        return 200, {"url": self.fake.ws_url}

    async def get_gateway_bot(self, call: RestCall) -> tuple[int, Any]:
        limit = {"total": 1000, "remaining": 999, "reset_after": 14400000, "max_concurrency": 1}
        return 200, {"url": self.fake.ws_url, "shards": 1, "session_start_limit": limit}

    async def get_me(self, call: RestCall) -> tuple[int, Any]:
        return 200, {**self.fake.bot_user, "verified": True, "mfa_enabled": False, "email": None, "locale": "en-US"}

    async def get_user(self, call: RestCall, user_id: str) -> tuple[int, Any]:
        found = self.fake.users.get(user_id)
        if found is None:
            raise ApiError(404, P.error(10013, "Unknown User"))
        return 200, found

    async def get_app(self, call: RestCall) -> tuple[int, Any]:
        return 200, P.app_info(self.fake.application_id, self.fake.bot_user, self.fake.owner_user)

    async def open_dm(self, call: RestCall) -> tuple[int, Any]:
        recipient = str((call.json or {}).get("recipient_id", ""))
        if not recipient.isdigit():
            raise form_error(["recipient_id"], "NUMBER_TYPE_COERCE", "Value is not snowflake.")
        return 200, self.fake.dm_channel_for(recipient)

    async def get_channel(self, call: RestCall, channel_id: str) -> tuple[int, Any]:
        return 200, self._channel(channel_id)

    async def list_messages(self, call: RestCall, channel_id: str) -> tuple[int, Any]:
        """A channel's history as Discord gives it: newest first; with ``after`` the ``limit`` messages
        right after that id, else the ``limit`` newest before ``before`` (1 to 100, default 50)."""
        self._channel(channel_id)
        try:
            limit = int(call.query.get("limit", "50"))
            after, before = (int(call.query[k]) if k in call.query else None for k in ("after", "before"))
        except ValueError:
            raise form_error(["limit"], "NUMBER_TYPE_COERCE", "Value is not int.") from None
        if not 1 <= limit <= 100:
            raise form_error(["limit"], "NUMBER_TYPE_MAX", "int value should be between 1 and 100.")
        with self.fake._cond:
            shown = [m for m in self.fake.messages.get(channel_id, []) if not int(m.get("flags") or 0) & 64]
        ordered = sorted(shown, key=lambda m: int(m["id"]))
        if after is not None:
            picked = [m for m in ordered if int(m["id"]) > after][:limit]
        else:
            picked = [m for m in ordered if before is None or int(m["id"]) < before][-limit:]
        return 200, list(reversed(picked))

    async def get_message(self, call: RestCall, channel_id: str, message_id: str) -> tuple[int, Any]:
        return 200, self._message(channel_id, message_id)

    def _check_message_body(self, body: Any, files: list[UploadedFile], *, creating: bool) -> JSONDict:
        if not isinstance(body, dict):
            body = {}
        content = body.get("content")
        if content is not None and not isinstance(content, str):
            raise form_error(["content"], "STRING_TYPE_CONVERT", "Could not interpret value as string.")
        if content is not None and len(content) > P.MAX_CONTENT:
            raise form_error(["content"], "BASE_TYPE_MAX_LENGTH", f"Must be {P.MAX_CONTENT} or fewer in length.")
        nonce = body.get("nonce")
        if nonce is not None and len(str(nonce)) > NONCE_MAX:
            raise form_error(["nonce"], "BASE_TYPE_MAX_LENGTH", f"Must be {NONCE_MAX} or fewer in length.")
        embeds = body.get("embeds") or []
        if len(embeds) > 10:
            raise form_error(["embeds"], "BASE_TYPE_MAX_LENGTH", "Must be 10 or fewer in length.")
        for row_index, row in enumerate(body.get("components") or []):
            items = row.get("components") or []
            if row.get("type") != 1 or not 1 <= len(items) <= 5:
                raise form_error(["components", row_index], "COMPONENT_LAYOUT_WIDTH_EXCEEDED", "Invalid action row.")
            for index, item in enumerate(items):
                custom_id = item.get("custom_id")
                if item.get("type") == 2 and item.get("style") != 5 and not custom_id:
                    raise form_error(["components", row_index, "components", index, "custom_id"],
                                     "BASE_TYPE_REQUIRED", "This field is required")
                if custom_id is not None and len(custom_id) > 100:
                    raise form_error(["components", row_index, "components", index, "custom_id"],
                                     "BASE_TYPE_MAX_LENGTH", "Must be 100 or fewer in length.")
        if sum(len(f.data) for f in files) > UPLOAD_LIMIT:
            raise ApiError(413, P.error(40005, "Request entity too large"))
        if creating and not (content or "").strip() and not embeds and not files \
                and not body.get("components") and not body.get("sticker_ids") and not body.get("poll"):
            raise ApiError(400, P.error(50006, "Cannot send an empty message"))
        return body

    def _build_message(self, channel: JSONDict, body: JSONDict, files: list[UploadedFile],
                       interaction_metadata: JSONDict | None = None) -> JSONDict:
        fake = self.fake
        attachments = []
        described = {str(a.get("id")): a for a in body.get("attachments") or []}
        for index, upload in enumerate(files):
            meta = described.get(str(index), {})
            filename = meta.get("filename") or upload.filename
            attachments.append(fake.store_attachment(channel["id"], filename, upload.data, upload.content_type))
        reference = body.get("message_reference")
        referenced = None
        if reference is not None:
            ref_channel = str(reference.get("channel_id") or channel["id"])
            ref_id = str(reference.get("message_id"))
            referenced = next((m for m in fake.messages.get(ref_channel, []) if m["id"] == ref_id), None)
            if referenced is None and reference.get("fail_if_not_exists", True):
                raise form_error(["message_reference"], "MESSAGE_REFERENCE_UNKNOWN_MESSAGE", "Unknown message")
            reference = {"type": 0, "channel_id": ref_channel, "message_id": ref_id, **(
                {"guild_id": channel["guild_id"]} if channel.get("guild_id") else {})}
        content = body.get("content") or ""
        mentions = [u for uid, u in fake.users.items() if f"<@{uid}>" in content or f"<@!{uid}>" in content]
        message = P.message(
            P.snowflake(), channel["id"], fake.bot_user, content,
            guild_id=channel.get("guild_id"), mentions=mentions, attachments=attachments,
            embeds=body.get("embeds") or [], components=body.get("components") or [],
            message_reference=reference, nonce=body.get("nonce"), interaction_metadata=interaction_metadata,
        )
        message["flags"] = int(body.get("flags") or 0)
        if referenced is not None:  # a reply carries the message it answers, one level deep
            message["referenced_message"] = {k: v for k, v in referenced.items() if k != "referenced_message"}
        return message

    async def create_message(self, call: RestCall, channel_id: str) -> tuple[int, Any]:
        channel = self._channel(channel_id)
        body = self._check_message_body(call.json, call.files, creating=True)
        # enforce_nonce: "checked for uniqueness in the past few minutes. If another message was created by
        # the same author with the same nonce, that message will be returned and no new message will be created."
        key = (self.fake.bot_user["id"], str(body["nonce"])) if body.get("nonce") and body.get("enforce_nonce") else None
        if key is not None:
            seen = self._nonces.get(key)
            if seen is not None and time.monotonic() - seen[0] < NONCE_WINDOW_SECONDS:
                return 200, seen[1]
        message = self._build_message(channel, body, call.files)
        if key is not None:
            self._nonces[key] = (time.monotonic(), message)
        await self.fake._store_and_dispatch(message)
        return 200, message

    async def edit_message(self, call: RestCall, channel_id: str, message_id: str) -> tuple[int, Any]:
        message = self._message(channel_id, message_id)
        if message["author"]["id"] != self.fake.bot_user["id"]:
            raise ApiError(403, P.error(50005, "Cannot edit a message authored by another user"))
        body = self._check_message_body(call.json, call.files, creating=False)
        await self.fake._apply_edit(message, body, call.files)
        return 200, message

    async def delete_message(self, call: RestCall, channel_id: str, message_id: str) -> tuple[int, Any]:
        message = self._message(channel_id, message_id)
        await self.fake._delete(message)
        return 204, None

    async def typing(self, call: RestCall, channel_id: str) -> tuple[int, Any]:
        self._channel(channel_id)
        return 204, None

    async def get_commands(self, call: RestCall, app_id: str, guild_id: str | None = None) -> tuple[int, Any]:
        self._check_app(app_id, guild_id)
        with self.fake._cond:
            return 200, list(self.fake.commands.get(guild_id, []))

    def _check_app(self, app_id: str, guild_id: str | None) -> None:
        if app_id != self.fake.application_id:
            raise ApiError(403, P.error(50001, "Missing Access"))
        if guild_id is not None and guild_id not in self.fake.guilds:
            raise ApiError(403, P.error(50001, "Missing Access"))

    async def put_commands(self, call: RestCall, app_id: str, guild_id: str | None = None) -> tuple[int, Any]:
        self._check_app(app_id, guild_id)
        body = call.json
        if not isinstance(body, list):
            raise form_error([], "LIST_TYPE_CONVERT", "Must be an array.")
        if len(body) > 100:
            raise form_error([], "BASE_TYPE_MAX_LENGTH", "Must be 100 or fewer in length.")
        with self.fake._cond:
            old = {(c["name"], c["type"]): c for c in self.fake.commands.get(guild_id, [])}
        seen: set[tuple[str, int]] = set()
        stored = []
        for index, command in enumerate(body):
            name, ctype = command.get("name"), command.get("type", 1)
            description = command.get("description", "")
            if not isinstance(name, str) or not COMMAND_NAME.match(name) or (ctype == 1 and name != name.lower()):
                raise form_error([index, "name"], "APPLICATION_COMMAND_INVALID_NAME", "Command name is invalid")
            if ctype == 1 and not 1 <= len(description) <= 100:
                raise form_error([index, "description"], "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 100 in length.")
            if (name, ctype) in seen:
                raise form_error([index, "name"], "APPLICATION_COMMANDS_DUPLICATE_NAME",
                                 "Application command names must be unique")
            seen.add((name, ctype))
            previous = old.get((name, ctype))
            stored.append({
                "id": previous["id"] if previous else P.snowflake(),
                "application_id": app_id,
                "version": P.snowflake(),
                "type": ctype,
                "name": name,
                "name_localizations": command.get("name_localizations"),
                "description": description,
                "description_localizations": command.get("description_localizations"),
                "options": command.get("options") or [],
                "default_member_permissions": command.get("default_member_permissions"),
                "dm_permission": command.get("dm_permission", True),
                "nsfw": command.get("nsfw", False),
                "integration_types": command.get("integration_types") or [0],
                "contexts": command.get("contexts"),
                **({"guild_id": guild_id} if guild_id else {}),
            })
        with self.fake._cond:
            self.fake.commands[guild_id] = stored
        return 200, stored

    async def interaction_callback(self, call: RestCall, interaction_id: str, token: str) -> tuple[int, Any]:
        return await self.fake._interaction_callback(call, interaction_id, token)

    async def followup(self, call: RestCall, app_id: str, token: str) -> tuple[int, Any]:
        return await self.fake._followup(call, app_id, token, None)

    async def edit_followup(self, call: RestCall, app_id: str, token: str, message_id: str) -> tuple[int, Any]:
        return await self.fake._followup(call, app_id, token, message_id)
