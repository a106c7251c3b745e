"""FakeMattermost: a Mattermost server on 127.0.0.1 as a bot account sees it.

REST v4 (api/v4): `GET users/me`, `POST posts` (channel_id, message, root_id, file_ids,
props.attachments with actions), `PUT posts/{id}/patch`, `DELETE posts/{id}`, `POST users/{id}/typing`,
`POST files` (multipart: channel_id, files) and `GET files/{id}`, `GET channels/{id}`, `GET config/client`
(its `MaxPostSize`), `GET users/{id}`, `GET users/{id}/channels` (with `last_post_at`) and
`GET channels/{id}/posts?since=` (`{"order", "posts"}`). A wrong bearer
token is a 401 with Mattermost's error JSON `{"id", "message", "status_code", "request_id"}`; an
injected rate limit is a 429 with `X-Ratelimit-Limit/Remaining/Reset` and `Retry-After`; a post over
MaxPostSize (16,383 runes by default) is a 400 (`model.post.is_valid.msg.app_error`).

The WebSocket `/api/v4/websocket`: the client sends `authentication_challenge` with the token (seq 1),
the server answers `{"status": "OK", "seq_reply": 1}` and a `hello` event; then `posted` events whose
`data.post` is the post as a JSON string, each with the connection's next `seq`. A button press is what
the Mattermost server does for a client: POST to the action's `integration.url` with the user id, channel,
post id and the context it kept. Runs its own loop in a thread; state sits behind one lock.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import secrets
import string
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

BOT_TOKEN = "bottoken" + "x" * 18
BOT_USERNAME = "clawbot"
MAX_MESSAGE = 16383
PENDING_POST_TTL_SECONDS = 30.0  # the server's pendingPostIDsCacheTTL
TEAM_ID = "t" * 26


def new_id() -> str:
    """A Mattermost id: 26 lowercase base32 characters."""
    return "".join(secrets.choice(string.ascii_lowercase + "13456789") for _ in range(26))


@dataclass(frozen=True)
class User:
    id: str
    username: str
    is_bot: bool = False


@dataclass
class Call:
    method: str
    path: str
    body: Any
    at: float  # time.monotonic() when it arrived


@dataclass
class Post:
    id: str
    channel_id: str
    user_id: str
    message: str
    root_id: str = ""
    props: dict[str, Any] = field(default_factory=dict)
    file_ids: list[str] = field(default_factory=list)
    create_at: int = 0
    deleted: bool = False
    edits: list[str] = field(default_factory=list)  # earlier texts, oldest first

    def json(self, files: dict[str, dict[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "create_at": self.create_at, "update_at": self.create_at,
                               "edit_at": 0, "delete_at": 0, "is_pinned": False, "user_id": self.user_id,
                               "channel_id": self.channel_id, "root_id": self.root_id, "original_id": "",
                               "message": self.message, "type": "", "props": self.props, "hashtags": "",
                               "pending_post_id": "", "reply_count": 0, "metadata": {}}
        if self.file_ids:
            out["file_ids"] = self.file_ids
            out["metadata"]["files"] = [files[f]["info"] for f in self.file_ids if f in files]
        return out


class _Refusal(Exception):
    def __init__(self, status: int, error_id: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.error_id, self.message, self.headers = status, error_id, message, headers or {}


class FakeMattermost:
    def __init__(self, *, max_post_size: int = MAX_MESSAGE, advertise_post_size: bool = True) -> None:
        # 16,383 runes; 4,000 on a server whose database column predates Mattermost 5.0
        self.max_post_size = max_post_size
        self.advertise_post_size = advertise_post_size  # False: a client config without MaxPostSize (older servers)
        self._lock = threading.Lock()
        self.bot = User(new_id(), BOT_USERNAME, is_bot=True)
        self.token = BOT_TOKEN
        self.users: dict[str, User] = {self.bot.id: self.bot}
        self.channels: dict[str, dict[str, Any]] = {}
        self.posts: list[Post] = []
        self.files: dict[str, dict[str, Any]] = {}  # id -> {"info": FileInfo, "data": bytes}
        self.calls: list[Call] = []
        self.events: list[dict[str, Any]] = []  # every event sent (for redelivery)
        self._failures: list[_Refusal] = []  # refusals for the next POST /posts
        self._sockets: list[tuple[web.WebSocketResponse, itertools.count[int]]] = []
        self._clock = itertools.count(int(time.time() * 1000))
        self._pending_posts: dict[str, tuple[float, Post]] = {}  # pending_post_id -> (when, post)
        self._held = False  # hold_post_answers()
        self._release = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self.port = 0

    # -- lifecycle --------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "FakeMattermost":
        ready = threading.Event()
        self._loop = asyncio.new_event_loop()

        def run() -> None:
            assert self._loop is not None
            asyncio.set_event_loop(self._loop)
            self._loop.run_until_complete(self._serve())
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, name="fake-mattermost", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("fake Mattermost did not start")
        return self

    async def _serve(self) -> None:
        app = web.Application(client_max_size=200 * 1024 * 1024)
        app.router.add_get("/api/v4/websocket", self._websocket)
        app.router.add_route("*", "/api/v4/{tail:.*}", self._rest)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    def stop(self) -> None:
        """The server goes away: sockets close, connections are refused."""
        if self._loop is None:
            return

        async def shutdown() -> None:
            for ws, _ in list(self._sockets):
                await ws.close()
            if self._runner is not None:
                await self._runner.cleanup()

        asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)
        self._loop.close()
        self._loop = None

    def __enter__(self) -> "FakeMattermost":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- the world around the bot ------------------------------------------------------------
    def add_user(self, username: str) -> User:
        user = User(new_id(), username)
        with self._lock:
            self.users[user.id] = user
        return user

    def dm_channel(self, user: User) -> str:
        """The direct channel between `user` and the bot (type "D", named `<id>__<id>` sorted)."""
        name = "__".join(sorted((user.id, self.bot.id)))
        with self._lock:
            for cid, channel in self.channels.items():
                if channel["name"] == name:
                    return cid
            cid = new_id()
            self.channels[cid] = {"id": cid, "type": "D", "name": name, "display_name": "", "team_id": ""}
        return cid

    def add_channel(self, name: str, kind: str = "O") -> str:
        cid = new_id()
        with self._lock:
            self.channels[cid] = {"id": cid, "type": kind, "name": name, "display_name": name.title(),
                                  "team_id": TEAM_ID}
        return cid

    def connected(self) -> bool:
        with self._lock:
            return bool(self._sockets)

    def write(self, user: User, channel_id: str, text: str, *, root_id: str = "", mention: bool = False,
              files: list[tuple[str, str, bytes]] = (), props: dict[str, Any] | None = None) -> dict[str, Any]:  # type: ignore[assignment]
        """`user` posts `text` in `channel_id` (`mention`: as `@clawbot text`); the `posted` event sent."""
        message = f"@{BOT_USERNAME} {text}" if mention else text
        file_ids = [self._store_file(user.id, channel_id, name, mime, data) for name, mime, data in files]
        with self._lock:
            post = Post(new_id(), channel_id, user.id, message, root_id, dict(props or {}), file_ids,
                        next(self._clock))
            self.posts.append(post)
            channel = self.channels[channel_id]
            mentioned = [self.bot.id] if f"@{BOT_USERNAME}" in message and channel["type"] != "D" else []
            event = {"event": "posted", "data": {
                "channel_display_name": channel["display_name"], "channel_name": channel["name"],
                "channel_type": channel["type"], "post": json.dumps(post.json(self.files)),
                "sender_name": f"@{user.username}", "set_online": True, "team_id": channel["team_id"],
                **({"mentions": json.dumps(mentioned)} if mentioned else {})},
                "broadcast": {"omit_users": None, "user_id": "", "channel_id": channel_id, "team_id": ""}}
            self.events.append(event)
        self._broadcast(event)
        return event

    def redeliver(self, event: dict[str, Any]) -> None:
        self._broadcast(event)

    def _broadcast(self, event: dict[str, Any]) -> None:
        if self._loop is None:
            return

        async def send() -> None:
            for ws, seq in list(self._sockets):
                try:
                    await ws.send_json({**event, "seq": next(seq)})
                except (ConnectionError, RuntimeError):
                    pass

        asyncio.run_coroutine_threadsafe(send(), self._loop).result(10)

    def _store_file(self, user_id: str, channel_id: str, name: str, mime: str, data: bytes) -> str:
        file_id = new_id()
        info = {"id": file_id, "user_id": user_id, "channel_id": channel_id, "name": name,
                "extension": name.rpartition(".")[2] if "." in name else "", "size": len(data), "mime_type": mime,
                "create_at": next(self._clock)}
        with self._lock:
            self.files[file_id] = {"info": info, "data": data}
        return file_id

    def press(self, user: User, post: Post, action_id: str) -> dict[str, Any]:
        """What the server does when `user` presses a button: POST the kept context to the action's URL."""
        [action] = [a for att in post.props.get("attachments") or [] for a in att.get("actions") or []
                    if a.get("id") == action_id]
        integration = action["integration"]
        body = {"user_id": user.id, "user_name": user.username, "channel_id": post.channel_id, "team_id": TEAM_ID,
                "post_id": post.id, "trigger_id": new_id(), "type": "button", "data_source": "",
                "context": integration.get("context") or {}}
        return self.post_action(integration["url"], body)

    @staticmethod
    def post_action(url: str, body: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310 (loopback in tests)
                return {"status": response.status, **json.loads(response.read() or b"{}")}
        except urllib.error.HTTPError as e:
            return {"status": e.code}

    # -- what the bot did ---------------------------------------------------------------------
    def sent_to(self, channel_id: str | None = None, *, root_id: str | None = None) -> list[Post]:
        with self._lock:
            return [p for p in self.posts if p.user_id == self.bot.id and not p.deleted
                    and (channel_id is None or p.channel_id == channel_id)
                    and (root_id is None or p.root_id == root_id)]

    def all_sent_to(self, channel_id: str) -> list[Post]:
        """Deleted posts too (status lines)."""
        with self._lock:
            return [p for p in self.posts if p.user_id == self.bot.id and p.channel_id == channel_id]

    def calls_to(self, method: str, path_start: str) -> list[Call]:
        with self._lock:
            return [c for c in self.calls if c.method == method and c.path.startswith(path_start)]

    def file_data(self, file_id: str) -> bytes:
        with self._lock:
            return bytes(self.files[file_id]["data"])

    def file_name(self, file_id: str) -> str:
        with self._lock:
            return str(self.files[file_id]["info"]["name"])

    # -- failures ----------------------------------------------------------------------------
    def rate_limit(self, seconds: int) -> None:
        with self._lock:
            self._failures.append(_Refusal(429, "api.context.rate_limit", "Too many requests", {
                "X-Ratelimit-Limit": "10", "X-Ratelimit-Remaining": "0", "X-Ratelimit-Reset": str(seconds),
                "Retry-After": str(seconds)}))

    def fail_next_post(self, status: int = 403, error_id: str = "api.context.permissions.app_error",
                       message: str = "You do not have the appropriate permissions.") -> None:
        with self._lock:
            self._failures.append(_Refusal(status, error_id, message))

    def hold_post_answers(self) -> None:
        """From now on a new post is stored but its HTTP answer waits for release_post_answers(): a client
        killed meanwhile never learns that the server took it."""
        with self._lock:
            self._held = True

    def release_post_answers(self) -> None:
        with self._lock:
            self._held = False
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._release.set)

    def post_calls(self, message: str) -> int:
        """How many times a post with this text was asked for (answered with a new post or not)."""
        with self._lock:
            return sum(1 for c in self.calls if c.method == "POST" and c.path == "/posts"
                       and isinstance(c.body, dict) and c.body.get("message") == message)

    def revoke_token(self) -> None:
        with self._lock:
            self.token = "revoked" + new_id()

    # -- HTTP --------------------------------------------------------------------------------
    def _authorized(self, request: web.Request) -> bool:
        header = request.headers.get("Authorization", "")
        return header.lower().startswith("bearer ") and header[7:].strip() == self.token

    async def _rest(self, request: web.Request) -> web.StreamResponse:
        path = "/" + request.match_info["tail"]
        body: Any = None
        if request.content_type == "application/json":
            try:
                body = await request.json()
            except ValueError:
                return _error(400, "api.context.invalid_body_param.app_error", "Invalid or missing body in request.")
        elif request.content_type.startswith("multipart/"):
            body = await request.post()
        with self._lock:
            self.calls.append(Call(request.method, path, body if not hasattr(body, "getall") else dict(body),
                                   time.monotonic()))
        if not self._authorized(request):
            return _error(401, "api.context.session_expired.app_error", "Invalid or expired session, please login again.")
        try:
            response = await self._route(request.method, path, body, request.query)
        except _Refusal as r:
            return _error(r.status, r.error_id, r.message, r.headers)
        with self._lock:
            held = self._held and request.method == "POST" and path == "/posts"
        if held:
            self._release.clear()
            await self._release.wait()
        return response

    async def _route(self, method: str, path: str, body: Any, query: Any) -> web.StreamResponse:
        parts = path.strip("/").split("/")
        if method == "GET" and path == "/users/me":
            return web.json_response({"id": self.bot.id, "username": self.bot.username, "is_bot": True,
                                      "roles": "system_user", "locale": "en", "create_at": 0})
        if method == "POST" and parts[0] == "users" and len(parts) == 3 and parts[2] == "typing":
            self._channel(str((body or {}).get("channel_id")))
            return web.json_response({"status": "OK"})
        if method == "GET" and path == "/config/client":
            config = {"Version": "9.11.0", "BuildNumber": "9.11.0", "SiteName": "Mattermost", "EnableFile": "true"}
            if self.advertise_post_size:
                config["MaxPostSize"] = str(self.max_post_size)
            return web.json_response(config)
        if method == "GET" and parts[0] == "users" and len(parts) == 3 and parts[2] == "channels":
            with self._lock:  # the bot is in every channel here; DMs are all with the bot
                out = []
                for channel in self.channels.values():
                    times = [p.create_at for p in self.posts if p.channel_id == channel["id"]]
                    out.append({**channel, "last_post_at": max(times, default=0)})
            return web.json_response(out)
        if method == "GET" and parts[0] == "users" and len(parts) == 2 and parts[1] != "me":
            with self._lock:
                user = self.users.get(parts[1])
            if user is None:
                raise _Refusal(404, "app.user.missing_account.const", "Unable to find the user.")
            return web.json_response({"id": user.id, "username": user.username, "is_bot": user.is_bot})
        if method == "GET" and parts[0] == "channels" and len(parts) == 3 and parts[2] == "posts":
            self._channel(parts[1])
            since = int(query.get("since") or 0)
            with self._lock:
                found = [p for p in self.posts if p.channel_id == parts[1] and p.create_at >= since and not p.deleted]
                return web.json_response({"order": [p.id for p in reversed(found)],
                                          "posts": {p.id: p.json(self.files) for p in found},
                                          "next_post_id": "", "prev_post_id": ""})
        if method == "GET" and parts[0] == "channels" and len(parts) == 2:
            return web.json_response(self._channel(parts[1]))
        if method == "POST" and path == "/posts":
            return self._create_post(body or {})
        if parts[0] == "posts" and len(parts) >= 2:
            post = self._post(parts[1])
            if method == "PUT" and len(parts) == 3 and parts[2] == "patch":
                with self._lock:
                    if "message" in body:
                        _check_length(str(body["message"]), self.max_post_size)
                        post.edits.append(post.message)
                        post.message = str(body["message"])
                    if "props" in body:
                        post.props = dict(body["props"] or {})
                    return web.json_response(post.json(self.files))
            if method == "DELETE" and len(parts) == 2:
                with self._lock:
                    post.deleted = True
                return web.json_response({"status": "OK"})
        if method == "POST" and path == "/files":
            channel_id = str(body.get("channel_id") or "") if body is not None else ""
            self._channel(channel_id)
            infos = []
            for part in body.getall("files", []):
                data = part.file.read()
                file_id = self._store_file(self.bot.id, channel_id, part.filename, part.content_type, data)
                infos.append(self.files[file_id]["info"])
            return web.json_response({"file_infos": infos, "client_ids": []}, status=201)
        if method == "GET" and parts[0] == "files" and len(parts) == 2:
            with self._lock:
                stored = self.files.get(parts[1])
            if stored is None:
                raise _Refusal(404, "app.file_info.get.app_error", "Unable to find the file.")
            return web.Response(body=stored["data"], content_type=stored["info"]["mime_type"])
        raise _Refusal(404, "api.context.404.app_error", "Sorry, we could not find the page.")

    def _channel(self, channel_id: str) -> dict[str, Any]:
        with self._lock:
            channel = self.channels.get(channel_id)
        if channel is None:
            raise _Refusal(404, "app.channel.get.existing.app_error", "Unable to find the existing channel.")
        return channel

    def _post(self, post_id: str) -> Post:
        with self._lock:
            found = next((p for p in self.posts if p.id == post_id and not p.deleted), None)
        if found is None:
            raise _Refusal(404, "app.post.get.app_error", "Unable to get the post.")
        return found

    def _create_post(self, body: dict[str, Any]) -> web.Response:
        with self._lock:
            if self._failures:
                raise self._failures.pop(0)
        channel = self._channel(str(body.get("channel_id") or ""))
        message = str(body.get("message") or "")
        _check_length(message, self.max_post_size)
        root = str(body.get("root_id") or "")
        if root:
            parent = self._post(root)
            if parent.root_id:
                raise _Refusal(400, "api.post.create_post.root_id.app_error", "Invalid RootId parameter.")
        file_ids = [str(f) for f in body.get("file_ids") or []]
        if not message and not file_ids:
            raise _Refusal(400, "model.post.is_valid.msg.app_error", "Invalid message.")
        props = dict(body.get("props") or {})
        props["from_bot"] = "true"
        pending = str(body.get("pending_post_id") or "")
        with self._lock:
            # the server's deduplicateCreatePost: a pending_post_id seen in the last 30 s returns the post
            # already made (as stored: no pending_post_id, no new WebSocket event) instead of a second one
            seen = self._pending_posts.get(pending) if pending else None
            if seen is not None and time.monotonic() - seen[0] < PENDING_POST_TTL_SECONDS:
                return web.json_response(seen[1].json(self.files), status=201)
            post = Post(new_id(), channel["id"], self.bot.id, message, root, props, file_ids, next(self._clock))
            self.posts.append(post)
            if pending:
                self._pending_posts[pending] = (time.monotonic(), post)
            return web.json_response(post.json(self.files), status=201)

    async def _websocket(self, request: web.Request) -> web.StreamResponse:
        ws = web.WebSocketResponse(heartbeat=None)
        await ws.prepare(request)
        seq = itertools.count(1)
        first = await ws.receive(timeout=30)
        if first.type != WSMsgType.TEXT:
            await ws.close()
            return ws
        challenge = json.loads(first.data)
        ok = challenge.get("action") == "authentication_challenge" and (challenge.get("data") or {}).get("token") == self.token
        if not ok:
            await ws.send_json({"status": "FAIL", "seq_reply": challenge.get("seq"),
                                "error": {"id": "api.web_socket_router.not_authenticated.app_error",
                                          "message": "You are not authenticated.", "status_code": 401}})
            await ws.close(code=4001)
            return ws
        await ws.send_json({"status": "OK", "seq_reply": challenge.get("seq")})
        await ws.send_json({"event": "hello", "data": {"connection_id": new_id(), "server_version": "9.11.0"},
                            "broadcast": {"omit_users": None, "user_id": self.bot.id, "channel_id": "", "team_id": ""},
                            "seq": 0})
        entry = (ws, seq)
        with self._lock:
            self._sockets.append(entry)
        try:
            async for _ in ws:  # pings are answered by aiohttp; actions from the client are ignored here
                pass
        finally:
            with self._lock:
                self._sockets.remove(entry)
        return ws


def _check_length(message: str, limit: int) -> None:
    if len(message) > limit:
        raise _Refusal(400, "model.post.is_valid.msg.app_error", "Invalid Message.")


def _error(status: int, error_id: str, message: str, headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response({"id": error_id, "message": message, "detailed_error": "", "request_id": new_id(),
                              "status_code": status}, status=status, headers=headers)
