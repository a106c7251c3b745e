"""Socket Mode: tickets from apps.connections.open, the WebSocket, envelopes and their acks.

Runs on the fake server's event loop; state is read and written under the server's lock.
Behaviour modelled on Slack's:
- a URL from apps.connections.open is good for one connection (a reused or unknown ticket is
  refused at the upgrade with HTTP 401);
- on connect the server sends ``hello``;
- each envelope goes to one open connection (the newest); with none open it waits, so nothing is
  lost while the app reconnects;
- the app acknowledges with ``{"envelope_id": …}`` (plus ``payload`` where the envelope
  ``accepts_response_payload``). An ``events_api`` envelope not acknowledged within
  ``ack_timeout`` is sent again as a new envelope with the same event_id, ``retry_attempt`` + 1
  and ``retry_reason`` "timeout", up to ``max_retries`` times; ``interactive`` and
  ``slash_commands`` envelopes are not retried (the person sees an error in Slack) and are marked
  expired;
- ``disconnect`` sends ``{"type": "disconnect", "reason": …}`` on every open connection, which then
  gets no new envelopes, and closes it after ``disconnect_grace`` seconds if the app has not.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import TYPE_CHECKING, Any

from aiohttp import WSMsgType, web

from tests.fakes.slack import workspace as W
from tests.fakes.slack.records import Envelope, Frame, JSONDict

if TYPE_CHECKING:
    from tests.fakes.slack.server import FakeSlack


class _Conn:
    def __init__(self, conn_id: int, ws: web.WebSocketResponse) -> None:
        self.id = conn_id
        self.ws = ws
        self.state = "open"  # open | retiring | closed


class SocketMode:
    def __init__(self, fake: "FakeSlack", *, ack_timeout: float, max_retries: int,
                 disconnect_grace: float) -> None:
        self.fake = fake
        self.ack_timeout = ack_timeout
        self.max_retries = max_retries
        self.disconnect_grace = disconnect_grace
        self.tickets: dict[str, bool] = {}  # ticket -> used
        self.conns: dict[int, _Conn] = {}
        self.waiting: list[Envelope] = []  # envelopes with no open connection to go to yet
        self.refused_connects = 0
        self.acks_to_lose = 0  # lose_acks(): acknowledgements dropped as if lost on the way
        self.lost_acks: list[JSONDict] = []
        self._next_conn = 0
        self._timers: set[asyncio.Task] = set()

    # -- called from Web API handlers / the server (lock held) ------------------------------
    def issue_url(self) -> str:
        ticket = uuid.uuid4().hex
        self.tickets[ticket] = False
        host = self.fake.base_url.replace("http://", "ws://", 1)
        return f"{host}/link/?ticket={ticket}&app_id={W.APP_ID}"

    def open_connections(self) -> list[int]:
        return [c.id for c in self.conns.values() if c.state == "open"]

    # -- the WebSocket endpoint -------------------------------------------------------------
    async def handle(self, request: web.Request) -> web.StreamResponse:
        ticket = request.query.get("ticket", "")
        with self.fake._cond:
            if self.tickets.get(ticket) is not False:
                self.refused_connects += 1
                self.fake._cond.notify_all()
                return web.Response(status=401, text="invalid ticket")
            self.tickets[ticket] = True
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        with self.fake._cond:
            self._next_conn += 1
            conn = _Conn(self._next_conn, ws)
            self.conns[conn.id] = conn
            n_open = len(self.open_connections())
        await self._send(conn, {"type": "hello", "num_connections": n_open,
                                "debug_info": {"host": "fake-slack-applink", "build_number": 1,
                                               "approximate_connection_time": 18060},
                                "connection_info": {"app_id": W.APP_ID}})
        await self._flush_waiting()
        try:
            async for msg in ws:
                if msg.type == WSMsgType.TEXT:
                    self._received(conn, msg.data)
                elif msg.type in (WSMsgType.ERROR, WSMsgType.CLOSE):
                    break
        finally:
            with self.fake._cond:
                conn.state = "closed"
                self.fake._cond.notify_all()
        return ws

    def _received(self, conn: _Conn, raw: str) -> None:
        try:
            data = json.loads(raw)
        except ValueError:
            data = {"_unparsed": raw}
        with self.fake._cond:
            self.fake.frames.append(Frame(conn.id, "in", data))
            env_id = data.get("envelope_id") if isinstance(data, dict) else None
            env = self.fake._envelopes_by_id.get(env_id) if env_id else None
            if env is not None and env.acked_at is None and self.acks_to_lose > 0:
                self.acks_to_lose -= 1
                self.lost_acks.append(data)
            elif env is None:
                if env_id:
                    self.fake.unknown_acks.append(data)
            elif env.acked_at is None:
                env.acked_at = time.monotonic()
                env.ack_payload = data.get("payload")
                env.late = env.expired
            self.fake._cond.notify_all()

    async def _send(self, conn: _Conn, data: dict[str, Any]) -> bool:
        try:
            await conn.ws.send_str(json.dumps(data))
        except (ConnectionError, RuntimeError):
            return False
        with self.fake._cond:
            self.fake.frames.append(Frame(conn.id, "out", data))
            self.fake._cond.notify_all()
        return True

    def lose_acks(self, n: int = 1) -> None:
        """Drop the next ``n`` acknowledgements as if they never arrived: the envelope expires and an
        ``events_api`` one is sent again, as Slack does when an ack is lost on the way."""
        with self.fake._cond:
            self.acks_to_lose += n

    # -- envelopes --------------------------------------------------------------------------
    async def deliver(self, env: Envelope) -> None:
        with self.fake._cond:
            self.fake.envelopes.append(env)
            self.fake._envelopes_by_id[env.envelope_id] = env
            self.waiting.append(env)
        await self._flush_waiting()

    async def _flush_waiting(self) -> None:
        while True:
            with self.fake._cond:
                open_conns = [c for c in self.conns.values() if c.state == "open" and not c.ws.closed]
                if not self.waiting or not open_conns:
                    return
                env = self.waiting.pop(0)
                conn = open_conns[-1]
            if not await self._send(conn, env.frame()):
                with self.fake._cond:
                    self.waiting.insert(0, env)
                    conn.state = "closed"
                continue
            with self.fake._cond:
                env.connection = conn.id
                env.sent_at = time.monotonic()
            task = asyncio.get_running_loop().create_task(self._watch(env))
            self._timers.add(task)
            task.add_done_callback(self._timers.discard)

    async def _watch(self, env: Envelope) -> None:
        await asyncio.sleep(self.ack_timeout)
        with self.fake._cond:
            if env.acked:
                return
            env.expired = True
            self.fake._cond.notify_all()
            if env.type != "events_api" or env.retry_attempt >= self.max_retries:
                return
            retry = Envelope(envelope_id=str(uuid.uuid4()), type=env.type, payload=env.payload,
                             accepts_response_payload=env.accepts_response_payload,
                             retry_attempt=env.retry_attempt + 1, retry_reason="timeout")
        await self.deliver(retry)

    async def disconnect(self, reason: str) -> list[int]:
        with self.fake._cond:
            targets = [c for c in self.conns.values() if c.state == "open"]
            for c in targets:
                c.state = "retiring"
        for c in targets:
            await self._send(c, {"type": "disconnect", "reason": reason,
                                 "debug_info": {"host": "fake-slack-applink"}})
            asyncio.get_running_loop().call_later(
                self.disconnect_grace, lambda c=c: asyncio.ensure_future(c.ws.close()))
        return [c.id for c in targets]

    async def close_all(self) -> None:
        for task in list(self._timers):
            task.cancel()
        for c in list(self.conns.values()):
            if not c.ws.closed:
                await c.ws.close()
