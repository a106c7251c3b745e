"""FakeFeishu: the Feishu Open Platform on 127.0.0.1 as a custom app's bot sees it.

HTTP (JSON answers `{"code", "msg", …}`, code 0 for success):
- `POST /open-apis/auth/v3/tenant_access_token/internal` and `app_access_token/internal`: app_id and
  app_secret checked (10014 "app secret invalid" otherwise).
- `GET /open-apis/bot/v3/info`; `GET /open-apis/contact/v3/users/{open_id}?user_id_type=open_id` (a name); `POST /open-apis/im/v1/messages?receive_id_type=chat_id`, `POST
  …/messages/{id}/reply` (`reply_in_thread`), `PUT …/messages/{id}` (edit text/post), `PATCH
  …/messages/{id}` (a card's content), `DELETE …/messages/{id}`, `POST /open-apis/im/v1/files`
  (multipart), `GET …/messages/{id}/resources/{key}?type=file|image` (what a person sent). Each
  checks the bearer tenant_access_token: a wrong one is HTTP 400 with
  `{"code": 99991663, "msg": "Invalid access token for authorization…"}`; an injected rate limit is HTTP
  429 `{"code": 99991400}` with `x-ogw-ratelimit-reset`; an injected refusal is 230002 (bot not in chat).
- A create or reply carrying a `uuid` (at most 50 characters, else 99992402 "field validation failed"):
  the same uuid within an hour sends at most one message, the request answered with the one made.
- `POST /callback/ws/endpoint` (`{"AppID", "AppSecret"}`): the long connection's WebSocket URL with
  `device_id` and `service_id`, and the ClientConfig (ping interval, reconnect settings).

The WebSocket speaks the SDK's own protobuf frames (`lark_oapi.ws.pb.pbbp2_pb2.Frame`: the protocol's
definition): a ping control frame is answered by a pong; an event goes out as a data frame (headers
`type=event`, `message_id`, `trace_id`, `sum=1`, `seq=0`, payload the event's JSON), and the client
answers it with the same frame whose payload is `{"code": 200|500, "data": base64}`. An event is
acknowledged only by a 200; a 500, or a connection that closes before answering, makes the fake deliver
it again (after `redelivery_seconds`, or on the next connection), as Feishu does. Runs its own loop in a
thread; state sits behind one lock. What it stores and how it refuses: records.py.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import secrets
import threading
import time
import uuid
from typing import Any

from aiohttp import WSMsgType, web
from lark_oapi.ws.pb.pbbp2_pb2 import Frame

from tests.fakes.feishu.records import TENANT, Call, Message, Refusal, User, check_content, error, new_id

APP_ID = "cli_a1b2c3d4e5f60718"
APP_SECRET = "s" * 32
BOT_NAME = "clawbot"
UUID_MAX = 50  # im/v1/messages' `uuid`: "最大长度：50 字符"
UUID_WINDOW_SECONDS = 3600.0  # "持有相同uuid的请求1小时内至多成功发送一条消息"
BAD_TOKEN = {"code": 99991663, "msg": "Invalid access token for authorization. Please make a request with token attached."}


class FakeFeishu:
    def __init__(self, *, redelivery_seconds: float = 0.5, ping_seconds: int = 2) -> None:
        self._lock = threading.Lock()
        self.app_id, self.app_secret = APP_ID, APP_SECRET
        self.bot = User(new_id("ou_"), new_id("on_"), BOT_NAME)
        self.tokens: set[str] = set()
        self.users: dict[str, User] = {}
        self.chats: dict[str, dict[str, Any]] = {}
        self.messages: list[Message] = []
        self.calls: list[Call] = []
        self.redelivery_seconds = redelivery_seconds
        self.ping_seconds = ping_seconds
        self.pending: dict[str, bytes] = {}  # event_id -> payload, until a 200 answers it
        self.acked: set[str] = set()
        self.answers: dict[str, dict[str, Any]] = {}  # event_id -> the client's last decoded response payload
        self.deliveries: list[str] = []  # event ids, each time one was sent
        self._frames: dict[str, str] = {}  # a frame's message_id -> event_id
        self._failures: list[Refusal] = []
        self.files: dict[str, dict[str, Any]] = {}  # file_key -> {"name", "data"}: what the bot uploaded
        self.resources: dict[tuple[str, str], tuple[str, bytes]] = {}  # (message id, key) -> (type, bytes)
        self._sockets: list[web.WebSocketResponse] = []
        self._uuids: dict[str, tuple[float, Message]] = {}  # a send's uuid -> (when, the message it made)
        self._held = False  # hold_message_answers()
        self._late: list[float] = []  # answer_late(): delays of the next message sends' answers
        self._release = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._seq = itertools.count(1)
        self.port = 0

    # -- lifecycle --------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "FakeFeishu":
        ready = threading.Event()
        self._loop = asyncio.new_event_loop()

        def run() -> None:
            assert self._loop is not None
            asyncio.set_event_loop(self._loop)
            self._loop.run_until_complete(self._serve())
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, name="fake-feishu", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("fake Feishu did not start")
        return self

    async def _serve(self) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/callback/ws/endpoint", self._endpoint)
        app.router.add_get("/ws", self._websocket)
        app.router.add_route("*", "/open-apis/{tail:.*}", self._rest)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    def stop(self) -> None:
        """The platform goes away: sockets close, connections are refused."""
        if self._loop is None:
            return

        async def shutdown() -> None:
            for ws in list(self._sockets):
                await ws.close()
            if self._runner is not None:
                await self._runner.cleanup()

        asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)
        self._loop.close()
        self._loop = None

    def __enter__(self) -> "FakeFeishu":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- the world around the bot ------------------------------------------------------------
    def add_user(self, name: str) -> User:
        user = User(new_id("ou_"), new_id("on_"), name)
        with self._lock:
            self.users[user.open_id] = user
        return user

    def p2p_chat(self, user: User) -> str:
        with self._lock:
            for cid, chat in self.chats.items():
                if chat["type"] == "p2p" and chat["user"] == user.open_id:
                    return cid
            cid = new_id("oc_")
            self.chats[cid] = {"type": "p2p", "user": user.open_id, "name": ""}
        return cid

    def add_group(self, name: str) -> str:
        cid = new_id("oc_")
        with self._lock:
            self.chats[cid] = {"type": "group", "user": "", "name": name}
        return cid

    def connected(self) -> bool:
        with self._lock:
            return bool(self._sockets)

    def write(self, user: User, chat_id: str, text: str, *, mention: bool = False, root_id: str = "",
              thread_id: str = "") -> dict[str, Any]:
        """`user` sends `text` in `chat_id` (`mention`: `@clawbot text`, as Feishu writes it: a placeholder
        `@_user_1` and the bot in `mentions`); the `im.message.receive_v1` event delivered."""
        with self._lock:
            chat = self.chats[chat_id]
            body = f"@_user_1 {text}" if mention else text
            message = Message(new_id("om_"), chat_id, user.open_id, "text", json.dumps({"text": body}),
                              root_id=root_id, parent_id=root_id, thread_id=thread_id, at=time.time())
            self.messages.append(message)
        mentions = [{"key": "@_user_1", "id": {"open_id": self.bot.open_id, "union_id": self.bot.union_id,
                                               "user_id": ""}, "name": BOT_NAME, "tenant_key": TENANT}] if mention else []
        event = {"sender": {"sender_id": {"open_id": user.open_id, "union_id": user.union_id, "user_id": ""},
                            "sender_type": "user", "tenant_key": TENANT},
                 "message": {"message_id": message.id, "root_id": root_id, "parent_id": root_id,
                             "thread_id": thread_id, "create_time": str(int(message.at * 1000)),
                             "update_time": str(int(message.at * 1000)), "chat_id": chat_id,
                             "chat_type": chat["type"], "message_type": "text", "content": message.content,
                             **({"mentions": mentions} if mentions else {})}}
        return self.deliver("im.message.receive_v1", event)

    def write_file(self, user: User, chat_id: str, name: str, data: bytes, *, image: bool = False) -> dict[str, Any]:
        """`user` sends a file (or an image) in `chat_id`: a `file` / `image` message whose content names a
        key the bot downloads with im/v1/messages/:id/resources/:key."""
        key = new_id("img_v3_" if image else "file_v3_")
        content = json.dumps({"image_key": key} if image else {"file_key": key, "file_name": name})
        with self._lock:
            chat = self.chats[chat_id]
            message = Message(new_id("om_"), chat_id, user.open_id, "image" if image else "file", content,
                              at=time.time())
            self.messages.append(message)
            self.resources[(message.id, key)] = ("image" if image else "file", data)
        event = {"sender": {"sender_id": {"open_id": user.open_id, "union_id": user.union_id, "user_id": ""},
                            "sender_type": "user", "tenant_key": TENANT},
                 "message": {"message_id": message.id, "root_id": "", "parent_id": "", "thread_id": "",
                             "create_time": str(int(message.at * 1000)), "update_time": str(int(message.at * 1000)),
                             "chat_id": chat_id, "chat_type": chat["type"], "message_type": message.msg_type,
                             "content": content}}
        return self.deliver("im.message.receive_v1", event)

    def deliver(self, event_type: str, event: dict[str, Any]) -> dict[str, Any]:
        """Send one event (schema 2.0) over the long connection; it stays pending until answered with 200."""
        envelope = {"schema": "2.0", "header": {"event_id": uuid.uuid4().hex, "event_type": event_type,
                                                "create_time": str(int(time.time() * 1000)), "token": "",
                                                "app_id": self.app_id, "tenant_key": TENANT}, "event": event}
        payload = json.dumps(envelope).encode()
        with self._lock:
            self.pending[envelope["header"]["event_id"]] = payload
        self._send_event(envelope["header"]["event_id"], payload)
        return envelope

    def redeliver(self, envelope: dict[str, Any]) -> None:
        """Feishu delivers the same event (same event_id, same message) again."""
        self._send_event(envelope["header"]["event_id"], json.dumps(envelope).encode())

    def acknowledged(self, envelope: dict[str, Any]) -> bool:
        with self._lock:
            return envelope["header"]["event_id"] in self.acked

    def press(self, user: User, message: Message, approve: bool) -> dict[str, Any]:
        """What Feishu does when `user` presses a card's button: a `card.action.trigger` callback carrying the
        button's value and the presser; returns the client's answer (its toast) once it came."""
        card = json.loads(message.content)
        [button] = [b for el in card.get("elements") or [] if el.get("tag") == "action" for b in el["actions"]
                    if bool(b["value"].get("approve")) == approve]
        envelope = self.deliver("card.action.trigger", {
            "operator": {"tenant_key": TENANT, "user_id": "", "open_id": user.open_id, "union_id": user.union_id},
            "token": new_id("c-"), "action": {"value": button["value"], "tag": "button"}, "host": "im_message",
            "context": {"open_message_id": message.id, "open_chat_id": message.chat_id}})
        event_id = envelope["header"]["event_id"]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with self._lock:
                if event_id in self.acked:
                    return self.answers.get(event_id) or {}
            time.sleep(0.05)
        raise AssertionError("the card press was never answered")

    # -- what the bot did ---------------------------------------------------------------------
    def sent_to(self, chat_id: str | None = None) -> list[Message]:
        with self._lock:
            return [m for m in self.messages if m.sender == self.app_id and not m.deleted
                    and (chat_id is None or m.chat_id == chat_id)]

    def all_sent_to(self, chat_id: str) -> list[Message]:
        with self._lock:
            return [m for m in self.messages if m.sender == self.app_id and m.chat_id == chat_id]

    def calls_to(self, method: str, path_start: str) -> list[Call]:
        with self._lock:
            return [c for c in self.calls if c.method == method and c.path.startswith(path_start)]

    def send_requests(self, chat_id: str) -> list[Call]:
        """Every request to send a message to this chat (create, or a reply to one of its messages), answered
        with a new message or not."""
        with self._lock:
            ids = {m.id for m in self.messages if m.chat_id == chat_id}
            return [c for c in self.calls if c.method == "POST" and isinstance(c.body, dict) and (
                (c.path == "/im/v1/messages" and c.body.get("receive_id") == chat_id)
                or (c.path.endswith("/reply") and c.path.split("/")[4] in ids))]

    def hold_message_answers(self) -> None:
        """From now on a message sent is stored, but the HTTP answer saying so waits for
        release_message_answers(): a client killed meanwhile never learns that Feishu took it."""
        with self._lock:
            self._held = True

    def release_message_answers(self) -> None:
        with self._lock:
            self._held = False
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._release.set)

    def answer_late(self, seconds: float, count: int = 1) -> None:
        """The next `count` messages sent are stored at once, their HTTP answers sent `seconds` later: a
        client whose timeout is shorter never learns that Feishu took them."""
        with self._lock:
            self._late += [seconds] * count

    # -- failures ----------------------------------------------------------------------------
    def rate_limit(self, seconds: int) -> None:
        with self._lock:
            self._failures.append(Refusal(429, 99991400, "request trigger frequency limit",
                                           {"x-ogw-ratelimit-limit": "5", "x-ogw-ratelimit-reset": str(seconds)}))

    def fail_next_send(self) -> None:
        with self._lock:
            self._failures.append(Refusal(400, 230002, "Bot/User can NOT be out of the chat."))

    def rotate_secret(self) -> None:
        """The app's secret is reset in the developer console: old tokens and the old secret stop working."""
        with self._lock:
            self.app_secret = "rotated" + secrets.token_hex(8)
            self.tokens.clear()

    # -- the long connection -----------------------------------------------------------------
    def _send_event(self, event_id: str, payload: bytes) -> None:
        if self._loop is None:
            return
        asyncio.run_coroutine_threadsafe(self._push(event_id, payload), self._loop).result(10)

    async def _push(self, event_id: str, payload: bytes) -> None:
        frame = Frame()
        frame_id = uuid.uuid4().hex
        for key, value in (("type", "event"), ("message_id", frame_id), ("trace_id", uuid.uuid4().hex),
                           ("sum", "1"), ("seq", "0")):
            header = frame.headers.add()
            header.key, header.value = key, value
        frame.SeqID, frame.LogID, frame.service, frame.method = next(self._seq), 0, 1, 1
        frame.payload = payload
        with self._lock:
            self._frames[frame_id] = event_id
            sockets = list(self._sockets)
        for ws in sockets[-1:]:  # one connection per app gets each event
            try:
                await ws.send_bytes(frame.SerializeToString())
                with self._lock:
                    self.deliveries.append(event_id)
            except (ConnectionError, RuntimeError):
                pass

    async def _endpoint(self, request: web.Request) -> web.Response:
        body = await request.json()
        with self._lock:
            self.calls.append(Call("POST", "/callback/ws/endpoint", {"AppID": body.get("AppID")}, time.monotonic()))
            ok = body.get("AppID") == self.app_id and body.get("AppSecret") == self.app_secret
        if not ok:
            return web.json_response({"code": 1000040344, "msg": "app_id or app_secret invalid"})
        url = f"ws://127.0.0.1:{self.port}/ws?device_id={uuid.uuid4().hex}&service_id=1"
        return web.json_response({"code": 0, "msg": "ok", "data": {"URL": url, "ClientConfig": {
            "ReconnectCount": -1, "ReconnectInterval": 1, "ReconnectNonce": 0, "PingInterval": self.ping_seconds}}})

    async def _websocket(self, request: web.Request) -> web.StreamResponse:
        ws = web.WebSocketResponse(heartbeat=None)
        await ws.prepare(request)
        with self._lock:
            self._sockets.append(ws)
            waiting = list(self.pending.items())
        for event_id, payload in waiting:  # what was never answered is delivered again
            await self._push(event_id, payload)
        try:
            async for msg in ws:
                if msg.type != WSMsgType.BINARY:
                    continue
                frame = Frame()
                frame.ParseFromString(msg.data)
                headers = {h.key: h.value for h in frame.headers}
                if frame.method == 0 and headers.get("type") == "ping":
                    pong = Frame()
                    header = pong.headers.add()
                    header.key, header.value = "type", "pong"
                    pong.service, pong.method, pong.SeqID, pong.LogID = frame.service, 0, 0, 0
                    await ws.send_bytes(pong.SerializeToString())
                elif frame.method == 1:
                    self._answered(headers.get("message_id", ""), frame.payload)
        finally:
            with self._lock:
                self._sockets.remove(ws)
        return ws

    def _answered(self, frame_id: str, payload: bytes) -> None:
        with self._lock:
            event_id = self._frames.pop(frame_id, "")
            if not event_id:
                return
            try:
                answer = json.loads(payload)
            except ValueError:
                answer = {"code": 0}
            if answer.get("data"):
                try:
                    answer["data"] = json.loads(base64.b64decode(answer["data"]))
                except ValueError:
                    pass
            self.answers[event_id] = answer
            if answer.get("code") == 200:
                self.acked.add(event_id)
                self.pending.pop(event_id, None)
                return
            payload_again = self.pending.get(event_id)
        if payload_again is not None and self._loop is not None:
            self._loop.call_later(self.redelivery_seconds,
                                  lambda: asyncio.ensure_future(self._push(event_id, payload_again)))

    # -- HTTP --------------------------------------------------------------------------------
    async def _rest(self, request: web.Request) -> web.StreamResponse:
        path = "/" + request.match_info["tail"]
        body: Any = None
        if request.content_type.startswith("multipart/"):
            body = {}
            reader = await request.multipart()
            async for part in reader:  # type: ignore[union-attr]
                data = bytes(await part.read(decode=False))  # type: ignore[union-attr]
                if part.filename or part.name == "file":  # type: ignore[union-attr]
                    body[part.name] = {"filename": part.filename, "data": data}  # type: ignore[union-attr]
                else:
                    body[part.name] = data.decode()  # type: ignore[union-attr]
        elif request.can_read_body:  # the SDK's requests calls send JSON without naming it
            try:
                body = json.loads(await request.read())
            except ValueError:
                return error(400, 9499, "Bad Request: the body is not JSON")
        with self._lock:
            self.calls.append(Call(request.method, path, body, time.monotonic()))
        try:
            if path.startswith("/auth/v3/"):
                return self._token(path, body or {})
            self._authorize(request)
            response = self._route(request.method, path, body or {}, request.query)
        except Refusal as r:
            return error(r.status, r.code, r.msg, r.headers)
        with self._lock:
            sending = request.method == "POST" and path.startswith("/im/v1/messages")
            held = self._held and sending
            late = self._late.pop(0) if sending and self._late else 0.0
        if held:
            self._release.clear()
            await self._release.wait()
        if late:
            await asyncio.sleep(late)
        return response

    def _token(self, path: str, body: dict[str, Any]) -> web.Response:
        with self._lock:
            if body.get("app_id") != self.app_id:
                raise Refusal(400, 10003, "invalid param: app_id not exist")
            if body.get("app_secret") != self.app_secret:
                raise Refusal(400, 10014, "app secret invalid")
            token = new_id("t-")
            self.tokens.add(token)
        kind = "tenant_access_token" if "tenant" in path else "app_access_token"
        return web.json_response({"code": 0, "msg": "ok", kind: token, "expire": 7200})

    def _authorize(self, request: web.Request) -> None:
        header = request.headers.get("Authorization", "")
        with self._lock:
            ok = header.startswith("Bearer ") and header[7:] in self.tokens
        if not ok:
            raise Refusal(400, BAD_TOKEN["code"], BAD_TOKEN["msg"])

    def _route(self, method: str, path: str, body: dict[str, Any], query: Any) -> web.StreamResponse:
        parts = path.strip("/").split("/")
        if method == "GET" and path == "/bot/v3/info":
            return web.json_response({"code": 0, "msg": "ok", "bot": {
                "activate_status": 2, "app_name": BOT_NAME, "avatar_url": "", "ip_white_list": [],
                "open_id": self.bot.open_id}})
        if method == "GET" and parts[:3] == ["contact", "v3", "users"] and len(parts) == 4:
            if query.get("user_id_type") != "open_id":
                raise Refusal(400, 99992402, "field validation failed: user_id_type")
            with self._lock:
                user = self.users.get(parts[3])
            if user is None:
                raise Refusal(400, 41050, "no user authority error")
            return web.json_response({"code": 0, "msg": "success", "data": {"user": {
                "open_id": user.open_id, "union_id": user.union_id, "name": user.name}}})
        if method == "GET" and parts[:3] == ["im", "v1", "messages"] and len(parts) == 6 and parts[4] == "resources":
            with self._lock:
                found = self.resources.get((parts[3], parts[5]))
            if found is None or query.get("type") != found[0]:
                raise Refusal(400, 234003, "File not in msg.")
            return web.Response(body=found[1], content_type="application/octet-stream",
                                headers={"Content-Disposition": f'attachment; filename="{parts[5]}"'})
        if parts[:3] == ["im", "v1", "messages"]:
            if method == "POST" and len(parts) == 3:
                if query.get("receive_id_type") != "chat_id":
                    raise Refusal(400, 99992402, "field validation failed: receive_id_type")
                return self._create(str(body.get("receive_id") or ""), body)
            if method == "POST" and len(parts) == 5 and parts[4] == "reply":
                parent = self._message(parts[3])
                return self._create(parent.chat_id, body, parent=parent)
            if len(parts) == 4:
                message = self._message(parts[3])
                if method == "DELETE":
                    with self._lock:
                        message.deleted = True
                    return web.json_response({"code": 0, "msg": "success", "data": {}})
                if method in ("PUT", "PATCH"):
                    content = str(body.get("content") or "")
                    check_content(message.msg_type if method == "PATCH" else str(body.get("msg_type")), content)
                    if method == "PATCH" and message.msg_type != "interactive":
                        raise Refusal(400, 230001, "only interactive messages can be patched")
                    if method == "PUT" and message.msg_type not in ("text", "post"):
                        raise Refusal(400, 230001, "only text and post messages can be edited")
                    with self._lock:
                        message.edits.append(message.content)
                        message.content = content
                        if method == "PUT":
                            message.msg_type = str(body.get("msg_type"))
                    return web.json_response({"code": 0, "msg": "success", "data": message.json() if method == "PUT" else {}})
        if method == "POST" and path == "/im/v1/files":
            if body.get("file_type") not in ("opus", "mp4", "pdf", "doc", "xls", "ppt", "stream"):
                raise Refusal(400, 234001, "Invalid request param: file_type")
            upload = body.get("file") or {}
            key = new_id("file_v3_")
            with self._lock:
                self.files[key] = {"name": body.get("file_name"), "data": upload.get("data", b"")}
            return web.json_response({"code": 0, "msg": "success", "data": {"file_key": key}})
        raise Refusal(404, 404, "404 page not found")

    def _message(self, message_id: str) -> Message:
        with self._lock:
            found = next((m for m in self.messages if m.id == message_id and not m.deleted), None)
        if found is None:
            raise Refusal(400, 230011, "The message was withdrawn or does not exist.")
        return found

    def _create(self, chat_id: str, body: dict[str, Any], *, parent: Message | None = None) -> web.Response:
        with self._lock:
            if self._failures:
                raise self._failures.pop(0)
            known = chat_id in self.chats
        if not known:
            raise Refusal(400, 230001, "invalid receive_id")
        msg_type, content = str(body.get("msg_type") or ""), str(body.get("content") or "")
        check_content(msg_type, content)
        key = str(body.get("uuid") or "")
        if len(key) > UUID_MAX:
            raise Refusal(400, 99992402, f"field validation failed: uuid: the max length is {UUID_MAX}")
        with self._lock:
            # the same uuid within an hour sends at most one message: the request is answered with the one made
            seen = self._uuids.get(key) if key else None
            if seen is not None and time.monotonic() - seen[0] < UUID_WINDOW_SECONDS:
                return web.json_response({"code": 0, "msg": "success", "data": seen[1].json()})
        root = thread = ""
        if parent is not None:
            root = parent.root_id or parent.id
            if body.get("reply_in_thread") and not parent.thread_id:  # the message becomes a thread's root
                with self._lock:
                    parent.thread_id = "omt_" + secrets.token_hex(8)
            thread = parent.thread_id
        with self._lock:
            message = Message(new_id("om_"), chat_id, self.app_id, msg_type, content,
                              parent_id=parent.id if parent else "", root_id=root, thread_id=thread, at=time.time())
            self.messages.append(message)
            if key:
                self._uuids[key] = (time.monotonic(), message)
        return web.json_response({"code": 0, "msg": "success", "data": message.json()})
