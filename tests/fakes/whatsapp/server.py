"""FakeWhatsApp: the Graph API endpoints of the Cloud API and Meta's webhook sender, on 127.0.0.1.

Written from Meta's published Cloud API reference: `POST /{version}/{phone-number-id}/messages`
(text, interactive reply buttons, documents, `status: read` with `typing_indicator`), `POST .../media`
(multipart upload), `GET /{version}/{media-id}` (the media's URL, fetched with the same bearer token),
`GET /{version}/{phone-number-id}`; errors as Graph API error objects with Meta's codes. It refuses what
the real one refuses: a wrong token (401, code 190), an unknown phone number id or object (400, code
100, subcode 33), a payload without `messaging_product: whatsapp` or with a bad field (400, code 100),
a text over 4,096 characters, more than 3 buttons or a title over 20 characters, and a free-form
message to someone outside the 24-hour window or who never wrote (400, code 131047).

The webhook side posts `messages` updates signed with the app secret (`X-Hub-Signature-256`) to the
daemon's listener, and retries a delivery not answered 200 with backoff, as Meta does (Meta's backoff
is minutes; this one is under a second so the tests stay short). The server runs its own event loop
in a thread, so it serves a daemon in a subprocess and a sync test alike.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import itertools
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import aiohttp
from aiohttp import web

TOKEN = "EAAGfakeaccesstokenforclawgatetests0123456789"
PHONE_NUMBER_ID = "106540352242922"
APP_SECRET = "f2c5e0d1a9b84c7e9d3b2a1f0e9d8c7b"
VERIFY_TOKEN = "verify-token-for-the-fake-0123456789"
VERSION = "v21.0"
DISPLAY_NUMBER = "15550783881"
WINDOW = 24 * 3600


@dataclass
class Delivery:
    """One webhook update: its body, and whether the daemon answered 200 to any attempt."""

    event_id: str
    body: bytes
    attempts: int = 0
    acknowledged: bool = False
    statuses: list[int] = field(default_factory=list)


@dataclass
class Failure:
    status: int
    code: int
    message: str
    subcode: int = 0


def graph_error(status: int, code: int, message: str, subcode: int = 0) -> web.Response:
    error: dict[str, Any] = {"message": message, "type": "OAuthException", "code": code, "fbtrace_id": "AfakeTrace"}
    if subcode:
        error["error_subcode"] = subcode
    return web.json_response({"error": error}, status=status)


class FakeWhatsApp:
    def __init__(self, *, token: str = TOKEN, phone_number_id: str = PHONE_NUMBER_ID,
                 app_secret: str = APP_SECRET) -> None:
        self.token, self.phone_number_id, self.app_secret = token, phone_number_id, app_secret
        self.webhook_url = ""
        self._cond = threading.Condition()
        self.sent: list[dict[str, Any]] = []  # accepted messages: the request body plus "id"
        self.attempts: list[float] = []  # monotonic times of every message send (refused ones too)
        self.refused: list[dict[str, Any]] = []  # (body, code) of refused sends
        self.reads: list[dict[str, Any]] = []  # status: read requests (typing indicator included)
        self.uploads: dict[str, tuple[str, bytes, str]] = {}  # media id -> (name, bytes, mime)
        self.media: dict[str, tuple[bytes, str]] = {}  # media the users sent: id -> (bytes, mime)
        self.media_fetches: list[str] = []  # Authorization headers of media downloads
        self.last_wrote: dict[str, float] = {}  # wa_id -> when they last wrote (the 24-hour window)
        self.deliveries: dict[str, Delivery] = {}
        self._failures: list[Failure] = []
        self.on_sent: Callable[[dict[str, Any]], None] | None = None  # told of each accepted message (the bench)
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

    def start(self) -> "FakeWhatsApp":
        ready = threading.Event()
        self._loop = asyncio.new_event_loop()

        def run() -> None:
            assert self._loop is not None
            asyncio.set_event_loop(self._loop)
            self._loop.run_until_complete(self._start_server())
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, name="fake-whatsapp", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("fake WhatsApp server did not start")
        return self

    async def _start_server(self) -> None:
        app = web.Application(client_max_size=200 * 1024 * 1024)
        app.router.add_get("/media-bytes/{media_id}", self._media_bytes)
        app.router.add_get("/{version}/{object_id}", self._get_object)
        app.router.add_post("/{version}/{phone}/messages", self._messages)
        app.router.add_post("/{version}/{phone}/media", self._upload)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=20))

    def stop(self) -> None:
        """The platform goes away: the Graph API refuses connections and no webhook is sent any more."""
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

    # -- the Graph API ----------------------------------------------------------------------
    def _authorized(self, request: web.Request) -> bool:
        return hmac.compare_digest(request.headers.get("Authorization", ""), f"Bearer {self.token}")

    def _check(self, request: web.Request, phone: str | None) -> web.Response | None:
        if not self._authorized(request):
            return graph_error(401, 190, "Error validating access token: The session is invalid.")
        if request.match_info.get("version") != VERSION:
            return graph_error(400, 2635, f"The version {request.match_info.get('version')} is not supported")
        if phone is not None and phone != self.phone_number_id:
            return graph_error(400, 100, f"Unsupported post request. Object with ID '{phone}' does not exist",
                               subcode=33)
        return None

    async def _get_object(self, request: web.Request) -> web.Response:
        object_id = request.match_info["object_id"]
        refusal = self._check(request, None)
        if refusal is not None:
            return refusal
        if object_id == self.phone_number_id:
            return web.json_response({"display_phone_number": DISPLAY_NUMBER, "verified_name": "Clawgate Test",
                                      "id": object_id})
        with self._cond:
            media = self.media.get(object_id)
        if media is None:
            return graph_error(400, 100, f"Unsupported get request. Object with ID '{object_id}' does not exist",
                               subcode=33)
        data, mime = media
        return web.json_response({"messaging_product": "whatsapp", "url": f"{self.base_url}/media-bytes/{object_id}",
                                  "mime_type": mime, "sha256": hashlib.sha256(data).hexdigest(),
                                  "file_size": len(data), "id": object_id})

    async def _media_bytes(self, request: web.Request) -> web.Response:
        with self._cond:
            self.media_fetches.append(request.headers.get("Authorization", ""))
            media = self.media.get(request.match_info["media_id"])
        if not self._authorized(request):
            return web.Response(status=401, text="unauthorized")
        if media is None:
            return web.Response(status=404)
        return web.Response(body=media[0], content_type=media[1])

    async def _upload(self, request: web.Request) -> web.Response:
        refusal = self._check(request, request.match_info["phone"])
        if refusal is not None:
            return refusal
        form = await request.post()
        upload = form.get("file")
        if form.get("messaging_product") != "whatsapp" or not isinstance(upload, web.FileField):
            return graph_error(400, 100, "(#100) The parameter messaging_product and file are required.")
        media_id = str(900000 + next(self._ids))
        with self._cond:
            self.uploads[media_id] = (upload.filename, upload.file.read(), str(form.get("type") or ""))
            self._cond.notify_all()
        return web.json_response({"id": media_id})

    async def _messages(self, request: web.Request) -> web.Response:
        refusal = self._check(request, request.match_info["phone"])
        if refusal is not None:
            return refusal
        try:
            body = await request.json()
        except ValueError:
            return graph_error(400, 100, "(#100) Invalid parameter")
        if not isinstance(body, dict) or body.get("messaging_product") != "whatsapp":
            return graph_error(400, 100, "(#100) The parameter messaging_product is required.")
        if body.get("status") == "read":
            with self._cond:
                known = any(json.loads(d.body)["entry"][0]["changes"][0]["value"]["messages"][0]["id"]
                            == body.get("message_id") for d in self.deliveries.values())
                if known:
                    self.reads.append(body)
                    self._cond.notify_all()
            return web.json_response({"success": True}) if known else graph_error(400, 100, "(#100) Invalid parameter")
        with self._cond:
            self.attempts.append(time.monotonic())
            failure = self._failures.pop(0) if self._failures else None
        if failure is not None:
            return self._refuse(body, graph_error(failure.status, failure.code, failure.message, failure.subcode))
        problem = self._invalid(body)
        if problem is not None:
            return self._refuse(body, graph_error(400, 100, problem))
        to = str(body["to"])
        with self._cond:
            wrote = self.last_wrote.get(to)
        if wrote is None or time.time() - wrote > WINDOW:
            return self._refuse(body, graph_error(400, 131047, "Re-engagement message"))
        message_id = f"wamid.OUT{next(self._ids):08d}"
        with self._cond:
            self.sent.append({**body, "id": message_id})
            self._cond.notify_all()
        if self.on_sent is not None:
            self.on_sent(body)
        return web.json_response({"messaging_product": "whatsapp", "contacts": [{"input": to, "wa_id": to}],
                                  "messages": [{"id": message_id}]})

    def _refuse(self, body: dict[str, Any], response: web.Response) -> web.Response:
        with self._cond:
            self.refused.append({"body": body, "status": response.status})
            self._cond.notify_all()
        return response

    def _invalid(self, body: dict[str, Any]) -> str | None:
        """What Meta's validation would say about this message, or None."""
        to = str(body.get("to") or "")
        if not to.isdigit():
            return "(#100) Invalid parameter: to"
        kind = body.get("type")
        if kind == "text":
            text = str((body.get("text") or {}).get("body") or "")
            if not text.strip():
                return "(#100) Param text['body'] is required"
            if len(text) > 4096:
                return "(#100) Param text['body'] must be at most 4096 characters long."
        elif kind == "interactive":
            interactive = body.get("interactive") or {}
            text = str((interactive.get("body") or {}).get("text") or "")
            buttons = (interactive.get("action") or {}).get("buttons") or []
            if interactive.get("type") != "button" or not text or len(text) > 1024:
                return "(#100) Param interactive['body']['text'] must be between 1 and 1024 characters long."
            if not 1 <= len(buttons) <= 3:
                return "(#100) Param interactive['action']['buttons'] must have between 1 and 3 elements."
            ids = [str((b.get("reply") or {}).get("id") or "") for b in buttons]
            titles = [str((b.get("reply") or {}).get("title") or "") for b in buttons]
            if any(not t or len(t) > 20 for t in titles) or any(not i or len(i) > 256 for i in ids) \
                    or len(set(ids)) != len(ids):
                return "(#100) Param interactive['action']['buttons'][0]['reply']['title'] is invalid."
        elif kind == "document":
            document = body.get("document") or {}
            with self._cond:
                if str(document.get("id") or "") not in self.uploads:
                    return "(#100) Invalid parameter: document id"
        else:
            return f"(#100) Param type {kind!r} is not supported here."
        context = body.get("context")
        if context is not None and not str((context or {}).get("message_id") or "").startswith("wamid."):
            return "(#100) Invalid parameter: context message_id"
        return None

    # -- the test's side: failures ------------------------------------------------------------------
    def fail_next(self, *, status: int, code: int, message: str, subcode: int = 0) -> None:
        with self._cond:
            self._failures.append(Failure(status, code, message, subcode))

    # -- users writing: Meta's webhooks -------------------------------------------------------------
    def inject_message(self, wa_id: str, kind: str = "text", *, text: str = "", name: str | None = None,
                       extra: dict[str, Any] | None = None, context: str | None = None,
                       timestamp: float | None = None, phone_number_id: str | None = None) -> str:
        """`wa_id` sends a message to the business number; returns its wamid (the event's id)."""
        message_id = f"wamid.IN{next(self._ids):08d}"
        when = time.time() if timestamp is None else timestamp
        message: dict[str, Any] = {"from": wa_id, "id": message_id, "timestamp": str(int(when)), "type": kind}
        if kind == "text":
            message["text"] = {"body": text}
        if extra:
            message.update(extra)
        if context:
            message["context"] = {"from": DISPLAY_NUMBER, "id": context}
        value = {"messaging_product": "whatsapp",
                 "metadata": {"display_phone_number": DISPLAY_NUMBER,
                              "phone_number_id": phone_number_id or self.phone_number_id},
                 "contacts": [{"profile": {"name": name or f"User {wa_id[-4:]}"}, "wa_id": wa_id}],
                 "messages": [message]}
        payload = {"object": "whatsapp_business_account",
                   "entry": [{"id": "102290129340398", "changes": [{"value": value, "field": "messages"}]}]}
        with self._cond:
            previous = self.last_wrote.get(wa_id, 0.0)
            self.last_wrote[wa_id] = max(previous, when)
            self.deliveries[message_id] = Delivery(message_id, json.dumps(payload).encode())
        self._deliver(message_id)
        return message_id

    def add_media(self, data: bytes, mime: str) -> str:
        media_id = str(700000 + next(self._ids))
        with self._cond:
            self.media[media_id] = (data, mime)
        return media_id

    def press_button(self, wa_id: str, button_id: str, title: str, on_message: str) -> str:
        return self.inject_message(wa_id, "interactive", context=on_message, extra={"interactive": {
            "type": "button_reply", "button_reply": {"id": button_id, "title": title}}})

    def redeliver(self, event_id: str) -> None:
        self._deliver(event_id)

    def _deliver(self, event_id: str) -> None:
        assert self._loop is not None, "start() the fake first"
        self._loop.call_soon_threadsafe(self._spawn, event_id)

    def _spawn(self, event_id: str) -> None:
        task = asyncio.ensure_future(self._post_until_acknowledged(event_id))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def sign(self, body: bytes) -> str:
        return "sha256=" + hmac.new(self.app_secret.encode(), body, hashlib.sha256).hexdigest()

    async def _post_until_acknowledged(self, event_id: str) -> None:
        delivery = self.deliveries[event_id]
        backoff = 0.2
        while True:
            status = 0
            if self.webhook_url and self._session is not None:
                try:
                    async with self._session.post(self.webhook_url, data=delivery.body, headers={
                            "Content-Type": "application/json",
                            "X-Hub-Signature-256": self.sign(delivery.body)}) as resp:
                        status = resp.status
                except (aiohttp.ClientError, asyncio.TimeoutError, OSError):
                    status = 0
            with self._cond:
                delivery.attempts += 1
                delivery.statuses.append(status)
                if status == 200:
                    delivery.acknowledged = True
                self._cond.notify_all()
            if status == 200:
                return
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 1.0)

    def acknowledged(self, event_id: str) -> bool:
        with self._cond:
            delivery = self.deliveries.get(event_id)
            return bool(delivery and delivery.acknowledged)
