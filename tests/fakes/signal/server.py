"""FakeSignalCli: signal-cli's HTTP daemon on 127.0.0.1 — POST /api/v1/rpc, GET /api/v1/events (SSE),
GET /api/v1/check — in multi-account mode (every call names its `account`).

What it answers is what signal-cli answers (SignalJsonRpcCommandHandler, HttpServerHandler): JSON-RPC
errors -32600 (no method), -32601 (method not implemented), -32602 ("Specified account does not
exist", a bad parameter), -1 (a user error: "Failed to send message" to an unregistered recipient, an
unknown group), -5 (rate limited, with `data.response.results[].retryAfterSeconds`); HTTP 415 without a
JSON content type, 400 on the event stream for an unknown account. Events are `{"envelope": …,
"account": …}` objects, each written once to the streams open at that moment, as signal-cli does
(it has acknowledged the envelope to Signal's servers already). Runs its own loop in a thread, so it
serves a daemon in a subprocess and a sync test alike; state sits behind one lock.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import re
import threading
import time
import uuid as uuidlib
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

BOT_NUMBER = "+15550000001"
BOT_UUID = "0b0b0b0b-0000-4000-8000-000000000001"
MENTION_MARK = "\ufffc"
_STYLE = re.compile(r"^(\d+):(\d+):(BOLD|ITALIC|SPOILER|STRIKETHROUGH|MONOSPACE)$")
_DATA_URI = re.compile(r"^data:([^;,]+)(?:;filename=([^;,]*))?;base64,(.*)$", re.S)


@dataclass(frozen=True)
class Person:
    number: str | None
    uuid: str
    profile_name: str


@dataclass
class Call:
    method: str
    params: dict[str, Any]
    at: float  # time.monotonic() when it arrived


@dataclass
class Sent:
    """One message the bot sent: its chat as the adapter names it (a uuid, or group:<id>)."""

    account: str
    chat: str
    timestamp: int
    message: str
    styles: list[str]
    attachments: list[tuple[str, str, bytes]] = field(default_factory=list)  # (name, mime, data)
    quote: tuple[int, str] | None = None  # (timestamp, author)


class _RpcFailure(Exception):
    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


class FakeSignalCli:
    def __init__(self, *, accounts: dict[str, str] | None = None, version: str = "0.13.22",
                 keepalive_seconds: float = 15.0, single_account: bool = False) -> None:
        self.accounts: dict[str, str] = dict(accounts or {BOT_NUMBER: BOT_UUID})  # number -> ACI
        # `signal-cli -a NUMBER daemon`: the multi-account methods (listAccounts, startLink, finishLink) are
        # not implemented, every call is the one account's and the event stream ignores `?account=`
        self.single_account = single_account
        self.version = version
        self.keepalive_seconds = keepalive_seconds
        self._lock = threading.Lock()
        self.people: dict[str, Person] = {}  # uuid -> person
        self.groups: dict[str, list[str]] = {}  # group id -> member uuids (the bot in all)
        self.calls: list[Call] = []
        self.sent: list[Sent] = []
        self.reactions_sent: list[dict[str, Any]] = []
        self.events: list[dict[str, Any]] = []  # every event written (for redelivery)
        self._stored: dict[str, bytes] = {}  # attachment id -> bytes signal-cli downloaded
        self._failures: dict[str, list[_RpcFailure]] = {}
        self._streams: list[tuple[str, asyncio.Queue[str | None]]] = []
        self._clock = itertools.count(int(time.time() * 1000))
        self.link_uri: str | None = None
        self.linked_number = "+15550000099"  # the number finishLink links (the phone that scans)
        self.scanned = threading.Event()  # finishLink answers once the phone scanned (at once unless held)
        self.scanned.set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self.port = 0

    # -- lifecycle --------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "FakeSignalCli":
        ready = threading.Event()
        self._loop = asyncio.new_event_loop()

        def run() -> None:
            assert self._loop is not None
            asyncio.set_event_loop(self._loop)
            self._loop.run_until_complete(self._serve())
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, name="fake-signal-cli", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("fake signal-cli did not start")
        return self

    async def _serve(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/api/v1/rpc", self._rpc)
        app.router.add_route("*", "/api/v1/events", self._events)
        app.router.add_get("/api/v1/check", self._check)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port)  # the same port again after a stop
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    def stop(self) -> None:
        """signal-cli goes away: streams end, connections are refused."""
        if self._loop is None:
            return

        async def shutdown() -> None:
            for _, queue in list(self._streams):
                queue.put_nowait(None)
            if self._runner is not None:
                await self._runner.cleanup()

        asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)
        self._loop.close()
        self._loop = None

    def __enter__(self) -> "FakeSignalCli":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- the world around the bot ------------------------------------------------------------
    def add_person(self, name: str, *, number: str | None = None) -> Person:
        """Someone on Signal; `number` None: one who does not share their number (uuid only)."""
        person = Person(number, str(uuidlib.uuid5(uuidlib.NAMESPACE_URL, f"signal:{name}")), name.title())
        with self._lock:
            self.people[person.uuid] = person
        return person

    def add_group(self, members: list[Person]) -> str:
        group_id = base64.b64encode(uuidlib.uuid4().bytes * 2).decode()
        with self._lock:
            self.groups[group_id] = [m.uuid for m in members]
        return group_id

    def open_streams(self, account: str = BOT_NUMBER) -> int:
        """Event streams open for `account` right now."""
        with self._lock:
            return sum(1 for a, _ in self._streams if a == account)

    def connected(self, account: str = BOT_NUMBER) -> bool:
        with self._lock:
            return any(a == account for a, _ in self._streams)

    def write(self, person: Person, text: str, *, group: str | None = None, mention_bot: bool = False,
              attachments: list[tuple[str, str, bytes]] = (), quote: Sent | None = None,  # type: ignore[assignment]
              account: str = BOT_NUMBER) -> dict[str, Any]:
        """`person` sends a message to the bot (in `group`, or privately); a mention of the bot is the
        object replacement character the way Signal clients put it in the text. Returns the event."""
        stamp = next(self._clock)
        data: dict[str, Any] = {"timestamp": stamp, "message": text, "expiresInSeconds": 0, "viewOnce": False}
        if mention_bot:
            data["message"] = f"{MENTION_MARK} {text}"
            data["mentions"] = [{"name": account, "number": account, "uuid": self.accounts[account],
                                 "start": 0, "length": 1}]
        if attachments:
            data["attachments"] = []
            for name, mime, blob in attachments:
                attachment_id = f"{uuidlib.uuid4().hex[:20]}.bin"
                with self._lock:
                    self._stored[attachment_id] = blob
                data["attachments"].append({"contentType": mime, "filename": name, "id": attachment_id,
                                            "size": len(blob), "width": None, "height": None, "caption": None,
                                            "uploadTimestamp": stamp})
        if quote is not None:
            data["quote"] = {"id": quote.timestamp, "author": account, "authorNumber": account,
                             "authorUuid": self.accounts[account], "text": quote.message, "attachments": []}
        if group:
            data["groupInfo"] = {"groupId": group, "groupName": "Test group", "revision": 1, "type": "DELIVER"}
        return self.deliver(self._envelope(person, stamp, data), account)

    def react(self, person: Person, emoji: str, target: Sent, *, account: str = BOT_NUMBER) -> dict[str, Any]:
        """`person` reacts with `emoji` to a message the bot sent."""
        stamp = next(self._clock)
        data: dict[str, Any] = {"timestamp": stamp, "message": None, "expiresInSeconds": 0, "viewOnce": False,
                                "reaction": {"emoji": emoji, "targetAuthor": account, "targetAuthorNumber": account,
                                             "targetAuthorUuid": self.accounts[account],
                                             "targetSentTimestamp": target.timestamp, "isRemove": False}}
        if target.chat.startswith("group:"):
            data["groupInfo"] = {"groupId": target.chat[6:], "groupName": "Test group", "revision": 1,
                                 "type": "DELIVER"}
        return self.deliver(self._envelope(person, stamp, data), account)

    def _envelope(self, person: Person, stamp: int, data: dict[str, Any]) -> dict[str, Any]:
        return {"source": person.number or person.uuid, "sourceNumber": person.number, "sourceUuid": person.uuid,
                "sourceName": person.profile_name, "sourceDevice": 1, "timestamp": stamp,
                "serverReceivedTimestamp": stamp + 5, "serverDeliveredTimestamp": stamp + 9, "dataMessage": data}

    def deliver(self, envelope: dict[str, Any], account: str = BOT_NUMBER) -> dict[str, Any]:
        """Write one `receive` event to every stream open for `account` now (as signal-cli: once)."""
        event = {"envelope": envelope, "account": account}
        line = json.dumps(event)
        with self._lock:
            self.events.append(event)
            queues = [q for a, q in self._streams if a == account]
        assert self._loop is not None, "start() the fake first"
        for queue in queues:
            self._loop.call_soon_threadsafe(queue.put_nowait, line)
        return event

    def redeliver(self, event: dict[str, Any]) -> None:
        """The same envelope again (signal-cli retrying a message it had cached when it restarted)."""
        self.deliver(event["envelope"], event["account"])

    # -- failures ---------------------------------------------------------------------------
    def fail(self, method: str, code: int, message: str, data: Any = None) -> None:
        """The next call of `method` is answered with this JSON-RPC error."""
        with self._lock:
            self._failures.setdefault(method, []).append(_RpcFailure(code, message, data))

    def rate_limit(self, seconds: int, recipient: str | None = None) -> None:
        """The next send is refused the way signal-cli refuses a rate-limited one."""
        result = {"recipientAddress": {"uuid": recipient, "number": None}, "type": "RATE_LIMIT_FAILURE",
                  "retryAfterSeconds": seconds}
        self.fail("send", -5, "Failed to send message due to rate limiting",
                  {"response": {"timestamp": next(self._clock), "results": [result]}})

    # -- what the bot did --------------------------------------------------------------------
    def calls_to(self, method: str) -> list[Call]:
        with self._lock:
            return [c for c in self.calls if c.method == method]

    def sent_to(self, chat: str | None = None) -> list[Sent]:
        with self._lock:
            return [s for s in self.sent if chat is None or s.chat == chat]

    # -- the HTTP side ------------------------------------------------------------------------
    async def _rpc(self, request: web.Request) -> web.StreamResponse:
        if request.method != "POST":
            return web.Response(status=405)
        if not request.headers.get("Content-Type", "").startswith("application/json"):
            return web.Response(status=415)
        try:
            body = json.loads(await request.text())
        except ValueError:
            return web.json_response(_error(None, -32700, "Failed to parse JSON"))
        if not isinstance(body, dict) or not body.get("method"):
            return web.json_response(_error(body.get("id") if isinstance(body, dict) else None, -32600,
                                            "method field must be set"))
        params = body.get("params") or {}
        with self._lock:
            self.calls.append(Call(str(body["method"]), dict(params), time.monotonic()))
        if body["method"] == "finishLink":  # signal-cli's finishLink blocks until the phone scans
            await asyncio.get_running_loop().run_in_executor(None, self.scanned.wait, 300)
        try:
            result = self._call(str(body["method"]), dict(params))
        except _RpcFailure as f:
            return web.json_response(_error(body.get("id"), f.code, f.message, f.data))
        return web.json_response({"jsonrpc": "2.0", "result": result, "id": body.get("id")})

    def _call(self, method: str, params: dict[str, Any]) -> Any:
        with self._lock:
            queued = self._failures.get(method)
            if queued:
                raise queued.pop(0)
        if method == "version":
            return {"version": self.version}
        if self.single_account:
            if method not in _SINGLE:
                raise _RpcFailure(-32601, "Method not implemented")
            return getattr(self, f"_do_{method}")(next(iter(self.accounts)), params)
        if method == "listAccounts":
            return [{"number": n} for n in self.accounts]
        if method == "startLink":
            self.link_uri = f"sgnl://linkdevice?uuid={uuidlib.uuid4().hex[:22]}&pub_key=BfakeKey"
            return {"deviceLinkUri": self.link_uri}
        if method == "finishLink":
            if params.get("deviceLinkUri") != self.link_uri or not self.link_uri:
                raise _RpcFailure(-1, "Unknown device link uri.")
            with self._lock:
                self.accounts[self.linked_number] = str(uuidlib.uuid4())
            return {"number": self.linked_number}
        if method not in _SINGLE:
            raise _RpcFailure(-32601, "Method not implemented")
        account = params.pop("account", None)
        if account is None and len(self.accounts) != 1:
            raise _RpcFailure(-32602, "Method requires valid account parameter")
        if account is not None and account not in self.accounts:
            raise _RpcFailure(-32602, "Specified account does not exist")
        return getattr(self, f"_do_{method}")(account or next(iter(self.accounts)), params)

    def _chat(self, params: dict[str, Any]) -> str:
        recipients, group = params.get("recipient"), params.get("groupId")
        if isinstance(recipients, str):
            recipients = [recipients]
        if group:
            if group not in self.groups:
                raise _RpcFailure(-1, "Invalid group id")
            return f"group:{group}"
        if not recipients:
            raise _RpcFailure(-1, "No recipients given")
        who = str(recipients[0])
        person = self.people.get(who) or next((p for p in self.people.values() if p.number == who), None)
        if person is None:
            raise _RpcFailure(-1, "Failed to send message",
                              {"response": {"timestamp": next(self._clock), "results": [
                                  {"recipientAddress": {"uuid": who, "number": None}, "type": "UNREGISTERED_FAILURE"}]}})
        return person.uuid

    def _do_send(self, account: str, params: dict[str, Any]) -> dict[str, Any]:
        chat = self._chat(params)
        message = str(params.get("message") or "")
        styles = params.get("textStyle") or []
        styles = [styles] if isinstance(styles, str) else list(styles)
        units = len(message.encode("utf-16-le")) // 2
        for style in styles:
            match = _STYLE.match(str(style))
            if not match or int(match.group(1)) + int(match.group(2)) > units:
                raise _RpcFailure(-32602, f"Invalid text style: {style}")
        files = []
        raw = params.get("attachments") or params.get("attachment") or []
        for item in [raw] if isinstance(raw, str) else raw:
            match = _DATA_URI.match(str(item))
            if not match:
                raise _RpcFailure(-1, f"Failed to send message: attachment {str(item)[:40]} not found")
            files.append((match.group(2) or "", match.group(1), base64.b64decode(match.group(3))))
        if not message and not files:
            raise _RpcFailure(-1, "Message is empty")
        quote = None
        if params.get("quoteTimestamp") is not None:
            quote = (int(params["quoteTimestamp"]), str(params.get("quoteAuthor") or ""))
        stamp = next(self._clock)
        with self._lock:
            self.sent.append(Sent(account, chat, stamp, message, styles, files, quote))
        return {"timestamp": stamp, "results": [{"recipientAddress": {"uuid": chat, "number": None},
                                                 "type": "SUCCESS"}]}

    def _do_sendTyping(self, account: str, params: dict[str, Any]) -> dict[str, Any]:
        self._chat(params)
        return {}

    def _do_sendReaction(self, account: str, params: dict[str, Any]) -> dict[str, Any]:
        self._chat(params)
        with self._lock:
            self.reactions_sent.append(params)
        return {"timestamp": next(self._clock), "results": []}

    def _do_getAttachment(self, account: str, params: dict[str, Any]) -> dict[str, Any]:
        attachment_id = str(params.get("id") or "")
        if not attachment_id:
            raise _RpcFailure(-1, "Missing attachment id parameter")
        with self._lock:
            blob = self._stored.get(attachment_id)
        if blob is None:
            raise _RpcFailure(-1, f"Could not find attachment with ID: {attachment_id}")
        return {"data": base64.b64encode(blob).decode()}

    def _do_getUserStatus(self, account: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        out = []
        for who in params.get("recipient") or []:
            uuid = self.accounts.get(who) or next((p.uuid for p in self.people.values() if who in (p.number, p.uuid)), None)
            out.append({"recipient": who, "number": who if who.startswith("+") else None, "uuid": uuid,
                        "isRegistered": uuid is not None})
        return out

    async def _check(self, request: web.Request) -> web.Response:
        return web.Response(status=200)

    async def _events(self, request: web.Request) -> web.StreamResponse:
        if request.method != "GET":
            return web.Response(status=405)
        account = None if self.single_account else request.query.get("account")
        if account is not None and account not in self.accounts:
            return web.Response(status=400)
        account = account or next(iter(self.accounts))
        queue: asyncio.Queue[str | None] = asyncio.Queue()
        resp = web.StreamResponse(status=200, headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        with self._lock:
            self._streams.append((account, queue))
        try:
            while True:
                try:
                    line = await asyncio.wait_for(queue.get(), self.keepalive_seconds)
                except asyncio.TimeoutError:
                    await resp.write(b":\n")
                    continue
                if line is None:
                    break
                await resp.write(f"event:receive\ndata:{line}\n\n".encode())
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            with self._lock:
                self._streams.remove((account, queue))
        return resp


_SINGLE = {"send", "sendTyping", "sendReaction", "getAttachment", "getUserStatus"}


def _error(request_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "error": {"code": code, "message": message, "data": data}, "id": request_id}
