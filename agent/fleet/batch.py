"""The bus's script calls, gathered: calls made while one round trip is in flight go together in the next.

A synchronous call blocks the whole event loop for a round trip to Redis (every other session
waits, and on a busy machine the wait is a scheduling delay, not the wire). Here a caller awaits
its own result while the loop keeps running, and the calls queued meanwhile leave as one pipeline
(group commit, as SqliteBus's fsync): fewer system calls and context switches per message.

What a caller does with its result (the bus's bookkeeping after an answer) runs when the result
arrives, even if the caller was cancelled meanwhile (a run stopped while its reply was being queued).

Order is kept: calls are sent in the order they were made, in one connection's pipeline, so two
writes of one session land in the order its lane made them. Each call is still its own atomic Lua
script (the fencing check included); batching changes when it is sent, never what it checks.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
from typing import Any, Callable

import redis
import redis.asyncio as aioredis
from redis.exceptions import NoScriptError

MAX_BATCH = 500  # calls per pipeline: a bound on one reply's size, not a throttle
RETRY_FOR = 30.0  # seconds a batch is retried across a lost connection (a Redis restart), as connect.py's clients
Then = Callable[[Any], Any]
Call = tuple[str, list[str], list[Any], "asyncio.Future[Any]", "Then | None"]


@functools.lru_cache(maxsize=32)
def sha1(body: str) -> str:
    """The name Redis knows a script by (computed once per script, not per call)."""
    return hashlib.sha1(body.encode()).hexdigest()


class Batcher:
    def __init__(self, r: "aioredis.Redis") -> None:
        self.r = r
        self._bodies: dict[str, str] = {}  # sha -> script, to load again after a Redis restart (NOSCRIPT)
        self._queue: list[Call] = []
        self._wake: asyncio.Event | None = None
        self._task: "asyncio.Task[None] | None" = None
        self._unanswered = 0  # calls queued or in flight
        self._idle: asyncio.Event | None = None
        self.round_trips = 0  # pipelines sent (status: how well calls are gathered)

    def _push(self, body: str, keys: list[str], args: list[Any], future: "asyncio.Future[Any]",
              then: Then | None) -> None:
        sha = sha1(body)
        self._bodies.setdefault(sha, body)
        self._queue.append((sha, keys, args, future, then))
        self._unanswered += 1
        if self._wake is None or self._idle is None:
            self._wake, self._idle = asyncio.Event(), asyncio.Event()
        self._idle.clear()
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name="fleet-writes")
        self._wake.set()

    async def call(self, body: str, keys: list[str], args: list[Any], then: Then | None = None) -> Any:
        """Run the script `body` in the next batch; its result (passed through `then`, which runs
        whether or not this caller is still waiting), or the Redis error it raised."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._push(body, keys, args, future, then)
        return await future

    async def flush(self) -> None:
        """Until everything queued so far has been sent and answered (a clean stop, before leases go)."""
        if self._idle is not None and self._unanswered:
            await self._idle.wait()

    async def _run(self) -> None:
        assert self._wake is not None and self._idle is not None
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._queue:
                batch, self._queue = self._queue[:MAX_BATCH], self._queue[MAX_BATCH:]
                await self._send(batch)
                self._unanswered -= len(batch)
            if not self._unanswered:
                self._idle.set()

    async def _send(self, batch: list[Call]) -> None:
        try:
            results = await self._execute(batch)
            missing = [i for i, result in enumerate(results) if isinstance(result, NoScriptError)]
            if missing:  # Redis restarted (scripts are not persisted): load them again, re-run those, in order
                for body in self._bodies.values():
                    await self.r.script_load(body)
                again = await self._execute([batch[i] for i in missing])
                for i, result in zip(missing, again):
                    results[i] = result
        except Exception as exc:  # Redis unreachable past the retries, or anything else: every caller learns it
            results = [exc] * len(batch)  # (never left waiting: a run awaiting its attempt count would hang)
        for (_, _, _, future, then), result in zip(batch, results):
            if then is not None and not isinstance(result, Exception):
                try:
                    result = then(result)
                except Exception as exc:  # a bug in the bookkeeping: its caller gets it, the batch goes on
                    result = exc
            if not future.done():  # its caller may have been cancelled meanwhile
                if isinstance(result, Exception):
                    future.set_exception(result)
                else:
                    future.set_result(result)

    async def _execute(self, batch: list[Call]) -> list[Any]:
        """One pipeline, sent again with backoff while Redis is unreachable (redis-py retries a pipeline
        only within one connection). A batch cut mid-way may run its scripts twice, as the synchronous
        client's retries may: an answer or an ack finds itself done and changes nothing; an intake is
        then reported a duplicate though it was accepted (it is answered once all the same), and an
        attempt may be counted twice."""
        delay, waited = 0.05, 0.0
        while True:
            self.round_trips += 1
            try:
                async with self.r.pipeline(transaction=False) as pipe:
                    for sha, keys, args, _, _ in batch:
                        pipe.evalsha(sha, len(keys), *keys, *args)
                    return list(await pipe.execute(raise_on_error=False))
            except (redis.ConnectionError, redis.TimeoutError, OSError):
                if waited >= RETRY_FOR:
                    raise
                await asyncio.sleep(delay)
                waited += delay
                delay = min(2.0, delay * 2)
