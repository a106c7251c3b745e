"""FakeSlack: the Web API, the Socket Mode WebSocket and signed HTTP requests, on 127.0.0.1.

The server runs its own event loop in a thread, so it serves a daemon in a subprocess, a sync
test and an async test alike (the real slack_sdk running on the test's loop). All state sits
behind one threading.Condition; ``wait_for`` is a condition wait that wakes on every change.
From an async test use ``await fake.wait_for_async(...)`` so the test's loop keeps running.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from typing import Any, Callable, Iterator, TypeVar
from urllib.parse import parse_qsl

import aiohttp
from aiohttp import web

from tests.fakes.slack import workspace as W
from tests.fakes.slack.limits import MAX_TEXT_CHARS, ApiError
from tests.fakes.slack.records import ApiCall, Envelope, Frame, JSONDict
from tests.fakes.slack.signing import signed_headers
from tests.fakes.slack.socket_mode import SocketMode
from tests.fakes.slack.webapi import METHODS

T = TypeVar("T")

BOT_TOKEN = "xoxb-0000000001-0000000002-fakebottoken"
APP_TOKEN = "xapp-1-A0FAKE0001-0000000003-fakeapptoken"
SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"


class _Failure:
    def __init__(self, *, error: str, status: int, retry_after: int | None, times: int) -> None:
        self.error, self.status, self.retry_after, self.times = error, status, retry_after, times


class FakeSlack:
    def __init__(self, *, bot_token: str = BOT_TOKEN, app_token: str = APP_TOKEN,
                 signing_secret: str = SIGNING_SECRET, ack_timeout: float = 3.0, max_retries: int = 3,
                 disconnect_grace: float = 10.0, max_text_chars: int = MAX_TEXT_CHARS) -> None:
        self.bot_token, self.app_token, self.signing_secret = bot_token, app_token, signing_secret
        self.max_text_chars = max_text_chars
        self._cond = threading.Condition()
        self.workspace = W.Workspace()
        self.calls: list[ApiCall] = []
        self.frames: list[Frame] = []
        self.envelopes: list[Envelope] = []
        self._envelopes_by_id: dict[str, Envelope] = {}
        self.unknown_acks: list[JSONDict] = []
        self.uploads: list[tuple[str, bytes]] = []
        self.file_fetches: list[tuple[str, str]] = []  # url_private downloads: (file id, Authorization)
        self.responses: list[tuple[str, JSONDict]] = []  # posts to response_url: (id, body)
        self._failures: dict[str, list[_Failure]] = {}
        self.socket = SocketMode(self, ack_timeout=ack_timeout, max_retries=max_retries,
                                 disconnect_grace=disconnect_grace)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self.port = 0

    # -- lifecycle --------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def api_url(self) -> str:
        """What to give AsyncWebClient(base_url=…): Slack's is "https://slack.com/api/"."""
        return f"{self.base_url}/api/"

    def start(self) -> "FakeSlack":
        ready = threading.Event()
        self._loop = asyncio.new_event_loop()

        def run() -> None:
            asyncio.set_event_loop(self._loop)
            self._loop.run_until_complete(self._start_server())
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, name="fake-slack", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("fake Slack server did not start")
        return self

    async def _start_server(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/api/{method}", self._api)
        app.router.add_get("/link/", self.socket.handle)
        app.router.add_post("/upload/v1/{key}", self._upload)
        app.router.add_get("/files-pri/{team_file}/{name}", self._file_private)
        app.router.add_post("/response/{rid}", self._response_url)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    def stop(self) -> None:
        if self._loop is None:
            return

        async def shutdown() -> None:
            await self.socket.close_all()
            if self._runner is not None:
                await self._runner.cleanup()

        asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)
        self._loop.close()
        self._loop = None

    def __enter__(self) -> "FakeSlack":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self, coro: Any, timeout: float = 10) -> Any:
        assert self._loop is not None, "start() the fake first"
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    # -- Web API ----------------------------------------------------------------------------
    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        params: JSONDict = dict(request.query)
        ctype = request.content_type
        if request.method == "POST" and request.can_read_body:
            if ctype == "application/json":
                try:
                    body = await request.json()
                except ValueError:
                    return self._answer(method, params, None, 200, {"ok": False, "error": "invalid_json"})
                if isinstance(body, dict):
                    params.update(body)
            elif ctype in ("application/x-www-form-urlencoded", "multipart/form-data"):
                form = await request.post()
                params.update({k: v for k, v in form.items() if isinstance(v, str)})
            else:
                raw = await request.text()
                params.update(dict(parse_qsl(raw)))
        token = None
        auth = request.headers.get("Authorization", "")
        if auth.startswith("Bearer "):
            token = auth[len("Bearer "):].strip()
        token = token or params.pop("token", None)
        params.pop("token", None)
        with self._cond:
            status, body, headers = self._dispatch(method, params, token)
        return self._answer(method, params, token, status, body, headers)

    def _dispatch(self, method: str, params: JSONDict, token: str | None) -> tuple[int, JSONDict, dict]:
        entry = METHODS.get(method)
        if entry is None:
            return 200, {"ok": False, "error": "unknown_method"}, {}
        if not token:
            return 200, {"ok": False, "error": "not_authed"}, {}
        handler, kind = entry
        if token not in (self.bot_token, self.app_token):
            return 200, {"ok": False, "error": "invalid_auth"}, {}
        if (kind == "app") != (token == self.app_token):
            return 200, {"ok": False, "error": "not_allowed_token_type"}, {}
        queue = self._failures.get(method)
        if queue:
            failure = queue[0]
            failure.times -= 1
            if failure.times <= 0:
                queue.pop(0)
            headers = {"Retry-After": str(failure.retry_after)} if failure.retry_after is not None else {}
            return failure.status, {"ok": False, "error": failure.error}, headers
        try:
            result = handler(self, params)
        except ApiError as e:
            return 200, {"ok": False, "error": e.error, **e.extra}, {}
        return 200, {"ok": True, **result}, {}

    def _answer(self, method: str, params: JSONDict, token: str | None, status: int, body: JSONDict,
                headers: dict | None = None) -> web.Response:
        with self._cond:
            self.calls.append(ApiCall(method, params, token, status, body))
            self._cond.notify_all()
        return web.json_response(body, status=status, headers=headers or {})

    async def _upload(self, request: web.Request) -> web.Response:
        data = await request.read()
        key = request.match_info["key"]
        with self._cond:
            f = next((f for f in self.workspace.files.values() if f["upload_key"] == key), None)
            if f is None:
                return web.Response(status=404, text="Not Found", content_type="text/plain")
            f["data"] = data
            self.uploads.append((f["id"], data))
            self._cond.notify_all()
        return web.Response(text=f"OK - {len(data)}", content_type="text/plain")

    async def _file_private(self, request: web.Request) -> web.Response:
        """url_private: the file's bytes for ``Authorization: Bearer <bot token>``; without it Slack
        answers with its sign-in page (HTML, status 200), which the fake imitates."""
        file_id = request.match_info["team_file"].rsplit("-", 1)[-1]
        auth = request.headers.get("Authorization", "")
        with self._cond:
            self.file_fetches.append((file_id, auth))
            self._cond.notify_all()
            f = self.workspace.files.get(file_id)
            data = f.get("data") if f else None
        if f is None or data is None:
            return web.Response(status=404, text="Not Found", content_type="text/plain")
        if auth != f"Bearer {self.bot_token}":
            return web.Response(text="<html><body>Sign in to Fake Team</body></html>", content_type="text/html")
        return web.Response(body=data, content_type=f["mimetype"])

    async def _response_url(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
        except ValueError:
            return web.Response(status=400, text="invalid_payload", content_type="text/plain")
        with self._cond:
            self.responses.append((request.match_info["rid"], body))
            self._cond.notify_all()
        return web.Response(text="ok", content_type="text/plain")

    # -- failure injection ------------------------------------------------------------------
    def rate_limit(self, method: str, *, retry_after: int = 1, times: int = 1) -> None:
        """The next ``times`` calls of ``method`` get HTTP 429 {"ok": false, "error": "ratelimited"}
        with a Retry-After header (seconds), as Slack answers a rate-limited call."""
        self.fail(method, "ratelimited", status=429, retry_after=retry_after, times=times)

    def fail(self, method: str, error: str, *, status: int = 200, retry_after: int | None = None,
             times: int = 1) -> None:
        """The next ``times`` calls of ``method`` fail with ``error`` (HTTP ``status``)."""
        with self._cond:
            self._failures.setdefault(method, []).append(
                _Failure(error=error, status=status, retry_after=retry_after, times=times))

    # -- Socket Mode injection (callable from any thread) ------------------------------------
    def _envelope(self, type_: str, payload: JSONDict, accepts_response_payload: bool) -> Envelope:
        env = Envelope(envelope_id=str(uuid.uuid4()), type=type_, payload=payload,
                       accepts_response_payload=accepts_response_payload)
        self._run(self.socket.deliver(env))
        return env

    def send_event(self, event: JSONDict) -> Envelope:
        """Any Events API event, wrapped in an event_callback and an ``events_api`` envelope."""
        with self._cond:
            payload = self.workspace.event_callback(event)
        return self._envelope("events_api", payload, False)

    def send_message(self, text: str, *, user: str = W.OWNER_ID, channel: str = W.OWNER_DM,
                     thread_ts: str | None = None) -> Envelope:
        """A person's message (a DM by default): a ``message`` event with channel_type."""
        with self._cond:
            event = self.workspace.user_message(text=text, user=user, channel=channel,
                                                thread_ts=thread_ts, kind="message")
        return self.send_event(event)

    def send_file(self, name: str, data: bytes, *, text: str = "", mimetype: str = "text/plain",
                  user: str = W.OWNER_ID, channel: str = W.OWNER_DM, full_file: bool = True) -> Envelope:
        """A person shares a file: a ``message`` event with subtype ``file_share`` and its file
        object (with ``full_file=False`` only ``{"id": …}``, as Slack sends for some files, so the
        app has to ask files.info)."""
        with self._cond:
            f = self.workspace.add_user_file(name=name, data=data, mimetype=mimetype, user=user)
            event = self.workspace.user_message(text=text, user=user, channel=channel, thread_ts=None,
                                                kind="message")
            event["subtype"] = "file_share"
            event["files"] = [self.workspace.file_object(self.base_url, f) if full_file else {"id": f["id"]}]
        return self.send_event(event)

    def send_mention(self, text: str, *, user: str = W.OWNER_ID, channel: str = W.GENERAL,
                     thread_ts: str | None = None, also_message_event: bool = False) -> Envelope:
        """A channel message mentioning the bot: an ``app_mention`` event. ``text`` gets the
        ``<@BOT>`` prefix unless it already mentions the bot. With ``also_message_event`` the same
        message is sent a second time as a ``message`` event (its own event_id, same ts), as Slack
        does for an app subscribed to both app_mention and message.channels."""
        mention = f"<@{W.BOT_USER_ID}>"
        body = text if mention in text else f"{mention} {text}"
        with self._cond:
            event = self.workspace.user_message(text=body, user=user, channel=channel,
                                                thread_ts=thread_ts, kind="app_mention")
        env = self.send_event(event)
        if also_message_event:
            twin = {k: v for k, v in event.items() if k != "type"}
            with self._cond:
                twin.update({"type": "message", "channel_type": self.workspace.channel_type(channel)})
            self.send_event(twin)
        return env

    def press_button(self, message_ts: str, action_id: str, *, channel: str | None = None,
                     value: str | None = None, user: str = W.OWNER_ID) -> Envelope:
        """A person presses a Block Kit button on a message the bot posted: ``block_actions``."""
        with self._cond:
            msg = next((m for m in self.workspace.messages if m["ts"] == message_ts
                        and (channel is None or m["channel"] == channel)), None)
            if msg is None:
                raise KeyError(f"no message {message_ts} in the fake workspace")
            payload = self.workspace.block_actions(action_id=action_id, value=value, message=msg,
                                                   user=user, block_id=None,
                                                   response_url=self._new_response_url())
        return self._envelope("interactive", payload, False)

    def slash_command(self, command: str, text: str = "", *, user: str = W.OWNER_ID,
                      channel: str = W.OWNER_DM) -> Envelope:
        """A person runs ``/command text``: a ``slash_commands`` envelope, which accepts a
        response payload in its acknowledgement."""
        with self._cond:
            payload = self.workspace.slash_command(command=command, text=text, user=user, channel=channel,
                                                   response_url=self._new_response_url())
        return self._envelope("slash_commands", payload, True)

    def redeliver(self, env: Envelope) -> Envelope:
        """Deliver ``env``'s payload again as a new envelope (same event_id, retry_attempt + 1), as
        Slack does when it missed the acknowledgement (a reconnect at the wrong moment)."""
        retry = Envelope(envelope_id=str(uuid.uuid4()), type=env.type, payload=env.payload,
                         accepts_response_payload=env.accepts_response_payload,
                         retry_attempt=env.retry_attempt + 1, retry_reason="timeout")
        self._run(self.socket.deliver(retry))
        return retry

    def _new_response_url(self) -> str:
        return f"{self.base_url}/response/{self.workspace.next_id('R')}"

    def disconnect(self, reason: str = "refresh_requested") -> list[int]:
        """Send a ``disconnect`` frame on every open connection; returns their ids."""
        return self._run(self.socket.disconnect(reason))

    # -- HTTP Events API mode -------------------------------------------------------------
    def signed_request(self, body: str | bytes, *, content_type: str = "application/json",
                       timestamp: int | None = None, secret: str | None = None) -> dict[str, str]:
        return signed_headers(secret or self.signing_secret, body, timestamp=timestamp,
                              content_type=content_type)

    def url_verification_body(self, challenge: str = "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P") -> str:
        """The request Slack sends when the app's Request URL is saved; the app answers the challenge."""
        return json.dumps({"token": "fake-verification-token", "challenge": challenge, "type": "url_verification"})

    def event_body(self, event: JSONDict) -> str:
        with self._cond:
            return json.dumps(self.workspace.event_callback(event))

    async def post_signed(self, url: str, body: str, *, content_type: str = "application/json",
                          timestamp: int | None = None, tamper: bool = False, retry_num: int | None = None,
                          secret: str | None = None) -> tuple[int, str]:
        """POST ``body`` to the app's URL signed as Slack signs it; ``tamper`` changes the body
        after signing. Returns (status, response text). Runs on the caller's loop."""
        headers = self.signed_request(body, content_type=content_type, timestamp=timestamp, secret=secret)
        if retry_num is not None:
            headers.update({"X-Slack-Retry-Num": str(retry_num), "X-Slack-Retry-Reason": "http_timeout"})
        sent = body + " " if tamper else body
        async with aiohttp.ClientSession() as session:
            async with session.post(url, data=sent.encode(), headers=headers) as resp:
                return resp.status, await resp.text()

    def post_signed_sync(self, url: str, body: str, **kw: Any) -> tuple[int, str]:
        """post_signed from a sync test (sent from the fake's own loop)."""
        return self._run(self.post_signed(url, body, **kw), timeout=30)

    # -- observation ------------------------------------------------------------------------
    def wait_for(self, predicate: Callable[["FakeSlack"], T], timeout: float = 10.0) -> T:
        """Block until ``predicate(fake)`` is truthy (checked under the lock on every change);
        returns its value, or raises TimeoutError."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                value = predicate(self)
                if value:
                    return value
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"fake Slack: condition not met in {timeout}s")
                self._cond.wait(left)

    async def wait_for_async(self, predicate: Callable[["FakeSlack"], T], timeout: float = 10.0) -> T:
        return await asyncio.to_thread(self.wait_for, predicate, timeout)

    def posted(self, channel: str | None = None) -> list[JSONDict]:
        """Messages the bot posted with chat.postMessage (current text after chat.update)."""
        with self._cond:
            return [dict(m) for m in self.workspace.messages if m.get("user") == W.BOT_USER_ID
                    and not m.get("upload") and (channel is None or m["channel"] == channel)]

    def calls_to(self, method: str) -> list[ApiCall]:
        with self._cond:
            return [c for c in self.calls if c.method == method]

    def acked(self) -> list[Envelope]:
        with self._cond:
            return [e for e in self.envelopes if e.acked]

    def envelopes_for(self, event_id: str) -> list[Envelope]:
        with self._cond:
            return [e for e in self.envelopes if e.event_id == event_id]

    def frames_out(self, type_: str | None = None) -> Iterator[Frame]:
        with self._cond:
            frames = list(self.frames)
        return (f for f in frames if f.direction == "out" and (type_ is None or f.data.get("type") == type_))
