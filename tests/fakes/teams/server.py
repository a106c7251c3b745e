"""FakeTeams: the Microsoft endpoints a Teams bot talks to, and the Bot Connector sending it activities, on 127.0.0.1.

Written from the Bot Framework's published protocol (Bot Framework REST API reference, "Authentication"
and "Connector" pages): the OpenID metadata document (`jwks_uri`), the JWKS with RSA keys this fake
made, Microsoft Entra's v2.0 token endpoint for the client-credentials grant (a wrong client id or
secret is `400 invalid_client`, as Entra answers, a wrong grant or scope `400`), and the Connector's
conversations API: `POST /v3/conversations/{id}/activities`, `POST …/activities/{replyToId}`,
`PUT …/activities/{id}`, `DELETE …/activities/{id}`, each refusing a missing or unknown bearer token
(401), an unknown conversation (404 ConversationNotFound), an activity without a type or a message
over Teams' size limit (400 / 413 MessageSizeTooBig).

The sender side POSTs activities to the bot's messaging endpoint with `Authorization: Bearer <JWT>`
signed by this fake's key (issuer https://api.botframework.com, audience the app id, `serviceurl` the
activity's), and POSTs again until answered 2xx, as a platform retrying a delivery would (backoff
under a second so tests stay short). It also signs forged tokens (another key, expired, another
audience, another serviceurl, unsigned) for the refusal tests. The server runs its own event loop in
a thread, so it serves a daemon in a subprocess and a sync test alike.
"""

from __future__ import annotations

import asyncio
import base64
import hmac
import itertools
import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

import aiohttp
import jwt
from aiohttp import web
from cryptography.hazmat.primitives.asymmetric import rsa

APP_ID = "5d0a1c3e-6f7b-4c2d-9e8f-0a1b2c3d4e5f"
APP_PASSWORD = "fake~client~secret~for~clawgate~tests~0123"
TENANT_ID = "72f988bf-86f1-41af-91ab-2d7cd011db47"
ISSUER = "https://api.botframework.com"
SCOPE = "https://api.botframework.com/.default"
MAX_ACTIVITY_BYTES = 100 * 1024  # Teams refuses a message over ~100 KB as UTF-16 (413 MessageSizeTooBig)
KID = "fake-signing-key-1"


def _jwk(key: rsa.RSAPrivateKey, kid: str) -> dict[str, Any]:
    numbers = key.public_key().public_numbers()

    def b64(n: int) -> str:
        raw = n.to_bytes((n.bit_length() + 7) // 8, "big")
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    return {"kty": "RSA", "use": "sig", "kid": kid, "n": b64(numbers.n), "e": b64(numbers.e),
            "endorsements": ["msteams"]}


@dataclass
class Person:
    """A Teams user: their Entra object id (the identity), per-bot id and personal chat with the bot."""

    role: str
    aad_object_id: str
    user_id: str
    name: str
    personal_chat: str


@dataclass
class Sent:
    """One activity the bot posted: where, its body, its versions (edits) and whether it was deleted."""

    id: str
    conversation: str
    body: dict[str, Any]
    versions: list[str] = field(default_factory=list)
    deleted: bool = False
    reply_to: str | None = None

    @property
    def chat(self) -> str:
        return self.conversation.partition(";messageid=")[0]

    @property
    def text(self) -> str:
        return str(self.body.get("text") or "")

    @property
    def cards(self) -> list[dict[str, Any]]:
        return [a.get("content") or {} for a in self.body.get("attachments") or []
                if a.get("contentType") == "application/vnd.microsoft.card.adaptive"]


@dataclass
class Delivery:
    event_id: str
    body: bytes
    token: str
    attempts: int = 0
    acknowledged: bool = False
    statuses: list[int] = field(default_factory=list)


@dataclass
class Failure:
    status: int
    code: str
    retry_after: int | None = None


class FakeTeams:
    def __init__(self, *, app_id: str = APP_ID, app_password: str = APP_PASSWORD) -> None:
        self.app_id, self.app_password = app_id, app_password
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.other_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)  # forgeries
        self.kid = KID
        self.published: dict[str, rsa.RSAPrivateKey] = {KID: self.key}  # what the JWKS lists (public halves)
        self.endpoint = ""  # the bot's messaging endpoint
        self._cond = threading.Condition()
        self.people: dict[str, Person] = {}
        self.conversations: dict[str, str] = {}  # id -> conversationType
        self.sent: list[Sent] = []
        self.attempts: list[tuple[float, dict[str, Any]]] = []  # (monotonic time, body) of every message POST
        # (typing excluded), refused ones too
        self.typing: list[str] = []  # conversations a typing activity went to
        self.refused: list[tuple[str, int]] = []  # (path, status) of refused Connector calls
        self.tokens: dict[str, float] = {}  # issued access token -> expiry (time.time())
        self.token_requests = 0
        self.deliveries: dict[str, Delivery] = {}
        self.on_sent: Callable[[Sent], None] | None = None
        self._failures: list[Failure] = []
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
    def service_url(self) -> str:
        return f"{self.base_url}/teams/"

    @property
    def openid_url(self) -> str:
        return f"{self.base_url}/v1/.well-known/openidconfiguration"

    @property
    def token_url(self) -> str:
        return f"{self.base_url}/{TENANT_ID}/oauth2/v2.0/token"

    def start(self) -> "FakeTeams":
        ready = threading.Event()
        self._loop = asyncio.new_event_loop()

        def run() -> None:
            assert self._loop is not None
            asyncio.set_event_loop(self._loop)
            self._loop.run_until_complete(self._start_server())
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, name="fake-teams", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("fake Teams did not start")
        return self

    async def _start_server(self) -> None:
        app = web.Application(client_max_size=4 * 1024 * 1024)
        app.router.add_get("/v1/.well-known/openidconfiguration", self._openid)
        app.router.add_get("/v1/.well-known/keys", self._keys)
        app.router.add_post("/{tenant}/oauth2/v2.0/token", self._token)
        app.router.add_post("/teams/v3/conversations/{conversation}/activities", self._post_activity)
        app.router.add_post("/teams/v3/conversations/{conversation}/activities/{activity}", self._post_activity)
        app.router.add_put("/teams/v3/conversations/{conversation}/activities/{activity}", self._put_activity)
        app.router.add_delete("/teams/v3/conversations/{conversation}/activities/{activity}", self._delete_activity)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=20))

    def stop(self) -> None:
        """Microsoft goes away: every endpoint refuses connections and no activity is sent any more."""
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

    # -- people and conversations (the test's side) -------------------------------------------
    def add_person(self, role: str) -> Person:
        n = len(self.people) + 1
        person = Person(role=role, aad_object_id=str(uuid.uuid4()), user_id=f"29:1fake{role}{n:04d}",
                        name=role.title(), personal_chat=f"a:1fakepersonal{role}{n:04d}")
        with self._cond:
            self.people[person.aad_object_id] = person
            self.conversations[person.personal_chat] = "personal"
        return person

    def add_conversation(self, kind: str) -> str:
        """A group chat (`19:…@thread.v2`) or a team channel (`19:…@thread.tacv2`) the bot is in."""
        conversation = f"19:fake{kind}{next(self._ids):04d}@thread.{'tacv2' if kind == 'channel' else 'v2'}"
        with self._cond:
            self.conversations[conversation] = kind
        return conversation

    # -- OpenID metadata, keys, tokens ----------------------------------------------------------
    async def _openid(self, request: web.Request) -> web.Response:
        return web.json_response({"issuer": ISSUER, "authorization_endpoint": "https://invalid.botframework.com",
                                  "jwks_uri": f"{self.base_url}/v1/.well-known/keys",
                                  "id_token_signing_alg_values_supported": ["RS256"],
                                  "token_endpoint_auth_methods_supported": ["private_key_jwt"]})

    async def _keys(self, request: web.Request) -> web.Response:
        with self._cond:
            keys = list(self.published.items())
        return web.json_response({"keys": [_jwk(key, kid) for kid, key in keys]})

    def roll_key(self) -> None:
        """Microsoft rolls its signing key: a new one (new kid) signs from now on, both are published."""
        with self._cond:
            self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            self.kid = f"fake-signing-key-{len(self.published) + 1}"
            self.published[self.kid] = self.key

    async def _token(self, request: web.Request) -> web.Response:
        form = await request.post()
        with self._cond:
            self.token_requests += 1
        if form.get("grant_type") != "client_credentials":
            return web.json_response({"error": "unsupported_grant_type",
                                      "error_description": "AADSTS70003: grant type not supported"}, status=400)
        if form.get("client_id") != self.app_id or not hmac.compare_digest(
                str(form.get("client_secret") or "").encode(), self.app_password.encode()):
            return web.json_response({"error": "invalid_client", "error_description":
                                      "AADSTS7000215: Invalid client secret provided."}, status=401)
        if form.get("scope") != SCOPE:
            return web.json_response({"error": "invalid_scope", "error_description": "AADSTS70011"}, status=400)
        now = int(time.time())
        token = jwt.encode({"aud": "https://api.botframework.com", "iss": f"https://sts.windows.net/{TENANT_ID}/",
                            "appid": self.app_id, "iat": now, "nbf": now, "exp": now + 3599, "jti": uuid.uuid4().hex},
                           self.key, algorithm="RS256", headers={"kid": self.kid})
        with self._cond:
            self.tokens[token] = now + 3599
        return web.json_response({"token_type": "Bearer", "expires_in": 3599, "ext_expires_in": 3599,
                                  "access_token": token})

    def revoke_tokens(self) -> None:
        with self._cond:
            self.tokens.clear()

    # -- the Connector ----------------------------------------------------------------------------
    def _authorized(self, request: web.Request) -> bool:
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        with self._cond:
            expiry = self.tokens.get(token)
        return scheme == "Bearer" and expiry is not None and expiry > time.time()

    def _error(self, request: web.Request, status: int, code: str, message: str,
               headers: dict[str, str] | None = None) -> web.Response:
        with self._cond:
            self.refused.append((request.path, status))
            self._cond.notify_all()
        return web.json_response({"error": {"code": code, "message": message}}, status=status, headers=headers)

    async def _check(self, request: web.Request) -> tuple[str, dict[str, Any] | None] | web.Response:
        if not self._authorized(request):
            return self._error(request, 401, "Unauthorized", "Authorization has been denied for this request.")
        conversation = request.match_info["conversation"]
        with self._cond:
            known = conversation.partition(";messageid=")[0] in self.conversations
        if not known:
            return self._error(request, 404, "ConversationNotFound", "Conversation not found.")
        if request.method == "DELETE":
            return conversation, None
        raw = await request.read()
        try:
            body = json.loads(raw)
        except ValueError:
            return self._error(request, 400, "BadArgument", "The request body is not JSON.")
        if not isinstance(body, dict) or body.get("type") not in ("message", "typing"):
            return self._error(request, 400, "BadArgument", "Unknown activity type.")
        if body.get("type") == "message" and len(raw.decode("utf-8", "replace").encode("utf-16-le")) > MAX_ACTIVITY_BYTES:
            return self._error(request, 413, "MessageSizeTooBig", "Message size too big.")
        if body.get("type") == "message" and not body.get("text") and not body.get("attachments"):
            return self._error(request, 400, "BadArgument", "Activity has no text and no attachments.")
        return conversation, body

    async def _post_activity(self, request: web.Request) -> web.Response:
        checked = await self._check(request)
        if isinstance(checked, web.Response):
            return checked
        conversation, body = checked
        assert body is not None
        if body["type"] == "typing":
            with self._cond:
                self.typing.append(conversation)
                self._cond.notify_all()
            return web.json_response({})
        with self._cond:
            self.attempts.append((time.monotonic(), body))
            failure = self._failures.pop(0) if self._failures else None
        if failure is not None:
            headers = {"Retry-After": str(failure.retry_after)} if failure.retry_after is not None else None
            return self._error(request, failure.status, failure.code, f"{failure.code} (injected)", headers)
        sent = Sent(id=str(1_700_000_000_000 + next(self._ids)), conversation=conversation, body=body,
                    versions=[str(body.get("text") or "")], reply_to=request.match_info.get("activity"))
        with self._cond:
            self.sent.append(sent)
            self._cond.notify_all()
        if self.on_sent is not None:
            self.on_sent(sent)
        return web.json_response({"id": sent.id}, status=201)

    def _find(self, conversation: str, activity_id: str) -> Sent | None:
        with self._cond:
            return next((s for s in self.sent if s.id == activity_id and s.chat == conversation.partition(
                ";messageid=")[0] and not s.deleted), None)

    async def _put_activity(self, request: web.Request) -> web.Response:
        checked = await self._check(request)
        if isinstance(checked, web.Response):
            return checked
        conversation, body = checked
        assert body is not None
        sent = self._find(conversation, request.match_info["activity"])
        if sent is None:
            return self._error(request, 404, "ActivityNotFound", "Activity not found.")
        with self._cond:
            sent.body = body
            sent.versions.append(str(body.get("text") or ""))
            self._cond.notify_all()
        return web.json_response({"id": sent.id})

    async def _delete_activity(self, request: web.Request) -> web.Response:
        checked = await self._check(request)
        if isinstance(checked, web.Response):
            return checked
        conversation, _ = checked
        sent = self._find(conversation, request.match_info["activity"])
        if sent is None:
            return self._error(request, 404, "ActivityNotFound", "Activity not found.")
        with self._cond:
            sent.deleted = True
            self._cond.notify_all()
        return web.Response(status=200)

    def fail_next(self, status: int, code: str, retry_after: int | None = None) -> None:
        with self._cond:
            self._failures.append(Failure(status, code, retry_after))

    def sent_to(self, chat: str) -> list[Sent]:
        with self._cond:
            return [s for s in self.sent if s.chat == chat]

    # -- the Connector sending activities to the bot -------------------------------------------------
    def sign(self, service_url: str, *, key: rsa.RSAPrivateKey | None = None, audience: str | None = None,
             issuer: str = ISSUER, expires_in: int = 3600, kid: str | None = None,
             claim_url: str | None = None) -> str:
        """The Connector's token for one activity; every knob makes a forgery the bot must refuse."""
        now = int(time.time())
        claims = {"serviceurl": service_url if claim_url is None else claim_url, "iss": issuer,
                  "aud": self.app_id if audience is None else audience, "nbf": now - 5, "iat": now - 5,
                  "exp": now + expires_in}
        return jwt.encode(claims, key or self.key, algorithm="RS256", headers={"kid": kid or self.kid})

    def activity(self, person: Person, conversation: str, text: str = "", *, mention: bool = False,
                 value: dict[str, Any] | None = None, reply_to: str | None = None,
                 service_url: str | None = None) -> dict[str, Any]:
        kind = self.conversations.get(conversation.partition(";messageid=")[0], "personal")
        activity_id = str(1_600_000_000_000 + next(self._ids))
        if kind == "channel" and ";messageid=" not in conversation:
            conversation = f"{conversation};messageid={reply_to or activity_id}"
        bot = {"id": f"28:{self.app_id}", "name": "Clawgate"}
        entities: list[dict[str, Any]] = [{"type": "clientInfo", "locale": "en-US", "country": "US",
                                           "platform": "Web"}]
        if mention:
            text = f"<at>{bot['name']}</at> {text}"
            entities.append({"type": "mention", "text": f"<at>{bot['name']}</at>", "mentioned": bot})
        body: dict[str, Any] = {
            "type": "message", "id": activity_id, "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime()),
            "serviceUrl": service_url or self.service_url, "channelId": "msteams",
            "from": {"id": person.user_id, "name": person.name, "aadObjectId": person.aad_object_id},
            "conversation": {"conversationType": kind, "tenantId": TENANT_ID, "id": conversation,
                             **({"isGroup": True} if kind != "personal" else {})},
            "recipient": bot, "textFormat": "plain", "locale": "en-US", "entities": entities,
            "channelData": {"tenant": {"id": TENANT_ID}}}
        if text:
            body["text"] = text
        if value is not None:
            body["value"] = value
        if reply_to:
            body["replyToId"] = reply_to
        return body

    def deliver(self, body: dict[str, Any], token: str | None = None) -> str:
        """POST `body` to the bot (signed for its serviceUrl unless `token` is given) until it answers 2xx."""
        event_id = str(body["id"])
        token = token if token is not None else self.sign(str(body["serviceUrl"]))
        with self._cond:
            self.deliveries[event_id] = Delivery(event_id, json.dumps(body).encode(), token)
        self._post(event_id)
        return event_id

    def say(self, person: Person, conversation: str, text: str, **kw: Any) -> str:
        return self.deliver(self.activity(person, conversation, text, **kw))

    def redeliver(self, event_id: str) -> None:
        with self._cond:
            delivery = self.deliveries[event_id]
            delivery.token = self.sign(json.loads(delivery.body)["serviceUrl"])  # a fresh token, as a retry has
        self._post(event_id)

    def _post(self, event_id: str) -> None:
        assert self._loop is not None, "start() the fake first"
        self._loop.call_soon_threadsafe(self._spawn, event_id)

    def _spawn(self, event_id: str) -> None:
        task = asyncio.ensure_future(self._post_until_acknowledged(event_id))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _post_until_acknowledged(self, event_id: str) -> None:
        delivery = self.deliveries[event_id]
        backoff = 0.2
        while True:
            status = await self.post_once(delivery.body, delivery.token)
            with self._cond:
                delivery.attempts += 1
                delivery.statuses.append(status)
                if 200 <= status < 300:
                    delivery.acknowledged = True
                self._cond.notify_all()
            if 200 <= status < 300 or status == 401:  # a refused token is not sent again
                return
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 1.0)

    async def post_once(self, body: bytes, token: str | None) -> int:
        if not self.endpoint or self._session is None:
            return 0
        headers = {"Content-Type": "application/json"}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        try:
            async with self._session.post(self.endpoint, data=body, headers=headers) as resp:
                return resp.status
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError):
            return 0

    def post_now(self, body: dict[str, Any], token: str | None) -> int:
        """One POST of `body` with `token` (None: no Authorization header), its status (the refusal tests)."""
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(self.post_once(json.dumps(body).encode(), token),
                                                self._loop).result(30)

    def acknowledged(self, event_id: str) -> bool:
        with self._cond:
            delivery = self.deliveries.get(event_id)
            return bool(delivery and delivery.acknowledged)
