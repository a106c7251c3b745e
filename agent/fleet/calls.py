"""Platform calls forwarded to the process holding a chat channel's connection (docs/fleet.md).

A once-per-bot connection (a Discord Gateway session, a Slack socket, a Matrix device) runs in the
process holding its singleton lease `s:<name>`. A turn runs wherever its partition is held, so its
sends (a reply chunk, a file, typing, a status edit, an approval prompt) may start on a process
without the connection: they come here, are queued in Redis for the holder, run there on its
connected adapter, and the answer comes back. The channel kit defines what a call is and checks
it on the holder (channels/kit/forward.py); this module only carries JSON and never runs anything
but the function the kit gave `serve`.

Per call, with id `c`:
- the caller LPUSHes the request on `<prefix>:calls:<name>` (a list: one holder pops each request,
  FIFO) and waits for the answer, which the holder pushes on the caller's own list
  `<prefix>:answers:<node>` (one reader per process hands each answer to its call);
- the holder BRPOPs it and, before running it, claims it: `SET <prefix>:call:<c> run|<node> NX`.
  A caller that waited `wait` seconds without an answer claims it the same way as `gave-up`; one
  of the two wins, so a call runs at most once. Caller won: nothing ran; the call fails as a
  temporary DeliveryError and the kit's delivery tries again (through whichever process holds the
  connection by then). Holder won: it is running; the caller keeps waiting while that holder
  still holds the lease. If the holder dies meanwhile, the call may or may not have reached the
  platform: it counts as sent (Unconfirmed), the kit's rule against duplicates.
- A request waiting in the list survives a holder's death: the next holder runs it (a new holder
  takes over within the lease TTL, well inside `wait`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from typing import Any, Awaitable, Callable

import redis
import redis.asyncio as aioredis

from .keys import Keys

log = logging.getLogger("clawgate.fleet")
Envelope = dict[str, Any]
KEEP = 600  # seconds a claim and an answer are kept (far past any caller's wait)
RUN_LIMIT = 300.0  # a running call unanswered this long counts as sent
POP_SECONDS = 1  # the holder's blocking pop, so a cancelled serve loop ends promptly
FINISH_SECONDS = 5.0  # calls under way when serving stops get this long to finish
MAX_RUNNING = 64  # calls run at once on a holder (sends to one platform; the rest wait in the list)
REDIS_ERRORS = (redis.ConnectionError, redis.TimeoutError, OSError)


class Calls:
    """The fleet's side of the kit's Forwarder (channels/kit/forward.py): call, serve, holder."""

    def __init__(self, r: "aioredis.Redis", keys: Keys, node: str, ttl: float, *, wait: float | None = None) -> None:
        self.r, self.keys, self.node, self.ttl = r, keys, node, ttl
        self.wait = wait if wait is not None else 2 * ttl + 10  # a holder's death and its successor's connect
        self.served = 0
        self.forwarded = 0
        self._waiting: dict[str, asyncio.Future[Envelope]] = {}  # call id -> its caller, in this process
        self._reader: asyncio.Task[None] | None = None

    def _queue(self, name: str) -> str:
        return f"{self.keys.prefix}:calls:{name}"

    def _claim(self, call_id: str) -> str:
        return f"{self.keys.prefix}:call:{call_id}"

    def _answers(self, node: str) -> str:
        """The list a node's callers get their answers on (one reader per process, not one wait per call)."""
        return f"{self.keys.prefix}:answers:{node}"

    async def holder(self, name: str) -> str | None:
        value = await self.r.get(self.keys.lease(f"s:{name}"))
        return value.split("|")[0] if value else None

    # the caller ------------------------------------------------------------------------------
    async def call(self, name: str, op: str, args: dict[str, Any]) -> Envelope:
        call_id = uuid.uuid4().hex
        request = json.dumps({"id": call_id, "op": op, "args": args, "from": self.node}, ensure_ascii=False)
        self.forwarded += 1
        if self._reader is None or self._reader.done():
            self._reader = asyncio.create_task(self._read_answers(), name="fleet-call-answers")
        self._waiting[call_id] = asyncio.get_running_loop().create_future()
        try:
            await self.r.lpush(self._queue(name), request)
            answer = await self._wait_answer(call_id, self.wait)
            if answer is not None:
                return answer
            if await self.r.set(self._claim(call_id), "gave-up", nx=True, ex=KEEP):
                await self.r.lrem(self._queue(name), 1, request)  # tidy: nobody will run it now
                return {"error": "delivery", "permanent": False, "retry_after": None,
                        "message": f"{op}: no process holding the {name} connection took it within {self.wait:.0f}s"}
            return await self._follow(name, op, call_id)
        except REDIS_ERRORS as exc:  # (the client already retried for about 30 s)
            await self._give_up_quietly(call_id)
            return {"error": "delivery", "permanent": False, "retry_after": None,
                    "message": f"{op}: Redis unreachable while forwarding to the {name} connection "
                               f"({type(exc).__name__})"}
        finally:
            self._waiting.pop(call_id, None)

    async def _give_up_quietly(self, call_id: str) -> None:
        """Before the kit retries: make sure a holder that pops this call later does not run it too. Redis
        still away: nothing to do (the claim cannot be written; the holder's claim then decides)."""
        try:
            await self.r.set(self._claim(call_id), "gave-up", nx=True, ex=KEEP)
        except REDIS_ERRORS:
            return

    async def _wait_answer(self, call_id: str, seconds: float) -> Envelope | None:
        try:
            return await asyncio.wait_for(asyncio.shield(self._waiting[call_id]), seconds)
        except asyncio.TimeoutError:
            return None

    async def _read_answers(self) -> None:
        """This process's answers, handed to the calls waiting for them (one that gave up is gone: dropped).
        Ends once no call waits, so nothing of it outlives the last call."""
        while True:
            try:
                got = await self.r.brpop([self._answers(self.node)], timeout=POP_SECONDS)
            except REDIS_ERRORS as exc:
                log.debug("fleet: cannot read call answers (%s)", exc)
                await asyncio.sleep(0.5)
                continue
            if got is None:
                if not self._waiting:
                    return  # idle: the next call starts a reader again
                continue
            try:
                answer = json.loads(got[1])
                waiting = self._waiting.get(str(answer.pop("call")))
            except (ValueError, KeyError, TypeError, AttributeError):
                log.warning("fleet: dropped a malformed call answer")
                continue
            if waiting is not None and not waiting.done():
                waiting.set_result(answer)

    async def _follow(self, name: str, op: str, call_id: str) -> Envelope:
        """The holder started the call: wait for its answer while it still holds the connection."""
        runner = str(await self.r.get(self._claim(call_id)) or "").removeprefix("run|")
        deadline = time.monotonic() + RUN_LIMIT
        while time.monotonic() < deadline:
            answer = await self._wait_answer(call_id, max(1.0, self.ttl / 3))
            if answer is not None:
                return answer
            if await self.holder(name) != runner:
                break
        return {"error": "unconfirmed", "message": f"{op} was running on {runner or 'another process'}, which stopped "
                                                   f"holding the {name} connection before it answered"}

    # the holder ------------------------------------------------------------------------------
    async def serve(self, name: str, execute: Callable[[str, dict[str, Any]], Awaitable[Envelope]]) -> None:
        """Run forwarded calls until cancelled (the runner cancels it when the connection or the lease goes)."""
        running: set[asyncio.Task[None]] = set()
        slots = asyncio.Semaphore(MAX_RUNNING)
        log.info("fleet: serving the platform calls of %s here", name)
        try:
            while True:
                await slots.acquire()
                try:
                    got = await self.r.brpop([self._queue(name)], timeout=POP_SECONDS)
                except REDIS_ERRORS as exc:
                    slots.release()
                    log.debug("fleet: cannot read the calls of %s (%s)", name, exc)
                    await asyncio.sleep(0.5)
                    continue
                if got is None:
                    slots.release()
                    continue
                task = asyncio.create_task(self._run(got[1], execute), name=f"fleet-call:{name}")
                running.add(task)
                task.add_done_callback(running.discard)
                task.add_done_callback(lambda _: slots.release())
        finally:  # the connection is going: calls under way get a moment to finish, then their callers
            if running:  # see Unconfirmed (a call already started is never run twice)
                await asyncio.wait(set(running), timeout=FINISH_SECONDS)
            for task in running:
                task.cancel()
            await asyncio.gather(*running, return_exceptions=True)

    async def _run(self, raw: str, execute: Callable[[str, dict[str, Any]], Awaitable[Envelope]]) -> None:
        try:
            request = json.loads(raw)
            call_id, op, args, caller = str(request["id"]), str(request["op"]), request["args"], str(request["from"])
        except (ValueError, KeyError, TypeError):
            log.warning("fleet: dropped a malformed forwarded call")
            return
        try:
            if not await self.r.set(self._claim(call_id), f"run|{self.node}", nx=True, ex=KEEP):
                return  # its caller gave up waiting: it retries on its own
            answer = await execute(op, args)
            self.served += 1
            async with self.r.pipeline(transaction=True) as pipe:
                pipe.lpush(self._answers(caller), json.dumps({**answer, "call": call_id}, ensure_ascii=False,
                                                             default=str))
                pipe.expire(self._answers(caller), KEEP)  # a caller that died leaves nothing behind for long
                await pipe.execute()
        except REDIS_ERRORS as exc:
            log.warning("fleet: could not answer forwarded call %s (%s); its caller counts it as sent", call_id, exc)


__all__ = ["Calls"]
