"""FakeDingTalk: DingTalk's Stream gateway, OpenAPI and session webhooks on 127.0.0.1, as an app robot sees them.

- `POST /v1.0/gateway/connections/open` `{clientId, clientSecret, subscriptions, ua, localIp}`: the app's
  credentials checked (401 `InvalidAuthentication` otherwise), subscriptions must be `{type, topic}` objects;
  answers `{endpoint, ticket}`, the ticket good for one WebSocket connection.
- The WebSocket (`endpoint?ticket=`): envelopes `{specVersion, type, headers, data}` with `data` a JSON
  string. Robot messages are CALLBACK envelopes on `/v1.0/im/bot/messages/get` (only for a connection that
  subscribed to it); each must be ACKed (`{code: 200, headers: {messageId}, message, data}`); an
  unacknowledged one is delivered again on the next connection. SYSTEM `ping` (ACKed with its data) and
  `disconnect` (the socket is closed after a grace, as DingTalk does).
- `POST /v1.0/oauth2/accessToken` `{appKey, appSecret}` -> `{accessToken, expireIn}` (400 otherwise).
- `POST /v1.0/robot/oToMessages/batchSend` and `/v1.0/robot/groupMessages/send` with
  `x-acs-dingtalk-access-token` (401 `InvalidAuthentication` without a token it issued): `robotCode`,
  `msgKey` `sampleMarkdown`/`sampleText` and `msgParam` (a JSON string) checked (400 `invalidParameter.*`).
- `POST /v1.0/card/instances/createAndDeliver` (token as above): an interactive card (`cardTemplateId`,
  `outTrackId`, `callbackType` STREAM, `openSpaceId` `dtv1.card//IM_ROBOT.<userId>` or
  `dtv1.card//IM_GROUP.<openConversationId>` with its deliver model's `robotCode`, `cardData.cardParamMap`
  with the buttons in `sys_full_json_obj`). A press (`press`) is a CALLBACK envelope on
  `/v1.0/card/instances/callback` `{outTrackId, userId, content: {cardPrivateData: {actionIds}}}`; the
  client's ACK carries the card's answer to the presser.
- `POST /v1.0/robot/messageFiles/download` `{downloadCode, robotCode}` (token as above) -> `{downloadUrl}`,
  a URL on this server (`GET /download/<one-time name>`) with the file a person sent.
- `POST /media/upload?access_token=` (the older API host's upload, the same tokens): multipart `type` file
  and `media` (up to 20 MB) -> `{errcode: 0, media_id}`; a `sampleFile` robot message names the media_id.
- Session webhooks `POST /robot/sendBySession?session=…` (one per robot message, valid until its
  `sessionWebhookExpiredTime`): `{msgtype: markdown|text, …}` -> `{errcode: 0}`; an expired one answers
  errcode 300001 (the fake's choice: DingTalk documents no code for it).

Runs its own loop in a thread; state sits behind one lock.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

from tests.fakes.dingtalk.openapi import OpenApi, Person, Sent, openapi_error

CLIENT_ID = "dingclawbotappkey01"
CLIENT_SECRET = "s3cret-" + "x" * 40
ROBOT_TOPIC = "/v1.0/im/bot/messages/get"
CARD_TOPIC = "/v1.0/card/instances/callback"
CORP = "ding" + "c" * 16
BOT_ID = "$:LWCP_v1:$bot" + "b" * 20


@dataclass
class _Socket:
    ws: web.WebSocketResponse
    topics: set[str]
    connection_id: str


@dataclass
class _State:
    acked: set[str] = field(default_factory=set)
    envelopes: dict[str, dict[str, Any]] = field(default_factory=dict)  # messageId -> envelope, in order


class FakeDingTalk(OpenApi):
    def __init__(self, *, client_id: str = CLIENT_ID, webhook_seconds: float = 5400.0,
                 disconnect_grace: float = 1.0) -> None:
        self.client_id, self.client_secret = client_id, CLIENT_SECRET
        self.webhook_seconds = webhook_seconds
        self.disconnect_grace = disconnect_grace
        self._lock = threading.Lock()
        self.people: dict[str, Person] = {}
        self.groups: dict[str, str] = {}  # conversation id -> title
        self.sent: list[Sent] = []
        self.attempts: list[tuple[str, float]] = []  # (path, monotonic time) of every send, refused ones too
        self.opens: list[dict[str, Any]] = []  # bodies of connections/open
        self.ping_acks: list[str] = []
        self.token_requests = 0
        self._state = _State()
        self._tickets: dict[str, set[str]] = {}  # ticket -> the topics its connection subscribed to
        self._tokens: set[str] = set()
        self._sessions: dict[str, tuple[str, float]] = {}  # session -> (chat, expires epoch seconds)
        self._failures: list[tuple[dict[str, Any], int]] = []
        self._files: dict[str, bytes] = {}  # downloadCode -> the bytes a person sent
        self._links: dict[str, str] = {}  # a download URL's name -> its downloadCode
        self.downloads = 0
        self.media: dict[str, tuple[str, bytes]] = {}  # media_id -> (file name, bytes) uploaded by the robot
        self._acks: dict[str, dict[str, Any]] = {}  # messageId -> the client's ACK frame
        self._acked = threading.Condition(self._lock)  # (answer, HTTP status) for the next sends
        self._sockets: list[_Socket] = []
        self._ids = itertools.count(1)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self.port = 0

    # -- lifecycle --------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "FakeDingTalk":
        ready = threading.Event()
        self._loop = asyncio.new_event_loop()

        def run() -> None:
            assert self._loop is not None
            asyncio.set_event_loop(self._loop)
            self._loop.run_until_complete(self._serve())
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, name="fake-dingtalk", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("fake DingTalk did not start")
        return self

    async def _serve(self) -> None:
        app = web.Application()
        app.router.add_post("/v1.0/gateway/connections/open", self._open)
        app.router.add_get("/connect", self._websocket)
        app.router.add_post("/v1.0/oauth2/accessToken", self._access_token)
        app.router.add_post("/v1.0/robot/oToMessages/batchSend", self._robot_send)
        app.router.add_post("/v1.0/robot/groupMessages/send", self._robot_send)
        app.router.add_post("/robot/sendBySession", self._session_send)
        app.router.add_post("/v1.0/card/instances/createAndDeliver", self._card)
        app.router.add_post("/v1.0/robot/messageFiles/download", self._download_link)
        app.router.add_get("/download/{name}", self._download)
        app.router.add_post("/media/upload", self._upload)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    def stop(self) -> None:
        """DingTalk goes away: sockets close, connections are refused."""
        if self._loop is None:
            return

        async def shutdown() -> None:
            for sock in list(self._sockets):
                await sock.ws.close()
            if self._runner is not None:
                await self._runner.cleanup()

        asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)
        self._loop.close()
        self._loop = None

    def __enter__(self) -> "FakeDingTalk":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- the world around the robot ----------------------------------------------------------
    def add_person(self, name: str) -> Person:
        person = Person(f"{name}{secrets.randbelow(10**8):08d}", f"$:LWCP_v1:${secrets.token_urlsafe(18)}", name.title())
        with self._lock:
            self.people[person.staff_id] = person
        return person

    def add_group(self, title: str) -> str:
        cid = "cid" + secrets.token_urlsafe(16) + "=="
        with self._lock:
            self.groups[cid] = title
        return cid

    def connected(self) -> bool:
        with self._lock:
            return any(ROBOT_TOPIC in s.topics for s in self._sockets)

    def write(self, person: Person, text: str, *, group: str | None = None, mention: bool = True,
              staff: bool = True, file: tuple[str, bytes] | None = None, picture: bytes | None = None
              ) -> dict[str, Any]:
        """`person` writes `text` to the robot (1:1, or in `group`, @mentioning it or not); the envelope sent.
        `staff=False`: a sender from outside the organisation (no senderStaffId). `file` (name, bytes) or
        `picture` (bytes): a file or picture message instead of text."""
        now_ms = int(time.time() * 1000)
        chat = group or person.staff_id
        session = secrets.token_urlsafe(24)
        with self._lock:
            self._sessions[session] = (chat, time.time() + self.webhook_seconds)
        message: dict[str, Any] = {
            "conversationId": group or f"cid{person.staff_id}1to1", "chatbotCorpId": CORP, "chatbotUserId": BOT_ID,
            "msgId": f"msg{secrets.token_urlsafe(16)}", "senderNick": person.nick, "isAdmin": False,
            "sessionWebhookExpiredTime": int((time.time() + self.webhook_seconds) * 1000), "createAt": now_ms,
            "senderCorpId": CORP, "conversationType": "2" if group else "1", "senderId": person.sender_id,
            "sessionWebhook": f"{self.url}/robot/sendBySession?session={session}", "robotCode": self.client_id,
            "msgtype": "text", "text": {"content": (" " + text) if group and mention else text},
        }
        if file is not None or picture is not None:
            code = secrets.token_urlsafe(18)
            with self._lock:
                self._files[code] = file[1] if file is not None else picture  # type: ignore[assignment]
            del message["text"]
            message["msgtype"] = "file" if file is not None else "picture"
            message["content"] = {"downloadCode": code, **({"fileName": file[0]} if file is not None else {})}
        if staff:
            message["senderStaffId"] = person.staff_id
        if group:
            message.update({"conversationTitle": self.groups[group], "isInAtList": mention,
                            "atUsers": [{"dingtalkId": BOT_ID}] if mention else []})
        return self.deliver(ROBOT_TOPIC, message)

    def deliver(self, topic: str, data: dict[str, Any], *, kind: str = "CALLBACK") -> dict[str, Any]:
        envelope = {"specVersion": "1.0", "type": kind, "headers": {
            "appId": "app-" + self.client_id, "contentType": "application/json", "messageId": self._message_id(),
            "time": str(int(time.time() * 1000)), "topic": topic}, "data": json.dumps(data, ensure_ascii=False)}
        with self._lock:
            self._state.envelopes[envelope["headers"]["messageId"]] = envelope
        self._push(envelope)
        return envelope

    def redeliver(self, envelope: dict[str, Any]) -> None:
        """DingTalk delivers the envelope again (same messageId, same data)."""
        self._push(envelope)

    def acknowledged(self, envelope: dict[str, Any]) -> bool:
        with self._lock:
            return envelope["headers"]["messageId"] in self._state.acked

    def ping(self) -> str:
        """A SYSTEM ping; its messageId (ACKed with the same data: `ping_acks`)."""
        envelope = {"specVersion": "1.0", "type": "SYSTEM", "headers": {
            "contentType": "application/json", "messageId": self._message_id(), "time": str(int(time.time() * 1000)),
            "topic": "ping"}, "data": json.dumps({"opaque": secrets.token_hex(8)})}
        self._push(envelope, system=True)
        return envelope["headers"]["messageId"]

    def ask_disconnect(self) -> None:
        """SYSTEM disconnect: the client should open a new connection; this one closes after the grace."""
        envelope = {"specVersion": "1.0", "type": "SYSTEM", "headers": {
            "contentType": "application/json", "messageId": self._message_id(), "time": str(int(time.time() * 1000)),
            "topic": "disconnect"}, "data": json.dumps({"reason": "server restarting"})}
        with self._lock:
            old = list(self._sockets)
        self._push(envelope, system=True)
        if self._loop is not None:
            async def close_later() -> None:
                await asyncio.sleep(self.disconnect_grace)
                for sock in old:
                    await sock.ws.close()
            asyncio.run_coroutine_threadsafe(close_later(), self._loop)

    def press(self, person: Person, card: Sent, button: str, *, timeout: float = 60.0) -> dict[str, Any]:
        """`person` presses `button` on `card`: the callback DingTalk sends, and the answer in the client's ACK
        (`{}` when no ACK came)."""
        data = {"outTrackId": card.track, "userId": person.staff_id, "corpId": CORP, "type": "actionCallback",
                "spaceType": "IM", "spaceId": card.chat, "extension": "{}",
                "content": json.dumps({"cardPrivateData": {"actionIds": [button], "params": {}}})}
        envelope = self.deliver(CARD_TOPIC, data)
        message_id = envelope["headers"]["messageId"]
        with self._acked:
            self._acked.wait_for(lambda: message_id in self._acks, timeout)
            ack = self._acks.get(message_id) or {}
        try:
            return dict(json.loads(ack.get("data") or "{}").get("response") or {})
        except (ValueError, AttributeError):
            return {}

    def cards(self, chat: str | None = None) -> list[Sent]:
        with self._lock:
            return [s for s in self.sent if s.via == "card" and (chat is None or s.chat == chat)]

    def expire_webhooks(self) -> None:
        """Every session webhook given out so far is past its expiry."""
        with self._lock:
            self._sessions = {s: (chat, 0.0) for s, (chat, _) in self._sessions.items()}

    def opens_count(self) -> int:
        with self._lock:
            return len(self.opens)

    def _message_id(self) -> str:
        return f"{next(self._ids):06d}_{secrets.token_hex(6)}"

    def _push(self, envelope: dict[str, Any], *, system: bool = False) -> None:
        if self._loop is None:
            return
        topic = envelope["headers"]["topic"]

        async def send() -> None:
            for sock in list(self._sockets):
                if system or topic in sock.topics:
                    try:
                        await sock.ws.send_str(json.dumps(envelope))
                    except (ConnectionError, RuntimeError):
                        pass

        asyncio.run_coroutine_threadsafe(send(), self._loop).result(10)

    # -- what the robot did ------------------------------------------------------------------
    def _record(self, sent: Sent) -> None:
        """A message the robot sent (called with the lock held; bench/channels.py times it here)."""
        self.sent.append(sent)

    def sent_to(self, chat: str) -> list[Sent]:
        with self._lock:
            return [s for s in self.sent if s.chat == chat]

    def send_attempts(self) -> list[float]:
        with self._lock:
            return [at for _, at in self.attempts]

    # -- failures ----------------------------------------------------------------------------
    def throttle_next_send(self) -> None:
        with self._lock:
            self._failures.append(({"errcode": 130101, "errmsg": "send too fast, exceed 20 times per minute",
                                    "code": "Throttling.Api", "message": "send too fast"}, 429))

    def refuse_next_send(self) -> None:
        """The next send is refused for good (a malformed message, a user who left)."""
        with self._lock:
            self._failures.append(({"errcode": 40035, "errmsg": "invalid parameter",
                                    "code": "invalidParameter.param.invalid", "message": "invalid parameter"}, 400))

    def revoke_secret(self) -> None:
        with self._lock:
            self.client_secret = "rotated-" + secrets.token_hex(16)
            self._tokens.clear()

    # -- HTTP --------------------------------------------------------------------------------
    async def _open(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
        except ValueError:
            return openapi_error(400, "invalidParameter", "body is not JSON")
        with self._lock:
            self.opens.append(body)
            good = body.get("clientId") == self.client_id and body.get("clientSecret") == self.client_secret
        if not good:
            return openapi_error(401, "InvalidAuthentication", "clientId or clientSecret is invalid")
        subscriptions = body.get("subscriptions")
        if not isinstance(subscriptions, list) or not subscriptions or not all(
                isinstance(s, dict) and s.get("type") in ("EVENT", "CALLBACK") and s.get("topic") for s in subscriptions):
            return openapi_error(400, "invalidParameter.subscriptions", "subscriptions must be {type, topic} objects")
        ticket = secrets.token_urlsafe(24)
        with self._lock:
            self._tickets[ticket] = {str(s["topic"]) for s in subscriptions}
        return web.json_response({"endpoint": f"ws://127.0.0.1:{self.port}/connect", "ticket": ticket})

    async def _websocket(self, request: web.Request) -> web.StreamResponse:
        ticket = request.query.get("ticket", "")
        with self._lock:
            topics = self._tickets.pop(ticket, None)  # one connection per ticket
        if topics is None:
            return web.Response(status=403, text="invalid ticket")
        ws = web.WebSocketResponse(heartbeat=None, max_msg_size=0)
        await ws.prepare(request)
        sock = _Socket(ws, topics, secrets.token_hex(8))
        with self._lock:
            self._sockets.append(sock)
            pending = [e for m, e in self._state.envelopes.items() if m not in self._state.acked
                       and e["headers"]["topic"] in sock.topics]
        for envelope in pending:  # what the last connection did not acknowledge
            await ws.send_str(json.dumps(envelope))
        try:
            async for frame in ws:
                if frame.type != WSMsgType.TEXT:
                    continue
                try:
                    ack = json.loads(frame.data)
                except ValueError:
                    continue
                message_id = str((ack.get("headers") or {}).get("messageId") or "")
                if ack.get("code") == 200 and message_id:
                    with self._lock:
                        self._acks[message_id] = ack
                        self._acked.notify_all()
                        if message_id in self._state.envelopes:
                            self._state.acked.add(message_id)
                        else:
                            self.ping_acks.append(message_id)
        finally:
            with self._lock:
                self._sockets.remove(sock)
        return ws
