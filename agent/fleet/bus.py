"""The MessageBus on Redis Streams: what SqliteBus does for one process, for a fleet.

Inbound: a message goes to the stream of its session's partition (`in:<n>`, one of P), once per
id (the message hash `msg:<id>` is the idempotency key, kept `state.keep_days` after the answer).
Each partition is read through the consumer group "workers" by the one worker holding its lease
(leases.py), so a session's messages are taken in order by one worker. The entry stays pending
until the reply is queued: the reply's XADD, the "answered" mark and the XACK are one Lua script
that first checks the worker's fencing token. A new holder XAUTOCLAIMs the partition's pending
entries (a dead worker's unfinished work) before it reads new ones.

Outbound: the reply goes to the stream of the same partition (`out:<n>`, group "delivery"), so the
partition's holder delivers a session's replies in order; the entry is acked once the channel's
send returned (mark_delivered) or failed for good.

The message path's writes (intake, the attempt count, the answer) go through the asyncio client,
gathered into one pipeline per round trip (batch.py): a caller awaits its own result while the
event loop serves every other session. The interface's synchronous methods (the delivery ack, and
everything off the message path: triggers, recovery, tools) use a synchronous client, one round
trip each.
Both retry with backoff across a Redis restart. Reads block and run on the asyncio client.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import Counter
from typing import Any, Callable, Iterator

import redis
import redis.asyncio as aioredis

from clawgate.agent.bus import InboundMessage, MessageBus, OutboundMessage
from clawgate.agent.core.durability import Durability
from clawgate.agent.core.errors import WriteRefused

from . import scripts
from .batch import Batcher
from .keys import IN_GROUP, OUT_GROUP, Keys, partition_lease, partition_of
from .leases import Lease

log = logging.getLogger("clawgate.fleet")
READ_COUNT = 100
BLOCK_MS = 500
MAX_QUEUED = 2000  # messages read ahead locally; reading pauses above it


class Fenced(WriteRefused):
    """A write for a partition this worker no longer holds (its lease ran out or moved)."""


class RedisBus(MessageBus):
    def __init__(self, sync: "redis.Redis", r: "aioredis.Redis", keys: Keys, partitions: int, node: str, *,
                 keep_days: float, lease_of: Callable[[int], Lease | None], reading: Callable[[], list[int]]) -> None:
        self.sync, self.r, self.keys, self.count, self.node = sync, r, keys, partitions, node
        self.keep_seconds = max(60, int(keep_days * 86400))
        self.lease_of, self.reading = lease_of, reading
        # each queued copy carries the fencing token it was read under: a copy from before the
        # partition was lost (and taken again) is dropped, so the re-claimed order is the one that runs
        self._in_q: asyncio.Queue[tuple[InboundMessage, int]] = asyncio.Queue()
        self._out_q: asyncio.Queue[tuple[OutboundMessage, int]] = asyncio.Queue()
        self._taken: dict[str, tuple[int, str, int]] = {}   # inbound id -> (partition, entry id, token)
        self._sessions: dict[str, str] = {}                 # inbound id -> session key
        self._out_taken: dict[str, tuple[int, str, int]] = {}
        self._reads: dict[str, set[int]] = {}  # partitions in a read (or claim) now in flight, per group
        self._sending: set[str] = set()  # replies handed to their channel: acked once sent, whatever the lease
        self._inflight: Counter[int] = Counter()
        self._claim_in: set[int] = set()
        self._claim_out: set[int] = set()
        self._publish_in = sync.register_script(scripts.PUBLISH_IN)
        self._publish_out = sync.register_script(scripts.PUBLISH_OUT)
        self._finish_out = sync.register_script(scripts.FINISH_OUT)
        self._begin = sync.register_script(scripts.BEGIN_ATTEMPT)
        self.batch = Batcher(r)
        # set by the node: a lease found run out here is given up at once (its work is claimed again
        # by whoever takes the partition next, this worker included), never renewed as if nothing happened
        self.expired: Callable[[int], None] = lambda n: None
        self.refused = 0  # fenced writes refused (status, tests)
        self.sweep_seconds = 10.0  # how often (and past what idle time) orphaned pending entries are claimed
        self.answered = 0  # messages this worker answered (status: how the work is spread)
        # the process's group commit (session logs, task state, SQLite files on the shared volume): flushed
        # before a platform hears a message was accepted or a reply goes out, as with the embedded bus
        self.local_durability: Durability | None = None

    async def durable(self) -> None:
        """Redis keeps what was published (AOF); the local writes it rests on are flushed here."""
        if self.local_durability is not None:
            await self.local_durability.sync()

    def partition(self, session_key: str) -> int:
        return partition_of(session_key, self.count)

    # partitions coming and going (leases.py) -----------------------------------------------
    def gained(self, n: int, lease: Lease) -> None:
        self._claim_in.add(n)
        self._claim_out.add(n)

    def lost(self, n: int) -> list[str]:
        """Forget partition n's local work; returns the sessions whose runs must stop."""
        self._claim_in.discard(n)
        self._claim_out.discard(n)
        sessions = []
        for inbound_id, (p, _, _) in list(self._taken.items()):
            if p == n:
                del self._taken[inbound_id]
                sessions.append(self._sessions.pop(inbound_id, ""))
        for out_id, (p, _, _) in list(self._out_taken.items()):
            if p == n and out_id not in self._sending:  # one being sent now is still acked once sent
                del self._out_taken[out_id]
        self._inflight.pop(n, None)
        return sorted(set(filter(None, sessions)))

    def busy(self, n: int) -> bool:
        """Work of partition n in hand here, or a read that may still return some: not to be given away
        (a read answered after the release would leave its entries pending under this worker)."""
        return (self._inflight.get(n, 0) > 0 or any(n in parts for parts in self._reads.values())
                or any(p == n for p, _, _ in self._out_taken.values()))

    def stale(self, inbound_id: str) -> bool:
        """Taken under a lease this worker no longer holds (the run must not start)."""
        taken = self._taken.get(inbound_id)
        if taken is None:
            return True
        lease = self.lease_of(taken[0])
        return lease is None or lease.token != taken[2]

    # intake ------------------------------------------------------------------------------
    def publish_inbound(self, msg: InboundMessage) -> bool:
        return bool(self._publish_in(*self._inbound_call(msg)))

    async def publish_inbound_async(self, msg: InboundMessage) -> bool:
        return bool(await self.batch.call(scripts.PUBLISH_IN, *self._inbound_call(msg)))

    def _inbound_call(self, msg: InboundMessage) -> tuple[list[str], list[Any]]:
        n = self.partition(msg.session_key)
        return ([self.keys.message(msg.id), self.keys.inbound(n), self.keys.open_set(msg.session_key), self.keys.inbox_open],
                [msg.id, msg.session_key, json.dumps(msg.to_dict()), time.time()])

    async def next_inbound(self) -> InboundMessage:
        while True:
            msg, token = await self._in_q.get()
            taken = self._taken.get(msg.id)
            if taken is not None and taken[2] == token:
                return msg

    def begin_attempt(self, inbound_id: str, progress: int) -> int:
        return int(self._begin(keys=[self.keys.message(inbound_id)], args=[progress]))

    async def begin_attempt_async(self, inbound_id: str, progress: int) -> int:
        return int(await self.batch.call(scripts.BEGIN_ATTEMPT, [self.keys.message(inbound_id)], [progress]))

    def settle(self, inbound_id: str) -> None:
        self._answer(None, inbound_id)

    def is_unanswered(self, inbound_id: str) -> bool:
        return self.sync.hget(self.keys.message(inbound_id), "s") == "accepted"

    def has_unanswered(self, session_key: str) -> bool:
        return bool(self.sync.scard(self.keys.open_set(session_key)))

    # delivery ----------------------------------------------------------------------------
    def publish_outbound(self, msg: OutboundMessage, *, answers: str | None = None) -> bool:
        return self._answer(msg, answers)

    async def publish_outbound_async(self, msg: OutboundMessage, *, answers: str | None = None) -> bool:
        call = self._answer_call(msg, answers)
        if call is None:
            return False
        keys, args, done = call
        return bool(await self.batch.call(scripts.PUBLISH_OUT, keys, args, then=lambda result: done(int(result))))

    def _answer(self, msg: OutboundMessage | None, answers: str | None) -> bool:
        """The synchronous path (settle, tools, triggers): one round trip, blocking."""
        call = self._answer_call(msg, answers)
        if call is None:
            return False
        keys, args, done = call
        return done(int(self._publish_out(keys=keys, args=args)))

    def _answer_call(self, msg: OutboundMessage | None, answers: str | None
                     ) -> tuple[list[str], list[Any], Callable[[int], bool]] | None:
        """Queue `msg` and/or mark `answers` answered, fenced by the lease it was taken under: the local
        checks now (None: refused here), the script's keys and arguments, and what to do with its result."""
        taken = self._taken.get(answers) if answers else None
        if answers and taken is None:
            self.refused += 1
            log.warning("fleet: answer to %s refused: this worker no longer holds its partition (the lease moved; the "
                        "new holder answers it)", answers)
            return None
        if taken is not None:
            n, entry, token = taken
            expected = f"{self.node}|{token}"
            lease = self.lease_of(n)
            if lease is None or lease.token != token:  # past the local deadline: refused before Redis is asked
                self.refused += 1
                self.expired(n)
                log.warning("fleet: write for partition %d refused: its lease (fencing token %d) ran out here before "
                            "it was renewed; %s not queued (the next holder answers)", n, token,
                            f"reply {msg.id}" if msg else f"answered mark of {answers}")
                return None
        else:
            assert msg is not None
            n = self.partition(msg.session_key or f"{msg.channel}:{msg.chat_id}")
            lease = self.lease_of(n)
            entry, expected = "", lease.value(self.node) if lease is not None else ""
        session = self._sessions.get(answers or "", "")
        keys = [self.keys.lease(partition_lease(n)), self.keys.reply(msg.id if msg else "-"), self.keys.outbound(n),
                self.keys.message(answers or "-"), self.keys.inbound(n), self.keys.open_set(session),
                self.keys.inbox_open, self.keys.outbox_pending]
        args: list[Any] = [expected, msg.id if msg else "", json.dumps(msg.to_dict()) if msg else "", answers or "",
                           entry, self.keys_ttl]

        def done(result: int) -> bool:
            duplicate = result == -2
            if duplicate:
                log.warning("fleet: %s was answered already; this second answer is dropped", answers)
                result = 0
            elif result < 0:
                self.refused += 1
                log.warning("fleet: write for partition %d refused: fencing token %s is stale (another worker holds "
                            "the lease now); %s not queued", n, expected.rsplit("|", 1)[-1],
                            f"reply {msg.id}" if msg else f"answered mark of {answers}")
                return False
            # the same take still in hand (not lost, and not taken again under a new lease meanwhile)
            if taken is not None and answers is not None and self._taken.get(answers) is taken:
                self.answered += 0 if duplicate else 1
                self._taken.pop(answers, None)
                self._sessions.pop(answers, None)
                self._inflight[n] -= 1
                if self._inflight[n] <= 0:
                    self._inflight.pop(n, None)
            return bool(result)

        return keys, args, done

    @property
    def keys_ttl(self) -> int:
        return self.keep_seconds

    async def next_outbound(self) -> OutboundMessage:
        while True:
            msg, token = await self._out_q.get()
            taken = self._out_taken.get(msg.id)
            if taken is not None and taken[2] == token:
                return msg

    def deliverable(self, outbound_id: str) -> bool:
        """Right before each send attempt (retries included): this worker still holds the reply's
        partition under the lease it read it with; else the new holder delivers it, in order."""
        taken = self._out_taken.get(outbound_id)
        lease = self.lease_of(taken[0]) if taken is not None else None
        if taken is None or lease is None or lease.token != taken[2]:
            self._sending.discard(outbound_id)
            self._out_taken.pop(outbound_id, None)
            return False
        self._sending.add(outbound_id)
        return True

    def mark_delivered(self, outbound_id: str) -> None:
        self._finish(outbound_id, "delivered", "")

    def mark_failed(self, outbound_id: str, error: str) -> None:
        self._finish(outbound_id, "failed", error[:500])

    def _finish(self, outbound_id: str, status: str, error: str) -> None:
        """Not fenced: a reply that went out is acked whoever holds the partition now. Synchronous on
        purpose, the moment the send returned: a crash between the platform's answer and this ack has
        the next holder send the reply again, and this keeps that window as short as it can be."""
        self._sending.discard(outbound_id)
        n, entry, _ = self._out_taken.pop(outbound_id, (0, "", 0))
        self._finish_out(keys=[self.keys.reply(outbound_id), self.keys.outbound(n), self.keys.outbox_pending],
                         args=[status, error, entry, self.keep_seconds])

    def delivery_status(self, outbound_id: str) -> str | None:
        return self.sync.hget(self.keys.reply(outbound_id), "s")

    # reading the partitions ------------------------------------------------------------------
    async def read_inbound(self) -> None:
        await self._read(IN_GROUP, self.keys.inbound, self._claim_in, self._accept_in, self._in_q)

    async def read_outbound(self) -> None:
        await self._read(OUT_GROUP, self.keys.outbound, self._claim_out, self._accept_out, self._out_q)

    async def _read(self, group: str, stream: Callable[[int], str], to_claim: set[int],
                    accept: Callable[[int, str, dict[str, str]], None], queue: "asyncio.Queue[Any]") -> None:
        failures = 0
        swept = time.monotonic()
        while True:
            try:
                parts = self.reading()
                self._reads[group] = set(parts)
                for n in sorted(to_claim & set(parts)):
                    await self._claim(group, stream(n), n, accept)
                    to_claim.discard(n)
                if time.monotonic() - swept > self.sweep_seconds:
                    # entries read by a worker just as it handed the partition over (its read raced the
                    # release): pending under it, idle, unseen by the new holder's first claim
                    swept = time.monotonic()
                    for n in parts:
                        await self._claim(group, stream(n), n, accept, min_idle_ms=int(self.sweep_seconds * 1000))
                if not parts or queue.qsize() > MAX_QUEUED:
                    await asyncio.sleep(0.05)
                    continue
                answer = await self.r.xreadgroup(group, self.node, {stream(n): ">" for n in parts},
                                                 count=READ_COUNT, block=BLOCK_MS)
                failures = 0
            except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
                failures += 1
                (log.warning if failures == 1 else log.debug)("fleet: reading %s failed (%s); retrying", group, exc)
                await asyncio.sleep(min(2.0, 0.05 * 2 ** failures))
                continue
            except Exception:  # a bug here must not stop this worker reading its partitions for good
                log.exception("fleet: reading %s failed; retrying", group)
                await asyncio.sleep(1.0)
                continue
            for name, entries in answer or []:
                n = int(name.rsplit(":", 1)[1])
                for entry, fields in entries:
                    if fields:
                        accept(n, entry, fields)
            self._reads[group] = set()

    async def _claim(self, group: str, stream: str, n: int, accept: Callable[[int, str, dict[str, str]], None],
                     min_idle_ms: int = 0) -> None:
        """A new holder takes over what the previous one read and did not finish, oldest first
        (its own unfinished entries too: `accept` skips what is already in work here)."""
        cursor, claimed = "0-0", 0
        while True:
            result = await self.r.xautoclaim(stream, group, self.node, min_idle_ms, cursor, count=500)
            cursor, entries = result[0], result[1]
            for entry, fields in entries:
                if fields:
                    accept(n, entry, fields)
                    claimed += 1
            if cursor == "0-0":
                break
        if claimed and not min_idle_ms:
            log.info("fleet: partition %d: took over %d unfinished %s entr%s", n, claimed, group,
                     "y" if claimed == 1 else "ies")

    def _accept_in(self, n: int, entry: str, fields: dict[str, str]) -> None:
        lease = self.lease_of(n)
        if lease is None:
            return
        msg = InboundMessage.from_dict(json.loads(fields["body"]))
        if msg.id in self._taken:
            return  # still running here (claimed again after a hand-back): one run is enough
        self._taken[msg.id] = (n, entry, lease.token)
        self._sessions[msg.id] = msg.session_key
        self._inflight[n] += 1
        self._in_q.put_nowait((msg, lease.token))

    def _accept_out(self, n: int, entry: str, fields: dict[str, str]) -> None:
        lease = self.lease_of(n)
        if lease is None:
            return
        msg = OutboundMessage.from_dict(json.loads(fields["body"]))
        known = self._out_taken.get(msg.id)
        if known is not None and known[2] == lease.token:
            return  # already here under this lease (a sweep found it idle in the queue)
        self._out_taken[msg.id] = (n, entry, lease.token)
        if msg.id not in self._sending:  # else being sent here now, under the new lease
            self._out_q.put_nowait((msg, lease.token))

    # recovery and upkeep -----------------------------------------------------------------
    def replay_pending(self) -> tuple[int, int]:
        """Nothing to replay by hand: a partition's holder claims its pending entries (see _claim)."""
        return 0, 0

    def unanswered(self) -> Iterator[InboundMessage]:
        for n in range(self.count):
            for _, fields in self.sync.xrange(self.keys.inbound(n)):
                yield InboundMessage.from_dict(json.loads(fields["body"]))

    def undelivered(self) -> Iterator[OutboundMessage]:
        for n in range(self.count):
            for _, fields in self.sync.xrange(self.keys.outbound(n)):
                yield OutboundMessage.from_dict(json.loads(fields["body"]))

    def prune(self, keep_days: float) -> int:
        """Answered and delivered entries are deleted from their streams at once, and their hashes
        expire by themselves after keep_days: nothing to prune."""
        return 0

    def counts(self) -> dict[str, int]:
        inbox, outbox = self.sync.mget([self.keys.inbox_open, self.keys.outbox_pending])
        return {"inboxOpen": int(inbox or 0), "outboxPending": int(outbox or 0)}

    def lag(self) -> dict[int, int]:
        """Entries waiting per partition stream (unread plus being worked on)."""
        pipe = self.sync.pipeline(transaction=False)
        for n in range(self.count):
            pipe.xlen(self.keys.inbound(n))
        return {n: int(length) for n, length in enumerate(pipe.execute()) if length}

    def close(self) -> None:
        self.sync.close()
