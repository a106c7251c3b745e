"""The webhook listener: POST /hooks/<name> on its own aiohttp port (`gateway.hooks_host`, `hooks_port`).

Its own listener because the gateway's port speaks WebSocket (and serves the control page by GET);
opened only when a `[hooks.<name>]` table is set, bound to loopback unless told otherwise (a reverse
proxy gives it TLS). Checks run in a fixed order, each refusal a status with a one-line JSON error:
unknown hook 404, anything but POST 405; then, before any of the body is read, an address past its
budget of failed authentications 429, a wrong bearer token or a missing or malformed signature header
401, a declared length over the hook's limit 413; then the body, read in bounded pieces (over the
limit 413), a signature that does not match it 401 (a 401 is logged without anything of the body, at
most once a minute per hook), a burst past the hook's rate 429 with Retry-After. A call is answered
202 {"id"} only once its message is in the inbox and flushed (`durable()`, as gateway/api/chat.py
does): a crash after that runs it after the restart, a crash before leaves the sender without a 2xx,
so it sends again; the same delivery id is one run either way. A storage failure answers 503 so the sender retries. The decisions themselves
are agent/triggers/hooks.py.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import re
import sqlite3
import time
from typing import Any, Awaitable, Callable

from aiohttp import web

from clawgate.agent.bus import Intake
from clawgate.channels.listener import READ_SECONDS, HttpListener
from clawgate.agent.triggers.hooks import Call, FailedAuth, Hook, HookRefused, delivery_id, inbound, parse_body, \
    precheck, render, retry_after, verify
from clawgate.config.loader import ConfigError

log = logging.getLogger("clawgate.hooks")
REFUSAL_LOG_SECONDS = 60.0  # a flood of bad calls is one log line per hook per this, with a count
CHUNK_BYTES = 64 * 1024  # the body is read in pieces of at most this, never past the limit by more than a byte
_HANG_UP = "clawgate.hooks.hang_up"  # set on a request refused before its body: answer, then close unread
_PATH = re.compile(r"^/hooks/([^/]+)/?$")


class HooksServer:
    def __init__(self, hooks: dict[str, Hook], intake: Intake, *, host: str, port: int,
                 clock: Callable[[], float] = time.time, read_seconds: float = READ_SECONDS) -> None:
        self.hooks, self.intake = hooks, intake
        self.host, self._want_port = host, port
        self.clock, self.read_seconds = clock, read_seconds
        self._listener: HttpListener | None = None
        self._refused: dict[str, tuple[float, int]] = {}  # hook -> (last logged, refusals not logged since)
        self.failures = FailedAuth()  # failed authentications per remote address, over every hook
        # in a fleet (gateway/fleet.py): (name, per second, burst) -> seconds to wait, one bucket for all processes
        self.shared_rate: Callable[[str, float, int], Awaitable[float]] | None = None

    @property
    def port(self) -> int:
        assert self._listener is not None
        return self._listener.port

    async def start(self) -> None:
        largest = max(h.settings.max_body_bytes for h in self.hooks.values())
        app = web.Application(client_max_size=largest)
        app.router.add_route("*", "/{tail:.*}", self._serve, expect_handler=self._expect)
        listener = HttpListener(app, host=self.host, port=self._want_port, read_seconds=self.read_seconds)
        try:
            await listener.start()
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise ConfigError(f"config error: gateway.hooks_port {self._want_port} is in use by another program; "
                                  "set another (CLAWGATE_GATEWAY__HOOKS_PORT)") from None
            raise
        self._listener = listener
        log.info("webhooks listening on http://%s:%d/hooks/<name> (%s)", self.host, self.port, ", ".join(sorted(self.hooks)))

    async def stop(self) -> None:
        if self._listener is not None:
            await self._listener.close()
            self._listener = None

    async def _serve(self, request: web.Request) -> web.Response:
        try:
            status, payload, headers = await self._decide(request)
        except HookRefused as refused:
            return await _answer(request, _refusal_response(refused))
        return web.json_response(payload, status=status, headers=headers)

    async def _expect(self, request: web.Request) -> web.StreamResponse | None:
        """`Expect: 100-continue`: the sender waits for a go before it sends the body, so the header checks
        answer it; only a call that passes them is told to go on (aiohttp's default says yes to anyone)."""
        try:
            self._admit(request)
        except HookRefused as refused:
            return await _answer(request, _refusal_response(refused))
        if request.headers.get("Expect", "").lower() != "100-continue":
            return web.json_response({"error": "only Expect: 100-continue is understood"}, status=417)
        await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        request.writer.output_size = 0  # the answer's own bytes are counted from here
        return None

    async def _decide(self, request: web.Request) -> tuple[int, dict[str, Any], dict[str, str]]:
        hook = self._admit(request)
        body = await self._read(request, hook.settings.max_body_bytes, hook)
        now = self.clock()
        try:
            verify(hook.settings, request.headers, body, now)
        except HookRefused as refused:
            self._refusal(hook, refused.reason, request)
            raise
        wait = await self._take_rate(hook, now)
        if wait:
            self._record(hook, 429, note="rate limited")
            log.warning("hook %s: a call refused (429): more than %d at once or %g a minute", hook.name,
                        hook.settings.burst, hook.settings.rate_per_minute)
            raise HookRefused(429, "too many calls; try again after Retry-After seconds", retry_after=wait)
        try:
            fields, raw = parse_body(body, request.headers.get("Content-Type", ""))
        except HookRefused as refused:
            self._record(hook, refused.status, note=refused.reason)
            raise
        delivery = delivery_id(hook.settings, request.headers, body)
        msg = inbound(hook, render(hook, fields, raw, request.headers, request.query), delivery, now)
        try:
            accepted = await self.intake.publish_inbound_async(msg)
            await self.intake.durable()
        except (sqlite3.Error, OSError) as exc:
            log.error("hook %s: could not store delivery %s (%s); answered 503 so the sender retries",
                      hook.name, delivery, exc)
            self._record(hook, 503, delivery, "not stored")
            return 503, {"error": "could not store the call; send it again"}, {"Retry-After": "5"}
        self._record(hook, 202, msg.id, "" if accepted else "a repeated delivery: one run")
        log.info("hook %s: delivery %s %s", hook.name, delivery,
                 "accepted" if accepted else "was already accepted (a repeat); not run again")
        return 202, {"id": msg.id, "duplicate": not accepted}, {}

    async def _take_rate(self, hook: Hook, now: float) -> float:
        """The hook's burst and rate: the fleet's shared bucket where there is one, else this process's.
        Redis away: this process's bucket, so a hook still has a limit (and still takes calls)."""
        if self.shared_rate is not None:
            try:
                return await self.shared_rate(f"hook:{hook.name}", hook.bucket.rate, hook.bucket.burst)
            except Exception as exc:  # noqa: BLE001 - any Redis failure: the local limit is the fallback
                log.warning("hook %s: the fleet's rate limit is unreachable (%s); this process's own is used",
                            hook.name, type(exc).__name__)
        return hook.bucket.take(now)

    def _admit(self, request: web.Request) -> Hook:
        """The checks made on the request line and headers alone, before any of the body is read."""
        match = _PATH.match(request.path)
        hook = self.hooks.get(match.group(1)) if match else None
        if hook is None or request.method != "POST":
            request[_HANG_UP] = True  # a scanner's body is not drained either
            if hook is None:
                raise HookRefused(404, "no such hook; the configured ones are [hooks.<name>] tables, called at "
                                       "/hooks/<name>")
            raise HookRefused(405, "a hook is called with POST")
        # Nothing of the body is read before the headers show the caller may send one: an address past
        # its failed-authentication budget, a wrong bearer token, a missing or malformed signature
        # header and a declared length over the limit are refused first; for a caller without the secret
        # the connection is then closed rather than drained (`_answer`), so a held or endless body costs nothing.
        # A right bearer token passes an address's spent budget (checking it reads nothing), so a flood of
        # bad calls through a shared reverse proxy does not lock out the sender holding the token.
        try:
            precheck(hook.settings, request.headers)
            unsure: HookRefused | None = None
        except HookRefused as refused:
            unsure = refused
        wait = self.failures.wait(request.remote or "unknown", self.clock())
        if wait and (unsure is not None or hook.settings.token is None):
            self._record(hook, 429, note="too many failed authentications from this address")
            request[_HANG_UP] = True
            raise HookRefused(429, "too many failed authentications from this address; try again after Retry-After "
                                   "seconds", retry_after=wait)
        if unsure is not None:
            self._refusal(hook, unsure.reason, request)
            request[_HANG_UP] = True
            raise unsure
        limit = hook.settings.max_body_bytes
        if (request.content_length or 0) > limit:
            self._record(hook, 413, note="body too large")
            raise HookRefused(413, f"the body is larger than this hook's max_body_bytes ({limit})")
        return hook

    async def _read(self, request: web.Request, limit: int, hook: Hook) -> bytes:
        """The body, at most `limit` bytes (a chunked body has no length to check first), within the deadline."""
        chunks: list[bytes] = []
        size = 0
        try:
            async with asyncio.timeout(self.read_seconds):
                while chunk := await request.content.read(min(CHUNK_BYTES, limit + 1 - size)):
                    size += len(chunk)
                    if size > limit:
                        self._record(hook, 413, note="body too large")
                        raise HookRefused(413, f"the body is larger than this hook's max_body_bytes ({limit})")
                    chunks.append(chunk)
        except TimeoutError:
            raise HookRefused(408, "the body did not arrive in time") from None
        return b"".join(chunks)

    def _record(self, hook: Hook, status: int, id: str = "", note: str = "") -> None:
        hook.calls.append(Call(self.clock(), status, id, note))

    def _refusal(self, hook: Hook, reason: str, request: web.Request) -> None:
        """A call without the secret: recorded, counted against its address, and logged (never its body)
        at most once a minute per hook."""
        self._record(hook, 401, note=reason)
        self.failures.failed(request.remote or "unknown", self.clock())
        now = time.monotonic()
        last, quiet = self._refused.get(hook.name, (-REFUSAL_LOG_SECONDS, 0))
        if now - last < REFUSAL_LOG_SECONDS:
            self._refused[hook.name] = (last, quiet + 1)
            return
        self._refused[hook.name] = (now, 0)
        more = f" ({quiet} more refused since the last line)" if quiet else ""
        log.warning("hook %s: a call from %s refused (401): %s%s", hook.name, request.remote, reason, more)


def build_mail_watches(hooks: dict[str, Hook], intake: Intake, db: sqlite3.Connection) -> list[Any]:
    """A watch per mailbox hook, on the email channel's IMAP code (the `email` extra); its UID cursor is
    kept in the channels' state table under `hook:<name>`."""
    try:
        from clawgate.channels.email.watch import MailWatch, mailbox_settings
    except ImportError as exc:
        raise ConfigError(f"config error: hook {next(iter(hooks))} watches a mailbox, which needs the email extra "
                          f"({exc.name} is missing): pip install 'clawgate[email]'") from None
    from clawgate.channels.kit.store import ChannelStore

    watches = []
    for name, hook in hooks.items():
        try:
            settings = mailbox_settings(name, hook.settings.imap or {})
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        watches.append(MailWatch(hook, settings, intake, ChannelStore(db, f"hook:{name}")))
    return watches


async def _answer(request: web.Request, response: web.Response) -> web.Response:
    """The response; for a caller refused on its headers, sent at once and the connection closed, so the
    body it may still send is never read (aiohttp would otherwise drain it for up to lingering_time)."""
    if not request.get(_HANG_UP):
        return response
    response.force_close()
    await response.prepare(request)
    await response.write_eof()
    request.protocol.force_close()  # the transport flushes the answer, then closes
    return response


def _refusal_response(refused: HookRefused) -> web.Response:
    """A refusal as its status and a one-line JSON error; a 401 says no more than `unauthorized`."""
    headers = {"Retry-After": str(retry_after(refused.retry_after))} if refused.retry_after else {}
    if refused.status == 405:
        headers["Allow"] = "POST"
    return web.json_response({"error": refused.reason if refused.status != 401 else "unauthorized"},
                             status=refused.status, headers=headers)
