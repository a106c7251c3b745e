"""A gateway connection that reads all the time, for a chat that stays open (`clawgate chat`).

`GatewayClient` reads the socket only inside a request or an event loop its caller drives; a
terminal sitting at its prompt drives neither, so the daemon's events (another client's answers,
a cron job's result, ticks) pile up unread, pings go unanswered and the daemon drops it. Here a
reader task owns the socket from connect to close: responses resolve the request that waits for
them, events go to a callback at once. When the connection drops, the reader connects again and
`resume`s the session from the number of the last reply it knows of (docs/protocol.md), so what
was answered meanwhile arrives once.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import uuid
from typing import TYPE_CHECKING, Any, Callable

from websockets.exceptions import ConnectionClosed, WebSocketException

from .client import GatewayClient, GatewayError

if TYPE_CHECKING:
    from websockets.asyncio.client import ClientConnection

log = logging.getLogger(__name__)
RESUME_SECONDS = 60.0  # how long a dropped chat tries to get back to the gateway before giving up
RETRY_SECONDS = 0.5


class LiveClient:
    """One session's live connection: requests at any time, every event to `on_event`, resumed after a drop.

    `on_link` hears "lost" when the connection drops, then "back" once a new one is resumed, or
    "gone" when the gateway did not come back within `resume_seconds` (the reader then ends)."""

    def __init__(self, first: GatewayClient, session: str, *, on_event: Callable[[dict[str, Any]], None],
                 on_link: Callable[[str], None], resume_seconds: float = RESUME_SECONDS,
                 open_timeout: float = 10.0) -> None:
        """`first`: a connected client (subscribed to `session`) whose socket this takes over."""
        self.url, self.token, self.session = first.url, first.token, session
        self.on_event, self.on_link = on_event, on_link
        self.resume_seconds, self.open_timeout = resume_seconds, open_timeout
        self.ws: ClientConnection | None = first.ws
        # The session's latest reply number this client knows of: where a resume starts.
        self.last_reply = _last_reply(first.hello, session)
        self._early = first.take_events()  # events that arrived with the connect reply
        self._ids = itertools.count(1)
        self._pending: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._reader: asyncio.Task[None] | None = None
        self.gone = asyncio.Event()  # set when the reader has ended for good
        self.linked = asyncio.Event()  # set while a connection is up (cleared from a drop until resumed)

    def start(self) -> None:
        """Begin reading (and hand over the events that came with the connect reply)."""
        for frame in self._early:
            self._event(frame)
        self._early.clear()
        if self.ws is not None:
            self.linked.set()
        self._reader = asyncio.create_task(self._read_forever())

    async def send_chat(self, text: str, *, resend: bool = True) -> dict[str, Any]:
        """`chat.send` that outlives a dropped connection: sent with an idempotency key and, when the
        connection drops before the answer, sent again with the same key once it is back — the gateway
        takes a message it already has as a duplicate of the same run, so it runs once either way.
        `resend=False` (a chat command: not idempotent, e.g. /undo) raises GatewayError("closed") instead."""
        params = {"session": self.session, "text": text, "idempotencyKey": uuid.uuid4().hex}
        while True:
            try:
                return await self.request("chat.send", params)
            except GatewayError as exc:
                if exc.code != "closed" or not resend or not await self._until_linked():
                    raise

    async def _until_linked(self) -> bool:
        """Wait for the connection to be back (True) or for the reader to give up (False)."""
        if self.linked.is_set():
            await asyncio.sleep(RETRY_SECONDS)  # the drop is not seen by the reader yet
        waits = [asyncio.ensure_future(self.linked.wait()), asyncio.ensure_future(self.gone.wait())]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()
        return self.linked.is_set() and not self.gone.is_set()

    def saw_reply(self, seq: Any) -> None:
        """A reply numbered `seq` reached this client (or was numbered before one it sent)."""
        if isinstance(seq, int) and seq > self.last_reply:
            self.last_reply = seq

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send a request and wait for its response; GatewayError("closed") when the connection
        drops first (the request may or may not have been carried out)."""
        ws = self.ws
        if ws is None:
            raise GatewayError("closed", "not connected to the gateway")
        rid = f"l{next(self._ids)}"
        answer: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[rid] = answer
        try:
            await ws.send(json.dumps({"type": "req", "id": rid, "method": method, "params": params or {}}))
            return await answer
        except ConnectionClosed:
            raise GatewayError("closed", "the connection to the gateway dropped before it answered") from None
        finally:
            self._pending.pop(rid, None)

    async def close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            try:
                await self._reader
            except asyncio.CancelledError:
                pass
        if self.ws is not None:
            await self.ws.close()

    # the reader ----------------------------------------------------------------------
    async def _read_forever(self) -> None:
        try:
            while True:
                assert self.ws is not None
                try:
                    async for raw in self.ws:
                        self._frame(raw)
                except (ConnectionClosed, OSError) as exc:
                    log.debug("gateway connection dropped: %s", exc)
                self.linked.clear()
                self._drop_pending()
                self.on_link("lost")
                if not await self._reconnect():
                    self.ws = None
                    self.on_link("gone")
                    return
                self.linked.set()
                self.on_link("back")
        finally:
            self.linked.clear()
            self.gone.set()

    def _frame(self, raw: str | bytes) -> None:
        try:
            frame = json.loads(raw)
        except ValueError:
            return
        if not isinstance(frame, dict):
            return
        if frame.get("type") == "event":
            # After the answers already read: the server sends a request's response before the events it
            # caused, and a caller woken by that response must see it (and expect its run) before them.
            asyncio.get_running_loop().call_soon(self._event, frame)
            return
        answer = self._pending.get(str(frame.get("id")))
        if answer is None or answer.done():
            return
        if frame.get("ok"):
            answer.set_result(frame.get("payload") or {})
        else:
            error = frame.get("error") or {}
            answer.set_exception(GatewayError(error.get("code", "error"), error.get("message", "")))

    def _event(self, frame: dict[str, Any]) -> None:
        try:
            self.on_event(frame)
        except Exception:  # showing one event must not end the reading
            log.exception("showing a gateway event failed")

    def _drop_pending(self) -> None:
        for answer in self._pending.values():
            if not answer.done():
                answer.set_exception(GatewayError("closed", "the connection to the gateway dropped before it answered"))

    async def _reconnect(self) -> bool:
        """Connect again within resume_seconds, resuming the session after the last reply known."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.resume_seconds
        while loop.time() < deadline:
            client = GatewayClient(self.url, self.token, subscribe=[self.session],
                                   resume={self.session: self.last_reply}, open_timeout=self.open_timeout)
            try:
                await asyncio.wait_for(client.__aenter__(), self.open_timeout)
            except (OSError, asyncio.TimeoutError, WebSocketException, GatewayError, ValueError):
                await client.__aexit__(None, None, None)
                await asyncio.sleep(RETRY_SECONDS)
                continue
            self.ws = client.ws
            for frame in client.take_events():  # replies resumed before the connect reply was read
                self._event(frame)
            return True
        return False


def _last_reply(hello: dict[str, Any], session: str) -> int:
    """The session's latest reply number as the connect reply gave it (0: none, or an older daemon)."""
    replies = hello.get("lastReply")
    value = replies.get(session) if isinstance(replies, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
