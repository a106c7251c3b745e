"""The Gateway: one WebSocket per connection, sessions that outlive connections, RESUME replay.

What a real Gateway does and this one checks (https://discord.com/developers/docs/events/gateway):
HELLO with ``heartbeat_interval``; heartbeats (op 1) answered with ACK (op 11); IDENTIFY (op 2)
with the right token (else close 4004) and valid intents (4013; privileged ones the application
is not granted: 4014); nothing but heartbeats before IDENTIFY (4003); a second IDENTIFY (4005);
unknown opcodes (4001); undecodable frames (4002); a client that stops heartbeating (nothing for
1.5 heartbeat intervals, e.g. because its event loop is blocked) is closed with 4009. READY, then
GUILD_CREATE per guild. Every dispatch gets the session's next sequence number and is kept, so
RESUME (op 6) replays what the client missed (``s`` greater than the one it resumes from) before
RESUMED; a RESUME of an unknown or expired session, or from a sequence the session never reached,
gets INVALID_SESSION (op 9, ``d: false``). Transport compression is spoken as discord.py asks for it: ``zlib-stream``
(one zlib stream per connection, each frame ending in a sync flush), or ``zstd-stream`` (one zstd
frame stream, each message block-flushed) when a zstd library is importable, which is exactly
when discord.py asks for it.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import zlib
from typing import TYPE_CHECKING, Any

from aiohttp import WSMsgType, web

from tests.fakes.discord import payloads as P
from tests.fakes.discord.records import GatewayFrame

try:  # the same two sources discord.py looks for (discord/utils.py)
    import zstandard as _zstandard
except ImportError:
    _zstandard = None
try:
    from compression import zstd as _zstd  # type: ignore[import-not-found]
except ImportError:
    _zstd = None
ZSTD_AVAILABLE = _zstandard is not None or _zstd is not None

if TYPE_CHECKING:
    from tests.fakes.discord.server import FakeDiscord

JSONDict = dict[str, Any]

OP_DISPATCH, OP_HEARTBEAT, OP_IDENTIFY, OP_PRESENCE, OP_VOICE_STATE = 0, 1, 2, 3, 4
OP_RESUME, OP_RECONNECT, OP_REQUEST_MEMBERS, OP_INVALID_SESSION, OP_HELLO, OP_HEARTBEAT_ACK = 6, 7, 8, 9, 10, 11
_CLIENT_OPS = {OP_HEARTBEAT, OP_IDENTIFY, OP_PRESENCE, OP_VOICE_STATE, OP_RESUME, OP_REQUEST_MEMBERS}


class Session:
    def __init__(self, session_id: str, intents: int, shard: list[int] | None) -> None:
        self.id = session_id
        self.intents = intents
        self.shard = shard
        self.seq = 0
        self.events: list[JSONDict] = []  # every dispatch of the session, for RESUME replay
        self.connection: Connection | None = None
        self.valid = True


class Connection:
    def __init__(self, number: int, ws: web.WebSocketResponse, query: dict[str, str], path: str) -> None:
        self.number = number
        self.ws = ws
        self.path = path
        self.query = query  # v, encoding, compress as the client asked
        self.compress = query.get("compress")
        self.compressor: Any = None
        if self.compress == "zlib-stream":
            self.compressor = zlib.compressobj()
        elif self.compress == "zstd-stream":
            self.compressor = _zstandard.ZstdCompressor().compressobj() if _zstandard else _zstd.ZstdCompressor()
        self.send_lock = asyncio.Lock()
        self.session: Session | None = None
        self.last_heartbeat = 0.0  # loop time of the last heartbeat (or of HELLO)
        self.close_code: int | None = None  # the code the fake closed it with, if it did

    async def close(self, code: int, message: bytes) -> None:
        if self.close_code is None and not self.ws.closed:
            self.close_code = code
        await self.ws.close(code=code, message=message)

    def compressed(self, data: bytes) -> bytes:
        if self.compress == "zlib-stream":
            return self.compressor.compress(data) + self.compressor.flush(zlib.Z_SYNC_FLUSH)
        if _zstandard is not None:
            return self.compressor.compress(data) + self.compressor.flush(_zstandard.COMPRESSOBJ_FLUSH_BLOCK)
        return self.compressor.compress(data, mode=_zstd.ZstdCompressor.FLUSH_BLOCK)


class Gateway:
    """``FakeDiscord`` part: the Gateway WebSocket endpoint and its sessions."""

    def __init__(self, fake: FakeDiscord) -> None:
        self.fake = fake
        self.sessions: dict[str, Session] = {}
        self.connections: list[Connection] = []

    # --- sending -------------------------------------------------------------------------

    async def _send(self, conn: Connection, payload: JSONDict) -> None:
        self.fake._record(GatewayFrame("out", conn.number, payload))
        text = json.dumps(payload, separators=(",", ":"))
        if conn.ws.closed:
            return
        try:
            if conn.compressor is not None:
                await conn.ws.send_bytes(conn.compressed(text.encode()))
            else:
                await conn.ws.send_str(text)
        except (ConnectionError, RuntimeError):
            pass  # the client went away; a dispatch stays in the session for RESUME

    async def _send_op(self, conn: Connection, op: int, d: Any) -> None:
        async with conn.send_lock:
            await self._send(conn, {"op": op, "d": d, "s": None, "t": None})

    async def dispatch(self, session: Session, event: str, data: JSONDict) -> int:
        """Give ``event`` the session's next sequence number, keep it, send it if connected."""
        cond = self.fake._cond
        while True:
            with cond:
                conn = session.connection
                if conn is None:
                    return self._number(session, event, data)["s"]
            async with conn.send_lock:
                with cond:
                    if session.connection is not conn:
                        continue  # the session moved to another connection meanwhile
                    frame = self._number(session, event, data)
                await self._send(conn, frame)
                return frame["s"]

    def _number(self, session: Session, event: str, data: JSONDict) -> JSONDict:
        session.seq += 1
        frame = {"op": OP_DISPATCH, "d": data, "s": session.seq, "t": event}
        session.events.append(frame)
        return frame

    def live_sessions(self) -> list[Session]:
        with self.fake._cond:
            return [s for s in self.sessions.values() if s.valid]

    # --- the endpoint --------------------------------------------------------------------

    async def handle(self, request: web.Request) -> web.StreamResponse:
        query = request.query
        if query.get("v") != "10":
            raise web.HTTPBadRequest(text="unsupported gateway version")  # the fake speaks v10 only
        if query.get("encoding", "json") != "json":
            raise web.HTTPBadRequest(text="only encoding=json is supported by the fake")
        compress = query.get("compress")
        if compress not in (None, "zlib-stream") and not (compress == "zstd-stream" and ZSTD_AVAILABLE):
            raise web.HTTPBadRequest(text=f"compress={compress} is not supported by the fake")
        ws = web.WebSocketResponse(autoping=True, max_msg_size=0)
        await ws.prepare(request)
        with self.fake._cond:
            conn = Connection(len(self.connections) + 1, ws, dict(query), request.path)
            self.connections.append(conn)
        await self._send_op(conn, OP_HELLO, {"heartbeat_interval": self.fake.heartbeat_interval_ms})
        conn.last_heartbeat = asyncio.get_running_loop().time()
        watchdog = asyncio.create_task(self._watch_heartbeats(conn))
        try:
            async for msg in ws:
                if msg.type is not WSMsgType.TEXT:
                    if msg.type is WSMsgType.BINARY:
                        await conn.close(4002, b"Error while decoding payload.")
                    break
                try:
                    payload = json.loads(msg.data)
                    op = payload["op"]
                except (ValueError, KeyError, TypeError):
                    await conn.close(4002, b"Error while decoding payload.")
                    break
                self.fake._record(GatewayFrame("in", conn.number, payload))
                if not await self._received(conn, op, payload.get("d")):
                    break
        finally:
            watchdog.cancel()
            with self.fake._cond:
                if conn.session is not None and conn.session.connection is conn:
                    conn.session.connection = None
                self.fake._cond.notify_all()
            if not ws.closed:
                await ws.close()
        return ws

    async def _received(self, conn: Connection, op: int, d: Any) -> bool:
        """Handle one client frame; False when the connection was closed."""
        if op not in _CLIENT_OPS:
            await conn.close(4001, message=b"Unknown opcode.")
            return False
        if op == OP_HEARTBEAT:
            conn.last_heartbeat = asyncio.get_running_loop().time()
            await self._send_op(conn, OP_HEARTBEAT_ACK, None)
            return True
        if op == OP_IDENTIFY:
            return await self._identify(conn, d)
        if op == OP_RESUME:
            return await self._resume(conn, d)
        if conn.session is None:
            await conn.close(4003, message=b"Not authenticated.")
            return False
        if op == OP_REQUEST_MEMBERS:
            await self._members_chunk(conn.session, d)
        return True  # presence and voice state updates are only recorded

    async def _watch_heartbeats(self, conn: Connection) -> None:
        """Close a connection whose client went silent (the close code is the fake's choice)."""
        loop = asyncio.get_running_loop()
        allowed = self.fake.heartbeat_interval_ms / 1000 * 1.5
        while not conn.ws.closed:
            late = conn.last_heartbeat + allowed - loop.time()
            if late <= 0:
                await conn.close(4009, b"Session timed out.")
                return
            await asyncio.sleep(late)

    async def _identify(self, conn: Connection, d: Any) -> bool:
        fake = self.fake
        if conn.session is not None:
            await conn.close(4005, message=b"Already authenticated.")
            return False
        if not isinstance(d, dict) or not isinstance(d.get("properties"), dict) or "intents" not in d:
            await conn.close(4002, message=b"Error while decoding payload.")
            return False
        if d.get("token") != fake.token:
            await conn.close(4004, message=b"Authentication failed.")
            return False
        intents = d["intents"]
        if not isinstance(intents, int) or intents & ~P.VALID_INTENTS:
            await conn.close(4013, message=b"Invalid intent(s).")
            return False
        if intents & P.PRIVILEGED_INTENTS & ~fake.privileged_intents:
            await conn.close(4014, message=b"Disallowed intent(s).")
            return False
        session = Session(secrets.token_hex(16), intents, d.get("shard"))
        async with conn.send_lock:
            with fake._cond:
                fake.identifies += 1
                self.sessions[session.id] = session
                session.connection = conn
                conn.session = session
        ready: JSONDict = {
            "v": 10,
            "user": {**fake.bot_user, "verified": True, "mfa_enabled": False, "email": None},
            "guilds": [{"id": g["id"], "unavailable": True} for g in fake.guilds.values()],
            "session_id": session.id,
            "resume_gateway_url": f"{fake.ws_url}/resume-gateway",
            "application": {"id": fake.application_id, "flags": 1 << 19},
            "session_type": "normal",
            "private_channels": [],
            "relationships": [],
            "presences": [],
            "user_settings": {},
            "guild_join_requests": [],
            "geo_ordered_rtc_regions": ["rotterdam"],
            "auth": {},
            "_trace": ['["fake-discord-gateway",{"micros":0}]'],
        }
        if session.shard is not None:
            ready["shard"] = session.shard
        await self.dispatch(session, "READY", ready)
        if intents & P.INTENT_GUILDS:
            for guild_id in list(fake.guilds):
                await self.dispatch(session, "GUILD_CREATE", fake.guild_payload(guild_id))
        return True

    async def _resume(self, conn: Connection, d: Any) -> bool:
        fake = self.fake
        if conn.session is not None:
            await conn.close(4005, message=b"Already authenticated.")
            return False
        if not isinstance(d, dict):
            await conn.close(4002, message=b"Error while decoding payload.")
            return False
        if d.get("token") != fake.token:
            await conn.close(4004, message=b"Authentication failed.")
            return False
        with fake._cond:
            session = self.sessions.get(str(d.get("session_id")))
            seq = d.get("seq")
            ok = session is not None and session.valid and isinstance(seq, int) and 0 <= seq <= session.seq
        if not ok:
            await self._send_op(conn, OP_INVALID_SESSION, False)
            return True  # a real Gateway lets the client close; discord.py then IDENTIFYs again
        assert session is not None
        old = session.connection
        async with conn.send_lock:
            with fake._cond:
                fake.resumes += 1
                session.connection = conn
                conn.session = session
                missed = [frame for frame in session.events if frame["s"] > seq]
            for frame in missed:
                await self._send(conn, frame)
        if old is not None and not old.ws.closed:
            await old.close(4000, b"Session resumed elsewhere.")
        await self.dispatch(session, "RESUMED", {"_trace": ['["fake-discord-gateway",{"micros":0}]']})
        return True

    async def _members_chunk(self, session: Session, d: Any) -> None:
        guild_id = str((d or {}).get("guild_id"))
        members = self.fake.guild_members.get(guild_id, [])
        chunk = {"guild_id": guild_id, "members": members, "chunk_index": 0, "chunk_count": 1}
        if (d or {}).get("nonce"):
            chunk["nonce"] = d["nonce"]
        await self.dispatch(session, "GUILD_MEMBERS_CHUNK", chunk)

    # --- what tests trigger --------------------------------------------------------------

    async def force_reconnect(self) -> int:
        """Send RECONNECT (op 7) on every connected session; returns how many got it."""
        sent = 0
        for session in self.live_sessions():
            conn = session.connection
            if conn is not None:
                await self._send_op(conn, OP_RECONNECT, None)
                sent += 1
        return sent

    async def invalidate(self, resumable: bool) -> None:
        """Send INVALID_SESSION (op 9) to every connected session; not resumable ends the sessions."""
        for session in self.live_sessions():
            if not resumable:
                with self.fake._cond:
                    session.valid = False
            conn = session.connection
            if conn is not None:
                await self._send_op(conn, OP_INVALID_SESSION, resumable)

    async def drop_connections(self, code: int) -> None:
        """Close every connection from the server side with ``code`` (4000: the client resumes)."""
        for conn in list(self.connections):
            if not conn.ws.closed:
                await conn.close(code, message=b"Closed by the fake.")

    def expire_sessions(self) -> None:
        """Forget every session, as Discord does after a while: a later RESUME gets op 9."""
        with self.fake._cond:
            for session in self.sessions.values():
                session.valid = False
