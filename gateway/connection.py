"""One authenticated gateway client: what it watches and its bounded outgoing queue.

A client that cannot keep up is disconnected when its queue fills; nothing the daemon does
ever waits on a client's socket.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable

from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from . import protocol

log = logging.getLogger(__name__)


class Connection:
    """One authenticated client: what it subscribed to and its outgoing queue."""

    def __init__(self, ws: ServerConnection, queue_size: int, index: dict[str, set["Connection"]] | None = None) -> None:
        self.ws = ws
        self.queue: asyncio.Queue[str] = asyncio.Queue(maxsize=queue_size)
        self.sessions: set[str] = set()
        self.all_sessions = False
        self._index = index if index is not None else {}
        self.seq = 0
        self.wanted: frozenset[str] | None = None  # the event names asked for at connect (None: all)
        self.closed = False
        self.client: dict[str, Any] = {}
        # connect `resume`: session -> the number of the last reply seen (docs/protocol.md)
        self.resume: dict[str, int] = {}
        # Called when a session is first watched, to hand over the replies this client missed.
        self.on_subscribe: Callable[["Connection", str], None] | None = None
        # The number of a session's latest reply (chat.send reports it: a client resumes from there).
        self.chat_seq: Callable[[str], int] = lambda session: 0
        self._held: list[str] | None = None  # events kept back while a request runs (hold/release)
        self.on_close: list[Callable[[], None]] = []  # what this client started that ends with it (a pairing)

    def subscribe(self, session: str) -> None:
        """Receive this session's events from now on (and the replies it missed, see on_subscribe)."""
        if session not in self.sessions:
            self.sessions.add(session)
            self._index.setdefault(session, set()).add(self)
            if self.on_subscribe is not None:
                self.on_subscribe(self, session)

    def unsubscribe_all(self) -> None:
        for session in self.sessions:
            watchers = self._index.get(session)
            if watchers is not None:
                watchers.discard(self)
                if not watchers:
                    del self._index[session]

    def send(self, frame: str) -> None:
        if self.closed:
            return
        try:
            self.queue.put_nowait(frame)
        except asyncio.QueueFull:
            self.closed = True
            log.warning("gateway client %s is too slow (send queue full); disconnecting it", self.ws.remote_address)
            asyncio.ensure_future(self._drop())

    async def _drop(self) -> None:
        """Close with a reason if the client still reads; otherwise cut the connection."""
        try:
            await asyncio.wait_for(self.ws.close(1008, "client too slow: send queue overflowed"), 2.0)
        except (asyncio.TimeoutError, ConnectionClosed):
            pass
        finally:
            self.ws.transport.abort()

    def event(self, name: str, payload: dict[str, Any]) -> bool:
        """Queue an event; False when this client does not take it (filtered out, or gone)."""
        if self.closed or (self.wanted is not None and name not in self.wanted):
            return False
        self.seq += 1
        frame = protocol.event_frame(name, payload, self.seq)
        if self._held is not None and len(self._held) < self.queue.maxsize:
            self._held.append(frame)
        else:  # not holding, or more held than the queue could take: the queue decides (a full one drops the client)
            self.send(frame)
        return not self.closed

    def hold(self) -> None:
        """Keep events back while a request runs, so its response goes out before anything it caused
        (a run started by chat.send, its checkpoint). One request runs at a time per connection."""
        self._held = []

    def release(self) -> None:
        """Send the events kept back since `hold`, in order (after the request's response)."""
        held, self._held = self._held or [], None
        for frame in held:
            self.send(frame)

    async def write_loop(self) -> None:
        try:
            while True:
                frame = await self.queue.get()
                await self.ws.send(frame)
        except ConnectionClosed:
            self.closed = True
