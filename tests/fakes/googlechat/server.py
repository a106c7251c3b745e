"""FakeGoogleChat: Google's OAuth token endpoint, the Chat REST API, the Chat issuer's certificates and
the interaction-event sender, on 127.0.0.1.

Written from Google's published references: the token endpoint takes the JWT-bearer grant
(`grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer`, `assertion` = a JWT signed with a service
account key, `aud` Google's token endpoint, `scope` asked) and refuses a bad one `400 invalid_grant`; the Chat API
(`/v1/spaces`, `/v1/{parent=spaces/*}/messages` create, `/v1/{name=spaces/*/messages/*}` get, patch with
`updateMask`, delete) wants `Authorization: Bearer` with a token it issued or a JWT self-signed by a known
service account's key with the chat.bot scope (AIP-4111: what google-apps-chat sends for a service
account, never asking the token endpoint) — 401 UNAUTHENTICATED otherwise,
refuses a text over 4,096 characters and an unknown space or message; a create's `requestId` seen before
returns the message it made, and its `messageId` (a custom id: `client-`, up to 63 lowercase letters,
digits and hyphens, else 400) already taken in the space is 409 ALREADY_EXISTS; errors come as Google's
`{"error": {"code", "message", "status"}}`. Enums come as names or, from the generated client's REST
transport, integers.

Events are POSTed to the app's endpoint with `Authorization: Bearer <JWT>` signed by the fake's Chat key
(iss chat@system.gserviceaccount.com, aud the project number), whose certificate the certs endpoint
serves; forged ones (another key, expired, another audience) are for the refusal tests. A delivery not
answered 200 is sent again with backoff (Google Chat itself does not resend an event: this lets the
suite check the intake's dedupe and the acknowledgement's timing). An event's answer that is a message
(a button press's private answer) is posted as the app, as Chat does.
"""

from __future__ import annotations

import asyncio
import hmac
import itertools
import json
import re
import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

import aiohttp
from aiohttp import web
from google.auth import crypt, jwt

from tests.fakes.googlechat.keys import PROJECT_NUMBER, KeyPair, new_key_pair, service_account_key

CHAT_ISSUER = "chat@system.gserviceaccount.com"
APP_EMAIL = "clawgate-app@clawgate-fake.iam.gserviceaccount.com"
SCOPE = "https://www.googleapis.com/auth/chat.bot"
GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"
MAX_TEXT = 4096
APP_USER = {"name": "users/app", "displayName": "Clawgate", "type": "BOT"}
CUSTOM_ID = re.compile(r"client-[a-z0-9-]{1,56}")  # messageId: `client-`, lowercase letters, digits, hyphens, 63 at most
STATUSES = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
            409: "ALREADY_EXISTS", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE"}


@dataclass
class User:
    name: str
    display: str
    dm: str = ""


@dataclass
class Sent:
    """A message the app posted (through the API, or as an event's answer)."""

    name: str
    space: str
    text: str
    thread: str
    cards: list[dict[str, Any]] = field(default_factory=list)
    viewer: str = ""  # privateMessageViewer: only this user sees it
    edits: list[str] = field(default_factory=list)  # earlier texts, oldest first
    deleted: bool = False
    at: float = 0.0
    client_id: str = ""  # the messageId it was created with (its custom name in the space)


@dataclass
class Delivery:
    event_id: str
    body: bytes
    token: str
    attempts: int = 0
    acknowledged: bool = False
    statuses: list[int] = field(default_factory=list)
    answer: Any = None


def google_error(status: int, message: str, headers: dict[str, str] | None = None) -> web.Response:
    body = {"error": {"code": status, "message": message, "status": STATUSES.get(status, "UNKNOWN")}}
    return web.json_response(body, status=status, headers=headers)


class FakeGoogleChat:
    def __init__(self) -> None:
        self.chat_key: KeyPair = new_key_pair(CHAT_ISSUER)
        self.app_key: KeyPair = new_key_pair(APP_EMAIL)
        self.accounts: dict[str, KeyPair] = {APP_EMAIL: self.app_key}  # service accounts the token endpoint knows
        self.endpoint_url = ""  # the app's HTTP endpoint (events go there)
        self.audience = PROJECT_NUMBER
        self._cond = threading.Condition()
        self.tokens: dict[str, str] = {}  # access token -> service account
        self.token_requests: list[dict[str, Any]] = []
        self.sent: list[Sent] = []
        self.attempts: list[tuple[float, str]] = []  # (monotonic time, text) of every create without a card
        self.calls: list[tuple[str, str, str]] = []  # (method, path, Authorization) of every API call
        self.deliveries: dict[str, Delivery] = {}
        self.users: dict[str, User] = {}
        self.spaces: dict[str, dict[str, Any]] = {}
        self.threads: set[str] = set()
        self._failures: list[tuple[int, str, dict[str, str]]] = []
        self.request_ids: dict[str, Sent] = {}  # a create's requestId -> the message it made
        self._held = False  # hold_create_answers()
        self._release: asyncio.Event | None = None
        self._signers: dict[str, crypt.RSASigner] = {}
        self.on_sent: Any = None  # told the text of each message created (the bench)
        self._ids = itertools.count(1)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self.port = 0

    # -- lifecycle --------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def token_uri(self) -> str:
        return f"{self.base_url}/token"

    @property
    def certs_url(self) -> str:
        return f"{self.base_url}/certs"

    def key(self, email: str = APP_EMAIL) -> dict[str, Any]:
        """A service account key JSON the token endpoint accepts (a new account for another email)."""
        with self._cond:
            if email not in self.accounts:
                self.accounts[email] = new_key_pair(email)
            return service_account_key(self.accounts[email], self.token_uri, email)

    def unknown_key(self) -> dict[str, Any]:
        """A well-formed key of the app's account that the token endpoint does not know (revoked)."""
        return service_account_key(new_key_pair(APP_EMAIL), self.token_uri, APP_EMAIL)

    def start(self) -> "FakeGoogleChat":
        ready = threading.Event()
        self._loop = asyncio.new_event_loop()

        def run() -> None:
            assert self._loop is not None
            asyncio.set_event_loop(self._loop)
            self._loop.run_until_complete(self._start_server())
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, name="fake-googlechat", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("fake Google Chat did not start")
        return self

    def __enter__(self) -> "FakeGoogleChat":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    async def _start_server(self) -> None:
        app = web.Application(client_max_size=4 * 1024 * 1024)
        app.router.add_post("/token", self._token)
        app.router.add_get("/certs", self._certs)
        app.router.add_get("/v1/spaces", self._list_spaces)
        app.router.add_post("/v1/spaces/{space}/messages", self._create)
        app.router.add_get("/v1/spaces/{space}/messages/{message}", self._get)
        app.router.add_patch("/v1/spaces/{space}/messages/{message}", self._update)
        app.router.add_put("/v1/spaces/{space}/messages/{message}", self._update)
        app.router.add_delete("/v1/spaces/{space}/messages/{message}", self._delete)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=20))

    def stop(self) -> None:
        """Google goes away: every endpoint refuses connections and no event is sent any more."""
        if self._loop is None:
            return

        async def shutdown() -> None:
            for task in list(self._tasks):
                task.cancel()
            if self._session is not None:
                await self._session.close()
            if self._runner is not None:
                await self._runner.cleanup()

        asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)
        self._loop.close()
        self._loop = None

    # -- the token endpoint and the certificates --------------------------------------------------
    async def _token(self, request: web.Request) -> web.Response:
        form = parse_qs((await request.read()).decode())
        grant, assertion = (form.get("grant_type") or [""])[0], (form.get("assertion") or [""])[0]
        refused = web.json_response({"error": "invalid_grant", "error_description": "Invalid JWT Signature."},
                                    status=400)
        if grant != GRANT or not assertion:
            return web.json_response({"error": "unsupported_grant_type"}, status=400)
        try:
            unverified = jwt.decode(assertion, verify=False)
        except ValueError:
            return refused
        with self._cond:
            pair = self.accounts.get(str(unverified.get("iss")))
        if pair is None:
            return refused
        try:
            # google-auth names Google's token endpoint as the audience whatever the key's token_uri says
            claims = jwt.decode(assertion, certs={pair.kid: pair.public_pem},
                                audience=["https://oauth2.googleapis.com/token", self.token_uri])
        except ValueError:
            return refused
        if SCOPE not in str(claims.get("scope") or "").split():
            return web.json_response({"error": "invalid_scope"}, status=400)
        token = "ya29.fake-" + secrets.token_urlsafe(24)
        with self._cond:
            self.tokens[token] = str(claims["iss"])
            self.token_requests.append(dict(claims))
        return web.json_response({"access_token": token, "expires_in": 3599, "token_type": "Bearer"})

    async def _certs(self, request: web.Request) -> web.Response:
        return web.json_response({self.chat_key.kid: self.chat_key.cert_pem},
                                 headers={"Cache-Control": "public, max-age=3600"})

    def revoke_tokens(self) -> None:
        """Every access token issued so far stops working, and the app's key is no longer known."""
        with self._cond:
            self.tokens.clear()
            self.accounts.pop(APP_EMAIL, None)

    # -- the Chat API ----------------------------------------------------------------------------
    def _self_signed(self, token: str) -> bool:
        """A self-signed JWT of a known service account with the chat.bot scope (Google's AIP-4111: what the
        generated clients send for a service account instead of asking the token endpoint)."""
        try:
            unverified = jwt.decode(token, verify=False)
            with self._cond:
                pair = self.accounts.get(str(unverified.get("iss")))
            if pair is None:
                return False
            claims = jwt.decode(token, certs={pair.kid: pair.public_pem})
        except (ValueError, TypeError, KeyError):
            return False
        return claims.get("sub") == claims.get("iss") and SCOPE in str(claims.get("scope") or "").split()

    def _auth(self, request: web.Request) -> web.Response | None:
        header = request.headers.get("Authorization", "")
        with self._cond:
            self.calls.append((request.method, request.path, header))
            known = any(hmac.compare_digest(header, f"Bearer {t}") for t in self.tokens)
        if not known and header.startswith("Bearer ey"):
            known = self._self_signed(header.removeprefix("Bearer "))
        if not known:
            return google_error(401, "Request had invalid authentication credentials. Expected OAuth 2 access "
                                     "token, login cookie or other valid authentication credential.")
        return None

    async def _list_spaces(self, request: web.Request) -> web.Response:
        refusal = self._auth(request)
        if refusal is not None:
            return refusal
        with self._cond:
            spaces = list(self.spaces.values())
        size = int(request.query.get("pageSize") or 100)
        return web.json_response({"spaces": spaces[:size]})

    async def _create(self, request: web.Request) -> web.Response:
        refusal = self._auth(request)
        if refusal is not None:
            return refusal
        space = f"spaces/{request.match_info['space']}"
        try:
            body = await request.json()
        except ValueError:
            return google_error(400, "Invalid JSON payload received.")
        if not isinstance(body, dict):
            return google_error(400, "Invalid JSON payload received.")
        text = str(body.get("text") or "")
        with self._cond:
            if not body.get("cardsV2"):
                self.attempts.append((time.monotonic(), text))
            failure = self._failures.pop(0) if self._failures else None
            known = space in self.spaces
        if failure is not None:
            status, message, headers = failure
            return google_error(status, message, headers)
        if not known:
            return google_error(404, f"Space {space} not found or the app is not a member.")
        if not text.strip() and not body.get("cardsV2"):
            return google_error(400, "Message cannot be empty. Discarding empty message.")
        if len(text) > MAX_TEXT:
            return google_error(400, "Message text is too long.")
        custom, asked = str(request.query.get("messageId") or ""), str(request.query.get("requestId") or "")
        if custom and not CUSTOM_ID.fullmatch(custom):
            return google_error(400, f"Invalid message ID {custom!r}: a custom ID begins with client- and contains "
                                     "up to 63 lowercase letters, numbers and hyphens.")
        option = str(request.query.get("messageReplyOption") or "")
        thread = str((body.get("thread") or {}).get("name") or "")
        with self._cond:
            # "Specifying an existing request ID returns the message created with that ID instead of creating a
            # new message"; a custom ID is unique in its space: taken, the create is ALREADY_EXISTS (AIP-133)
            made = self.request_ids.get(asked) if asked else None
            taken = custom and any(s.space == space and s.client_id == custom for s in self.sent)
        if made is not None:
            return await self._answer(self._resource(made))
        if taken:
            return google_error(409, f"Message {space}/messages/{custom} already exists.")
        with self._cond:
            if not thread or option not in ("REPLY_MESSAGE_FALLBACK_TO_NEW_THREAD", "1", "REPLY_MESSAGE_OR_FAIL", "2") \
                    or thread not in self.threads or not thread.startswith(space + "/"):
                thread = f"{space}/threads/t{next(self._ids)}"
                self.threads.add(thread)
            sent = Sent(f"{space}/messages/m{next(self._ids)}", space, text, thread,
                        list(body.get("cardsV2") or []), str((body.get("privateMessageViewer") or {}).get("name") or ""),
                        at=time.monotonic(), client_id=custom)
            self.sent.append(sent)
            if asked:
                self.request_ids[asked] = sent
            self._cond.notify_all()
        if self.on_sent is not None:
            self.on_sent(text)
        return await self._answer(self._resource(sent))

    async def _answer(self, resource: dict[str, Any]) -> web.Response:
        """A create's answer; held while hold_create_answers() is on (the message is made all the same)."""
        with self._cond:
            held = self._held
        if held:
            self._release = self._release or asyncio.Event()
            await self._release.wait()
        return web.json_response(resource)

    def hold_create_answers(self) -> None:
        """From now on a message created is kept, but the HTTP answer saying so waits for
        release_create_answers(): a client killed meanwhile never learns that Chat made it."""
        with self._cond:
            self._held = True

    def release_create_answers(self) -> None:
        with self._cond:
            self._held = False
            release = self._release
            self._release = None
        if release is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(release.set)

    def forget_request_ids(self) -> None:
        """Chat no longer matches a create by its requestId (Google does not say for how long it does)."""
        with self._cond:
            self.request_ids.clear()

    def _resource(self, sent: Sent) -> dict[str, Any]:
        out: dict[str, Any] = {"name": sent.name, "sender": APP_USER, "text": sent.text,
                               "thread": {"name": sent.thread}, "space": {"name": sent.space}}
        if sent.client_id:
            out["clientAssignedMessageId"] = sent.client_id
        if sent.cards:
            out["cardsV2"] = sent.cards
        return out

    def _find(self, request: web.Request) -> Sent | None:
        name = f"spaces/{request.match_info['space']}/messages/{request.match_info['message']}"
        with self._cond:  # by its name, or by the custom id it was created with
            return next((s for s in self.sent if name in (s.name, f"{s.space}/messages/{s.client_id}")
                         and not s.deleted), None)

    async def _get(self, request: web.Request) -> web.Response:
        refusal = self._auth(request)
        if refusal is not None:
            return refusal
        sent = self._find(request)
        return web.json_response(self._resource(sent)) if sent else google_error(404, "Message not found.")

    async def _update(self, request: web.Request) -> web.Response:
        refusal = self._auth(request)
        if refusal is not None:
            return refusal
        sent = self._find(request)
        if sent is None:
            return google_error(404, "Message not found.")
        mask = [p.strip() for p in str(request.query.get("updateMask") or "").split(",") if p.strip()]
        if not mask:
            return google_error(400, "updateMask is required.")
        if not set(mask) <= {"text", "cardsV2", "cards_v2", "attachment"}:
            return google_error(400, f"Invalid update mask {','.join(mask)}.")
        body = await request.json()
        if "text" in mask and len(str(body.get("text") or "")) > MAX_TEXT:
            return google_error(400, "Message text is too long.")
        with self._cond:
            if "text" in mask:
                sent.edits.append(sent.text)
                sent.text = str(body.get("text") or "")
            if "cardsV2" in mask or "cards_v2" in mask:
                sent.cards = list(body.get("cardsV2") or [])
            self._cond.notify_all()
        return web.json_response(self._resource(sent))

    async def _delete(self, request: web.Request) -> web.Response:
        refusal = self._auth(request)
        if refusal is not None:
            return refusal
        sent = self._find(request)
        if sent is None:
            return google_error(404, "Message not found.")
        with self._cond:
            sent.deleted = True
            self._cond.notify_all()
        return web.json_response({})

    def attempts_of(self, wanted: Any) -> list[float]:
        """When the creates whose text `wanted(text)` accepts were tried (refused ones too)."""
        with self._cond:
            return [at for at, text in self.attempts if wanted(text)]

    def thread_of(self, event_id: str) -> str:
        """The thread of the message an event carried."""
        with self._cond:
            event = json.loads(self.deliveries[event_id].body)
        return str(((event.get("message") or {}).get("thread") or {}).get("name") or "")

    def fail_next(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        """The next create is refused with this error."""
        with self._cond:
            self._failures.append((status, message, headers or {}))

    # -- people and spaces --------------------------------------------------------------------------
    def add_user(self, display: str) -> User:
        user = User(f"users/{100000000000 + next(self._ids)}", display)
        dm = f"spaces/dm{next(self._ids)}"
        with self._cond:
            self.spaces[dm] = {"name": dm, "type": "DM", "spaceType": "DIRECT_MESSAGE", "singleUserBotDm": True}
            user.dm = dm
            self.users[user.name] = user
        return user

    def add_space(self, display: str) -> str:
        name = f"spaces/sp{next(self._ids)}"
        with self._cond:
            self.spaces[name] = {"name": name, "type": "ROOM", "spaceType": "SPACE", "displayName": display}
        return name

    def sent_to(self, space: str, *, deleted: bool = False) -> list[Sent]:
        with self._cond:
            return [s for s in self.sent if s.space == space and (deleted or not s.deleted)]

    # -- events ---------------------------------------------------------------------------------------
    def bearer(self, *, key: KeyPair | None = None, audience: str | None = None, issuer: str = CHAT_ISSUER,
               expires_in: int = 300, **claims: Any) -> str:
        """A bearer JWT as Chat sends it: signed by the fake's Chat key unless another is given."""
        pair = key or self.chat_key
        now = int(time.time())
        payload = {"iss": issuer, "aud": audience or self.audience, "iat": now - 5, "exp": now + expires_in, **claims}
        return jwt.encode(self._signer(pair), payload).decode()

    def _signer(self, pair: KeyPair) -> crypt.RSASigner:
        """Loading a private key checks it (about 0.1 s): once per key, so the bench measures the daemon."""
        with self._cond:
            if pair.kid not in self._signers:
                self._signers[pair.kid] = crypt.RSASigner.from_string(pair.private_pem, key_id=pair.kid)
            return self._signers[pair.kid]

    def _event(self, kind: str, user: User, space: str, extra: dict[str, Any]) -> dict[str, Any]:
        with self._cond:
            about = dict(self.spaces[space])
        person = {"name": user.name, "displayName": user.display, "email": f"{user.display}@example.com",
                  "type": "HUMAN"}
        return {"type": kind, "eventTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "space": about,
                "user": person, **extra}

    def write(self, user: User, space: str, text: str, *, mention: bool = False, thread: str | None = None,
              token: str | None = None) -> str:
        """`user` posts `text` in `space` (an @mention of the app first when `mention`); returns the
        message's name (the event's id). Sent to the app whatever it says, as an app that receives every
        message of a space would be (by default Chat sends only mentions and DMs)."""
        name = f"{space}/messages/u{next(self._ids)}"
        with self._cond:
            if thread is None or thread not in self.threads:
                thread = f"{space}/threads/t{next(self._ids)}"
                self.threads.add(thread)
        full = f"@Clawgate {text}" if mention else text
        message: dict[str, Any] = {
            "name": name, "sender": {"name": user.name, "displayName": user.display, "type": "HUMAN"},
            "createTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "text": full,
            "argumentText": f" {text}" if mention else text, "thread": {"name": thread}, "space": {"name": space}}
        if mention:
            message["annotations"] = [{"type": "USER_MENTION", "startIndex": 0, "length": len("@Clawgate"),
                                       "userMention": {"user": APP_USER, "type": "MENTION"}}]
        self.send_event(name, self._event("MESSAGE", user, space, {"message": message}), token=token)
        return name

    def click(self, user: User, sent: Sent, button: dict[str, Any]) -> str:
        """`user` presses `button` of the card on `sent`; returns the event's id."""
        action = button["onClick"]["action"]
        params = list(action.get("parameters") or [])
        event_id = f"click{next(self._ids)}"
        extra = {"message": self._resource(sent),
                 "action": {"actionMethodName": action["function"], "parameters": params},
                 "common": {"invokedFunction": action["function"],
                            "parameters": {p["key"]: p.get("value", "") for p in params}}}
        self.send_event(event_id, self._event("CARD_CLICKED", user, sent.space, extra))
        return event_id

    def send_event(self, event_id: str, event: dict[str, Any], *, token: str | None = None) -> None:
        with self._cond:
            self.deliveries[event_id] = Delivery(event_id, json.dumps(event).encode(), token or "")
        self.redeliver(event_id)

    def redeliver(self, event_id: str) -> None:
        assert self._loop is not None, "start() the fake first"
        self._loop.call_soon_threadsafe(self._spawn, event_id)

    def _spawn(self, event_id: str) -> None:
        task = asyncio.ensure_future(self._post_until_acknowledged(event_id))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def post_once(self, body: bytes, token: str) -> tuple[int, str]:
        """One POST to the app's endpoint with this bearer token: (status, response text)."""
        assert self._session is not None
        async with self._session.post(self.endpoint_url, data=body, headers={
                "Content-Type": "application/json", "Authorization": f"Bearer {token}",
                "User-Agent": "Google-Dynamite"}) as response:
            return response.status, await response.text()

    def post_sync(self, body: bytes, token: str) -> tuple[int, str]:
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(self.post_once(body, token), self._loop).result(30)

    async def _post_until_acknowledged(self, event_id: str) -> None:
        delivery = self.deliveries[event_id]
        backoff = 0.2
        while True:
            status, answer = 0, ""
            if self.endpoint_url and self._session is not None:
                try:
                    status, answer = await self.post_once(delivery.body, delivery.token or self.bearer())
                except (aiohttp.ClientError, asyncio.TimeoutError, OSError):
                    status = 0
            with self._cond:
                delivery.attempts += 1
                delivery.statuses.append(status)
                if status == 200:
                    delivery.acknowledged = True
                    delivery.answer = json.loads(answer) if answer else {}
                    self._post_answer(delivery)
                self._cond.notify_all()
            if status == 200 or delivery.token:  # a forged token is tried once: the test reads its status
                return
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 1.0)

    def _post_answer(self, delivery: Delivery) -> None:
        """An event answered with a message: Chat posts it as the app (in the event's space)."""
        answer = delivery.answer
        if not isinstance(answer, dict) or not (answer.get("text") or answer.get("cardsV2")):
            return
        event = json.loads(delivery.body)
        space = event["space"]["name"]
        thread = str(((event.get("message") or {}).get("thread") or {}).get("name") or "")
        self.sent.append(Sent(f"{space}/messages/a{next(self._ids)}", space, str(answer.get("text") or ""), thread,
                              list(answer.get("cardsV2") or []),
                              str((answer.get("privateMessageViewer") or {}).get("name") or ""),
                              at=time.monotonic()))

    def acknowledged(self, event_id: str) -> bool:
        with self._cond:
            delivery = self.deliveries.get(event_id)
            return bool(delivery and delivery.acknowledged)

    def statuses(self, event_id: str) -> list[int]:
        with self._cond:
            delivery = self.deliveries.get(event_id)
            return list(delivery.statuses) if delivery else []
