"""What crosses between the fleet's processes besides the bus: run events, gateway chat replies,
and control (stop a run, answer an approval) for a run on another worker.

Redis pub/sub on one channel, `<prefix>:relay`: fire and forget, like the WebSocket events it feeds.
Nothing here needs to survive a crash: events are live views, a gateway reply is kept numbered in
the shared database for clients that `resume`, and a control message that finds nobody had nothing
to act on. A process ignores its own messages (it has already acted on them locally), recognised by
their first bytes, before any decoding.

What is queued while one publish is on its way leaves as one message (a batch): every process
receives each message, so one chat message's five relayed items (its delta, the run's events, the
reply) cost each other process one receive and one decode per batch, not five.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, Callable

import redis
import redis.asyncio as aioredis

from clawgate.agent.core.errors import WriteRefused

log = logging.getLogger("clawgate.fleet")
BATCH = 256
QUEUE_LIMIT = 50_000  # messages waiting to go out; past it, run events are dropped (views, never replies)


class Relay:
    def __init__(self, r: "aioredis.Redis", channel: str, node: str) -> None:
        self.r, self.channel, self.node = r, channel, node
        self._out: asyncio.Queue[str] = asyncio.Queue()  # each item JSON, encoded when it was put (a snapshot)
        # what this process's own messages start with ({"n": <node>, ...}: json.dumps keeps the order)
        self._mine = json.dumps({"n": node}, ensure_ascii=False)[:-1] + ","
        self.on_event: Callable[[dict[str, Any]], None] = lambda event: None
        self.on_chat: Callable[[str, dict[str, Any]], None] = lambda target, payload: None
        self.on_control: Callable[[dict[str, Any]], None] = lambda control: None
        self.dropped = 0

    # sending -------------------------------------------------------------------------------
    def event(self, event: dict[str, Any]) -> None:
        """EventHub subscriber: this worker's run events, for clients connected to other processes."""
        self._put({"k": "event", "e": event})

    def chat(self, target: str, payload: dict[str, Any]) -> None:
        self._put({"k": "chat", "t": target, "p": payload})

    def control(self, **fields: Any) -> None:
        self._put({"k": "control", **fields})

    def _put(self, message: dict[str, Any]) -> None:
        if self._out.qsize() >= QUEUE_LIMIT and message["k"] == "event":  # views only: replies and control always go
            self.dropped += 1
            return
        self._out.put_nowait(json.dumps(message, default=str, ensure_ascii=False))

    async def send_loop(self) -> None:
        while True:
            batch = [await self._out.get()]
            while not self._out.empty() and len(batch) < BATCH:
                batch.append(self._out.get_nowait())
            data = f'{self._mine}"k": "batch", "m": [{",".join(batch)}]}}'
            try:
                await self.r.publish(self.channel, data)
            except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
                self.dropped += len(batch)
                log.debug("fleet: relay publish failed (%s); %d message(s) dropped", exc, len(batch))
                await asyncio.sleep(0.5)

    # receiving -----------------------------------------------------------------------------
    async def receive_loop(self) -> None:
        delay = 0.05
        while True:
            pubsub = self.r.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(self.channel)
                delay = 0.05
                async for message in pubsub.listen():
                    if message.get("type") == "message":
                        self._dispatch(message["data"])
            except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
                log.debug("fleet: relay subscription lost (%s); resubscribing", exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
            finally:
                try:
                    await pubsub.aclose()
                except (redis.ConnectionError, redis.TimeoutError, OSError):
                    pass  # the connection is already broken; nothing to close cleanly

    def _dispatch(self, data: str) -> None:
        if data.startswith(self._mine):
            return
        try:
            message = json.loads(data)
        except json.JSONDecodeError:
            return
        if message.get("n") == self.node:
            return
        for item in message.get("m") or [] if message.get("k") == "batch" else [message]:
            self._one(item)

    def _one(self, message: dict[str, Any]) -> None:
        kind = message.get("k")
        try:
            if kind == "event":
                self.on_event(message["e"])
            elif kind == "chat":
                self.on_chat(message["t"], message["p"])
            elif kind == "control":
                self.on_control(message)
        except WriteRefused as exc:  # the session moved on while the message travelled: its holder has it
            log.warning("fleet: relayed %s not applied here: %s", kind, exc)
        except Exception:
            log.exception("fleet: relayed %s failed", kind)
