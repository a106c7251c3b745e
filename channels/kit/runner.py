"""Running one channel so that nothing it does can stop the daemon or another channel.

The runner is what the dispatcher sees of a channel (channels/base.py `Channel`). `start` returns at
once; a supervisor task connects and receives, and its state is one of starting | running |
retrying (reason) | failed (reason) | standby (connection held by <node>) | stopped, shown by
`clawgate status`, `doctor`, `channels` and the web page. In a fleet a once-per-bot connection runs
only in the process holding its singleton lease; the others are on standby and forward their
sends to it (forward.py, docs/fleet.md). A platform that cannot be reached (ChannelUnavailable,
or any error from the adapter) is retried with exponential backoff; credentials it refuses (ChannelAuthError) fail
the channel with one line until a restart; an exception in the adapter never leaves this task.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Awaitable, Callable

from clawgate.agent.bus import OutboundMessage
from clawgate.channels.base import Channel, DeliveryError

from .adapter import ChannelAuthError, ChannelUnavailable, PlatformAdapter, Target
from .forward import Envelope, execute
from .kit import ChannelKit


class ChannelRunner(Channel):
    def __init__(self, adapter: PlatformAdapter, kit: ChannelKit, *, backoff_base: float = 1.0,
                 backoff_max: float = 60.0, connect_wait: float = 60.0, standby_poll: float = 1.0,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self.name = kit.name  # the account's channel name ("telegram.work"): one runner per account
        self.adapter = adapter
        self.kit = kit
        self.log: logging.Logger = kit.log
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.connect_wait = connect_wait
        self.standby_poll = standby_poll  # seconds between looks at who holds the connection (fleet)
        self._sleep = sleep
        self.state = "stopped"
        self.reason: str | None = None
        self.since = time.time()
        self.attempts = 0
        self._tasks: list[asyncio.Task[Any]] = []
        self._standby_task: asyncio.Task[None] | None = None
        self._unsubscribe: list[Callable[[], None]] = []

    # state -------------------------------------------------------------------------------------
    def _set(self, state: str, reason: str | None = None) -> None:
        if (state, reason) != (self.state, self.reason):
            self.state, self.reason, self.since = state, reason, time.time()

    @property
    def connected(self) -> bool:
        """Connected to the platform (sends go out now)."""
        return self.kit.connected.is_set()

    def status(self) -> dict[str, Any]:
        """For status / doctor / channels / the web page."""
        state, reason = self.state, self.reason
        if state == "running" and self.kit.problem:  # the adapter's library is retrying by itself
            state, reason = "retrying", self.kit.problem
        out: dict[str, Any] = {"name": self.name, "state": state, "since": round(self.since, 3)}
        if reason:
            out["reason"] = reason
        try:
            out.update(self.adapter.status())
        except Exception as exc:  # a status line must never break `status`
            out["statusError"] = str(exc)
        return out

    # lifecycle -------------------------------------------------------------------------------------
    async def start(self) -> None:
        """Begin connecting in the background; never raises."""
        self.kit.store.prune()
        events = self.kit.services.events
        self._unsubscribe = [events.subscribe(self.kit.progress.on_event), events.subscribe(self.kit.prompts.on_event)]
        self._set("starting")
        self._tasks = [asyncio.create_task(self._supervise(), name=f"channel:{self.name}"),
                       asyncio.create_task(self.kit.tell_paired(), name=f"channel:{self.name}:pairing")]

    async def _supervise(self) -> None:
        """Alone: connect and receive, retrying. A once-per-bot connection in a fleet: the same, under the
        channel's singleton lease (kit.exclusive); meanwhile this process is on standby and forwards its
        platform calls to the holder (forward.py)."""
        if self.kit.forward is None or not self.adapter.exclusive_connection:
            await self._receive()
            return
        if self._standby_task is None:  # kept until close(): replies drained after stop() still go out
            self._standby_task = asyncio.create_task(self._standby(), name=f"channel:{self.name}:standby")
        await self.kit.exclusive(self.kit.singleton, self._hold)

    async def _hold(self) -> None:
        """This process holds the connection: receive here until the lease is lost or the channel stops."""
        self.kit.holding = True
        self.kit.connected.clear()  # a holder is connected only once its own connect succeeded
        self._set("starting")
        try:
            await self._receive()
        finally:
            self.kit.holding = False
            self.kit.connected.clear()
            try:
                await self.adapter.disconnect()  # the lease moves on: this process's connection must go
            except Exception as exc:
                self.log.warning("closing channel %s after losing its connection lease failed: %s", self.name, exc)

    async def _standby(self) -> None:
        """While another process holds the connection: say who, and let sends go out (through it) while
        there is one."""
        forward = self.kit.forward
        assert forward is not None
        while True:
            if not self.kit.holding:
                try:
                    holder = await forward.holder(self.kit.singleton)
                except Exception as exc:  # Redis away: the fleet retries; say so
                    holder, why = None, f"cannot see who holds the connection ({type(exc).__name__})"
                else:
                    why = "waiting for a process of the fleet to take the connection"
                if self.kit.holding:
                    pass  # took it meanwhile: the holder's own state counts
                elif holder:
                    self.kit.connected.set()
                    if self._tasks:  # not stopped: a stopped channel stays "stopped" while its last replies go
                        self._set("standby", f"connection held by {holder}")
                else:
                    self.kit.connected.clear()
                    if self._tasks:
                        self._set("starting", why)
            await self._sleep(self.standby_poll)

    async def _receive(self) -> None:
        delay = self.backoff_base
        while True:
            self.attempts += 1
            reason = await self._connect_and_run()
            if reason is None:
                return  # failed for good (logged)
            self.kit.connected.clear()
            if self.attempts == 1 or self.state != "retrying":
                self.log.warning("channel %s: %s; retrying in %.0fs", self.name, reason, delay)
            else:
                self.log.info("channel %s still unavailable (%s); next try in %.0fs", self.name, reason, delay)
            self._set("retrying", reason)
            await self._sleep(delay)
            delay = min(delay * 2, self.backoff_max)

    async def _connect_and_run(self) -> str | None:
        """One connection's life: the reason it ended (to retry), or None when the channel failed for good."""
        try:
            await self.adapter.connect()
        except ChannelAuthError as exc:
            return self._fail(str(exc))
        except ChannelUnavailable as exc:
            return str(exc) or "the platform is unreachable"
        except Exception as exc:  # a bug in the adapter: retried, never the daemon's problem
            self.log.exception("channel %s failed to connect", self.name)
            return f"{type(exc).__name__}: {exc}"
        self.kit.connected.set()
        self.kit.report_problem(None)
        self._set("running")
        serving = None
        if self.kit.holding and self.kit.forward is not None:  # the others' platform calls run here now
            serving = asyncio.create_task(self.kit.forward.serve(self.kit.singleton, self._execute),
                                          name=f"channel:{self.name}:calls")
        try:
            if self.adapter.capabilities.native_commands:
                try:
                    await self.adapter.register_commands(self.kit.command_names())
                except Exception as exc:
                    self.log.warning("channel %s could not register its commands: %s", self.name, exc)
            try:
                await self.adapter.run()
            except ChannelAuthError as exc:
                return self._fail(str(exc))
            except ChannelUnavailable as exc:
                return str(exc) or "the connection was lost"
            except Exception as exc:
                self.log.exception("channel %s stopped receiving", self.name)
                return f"{type(exc).__name__}: {exc}"
            return self._fail("stopped receiving (see the line above)")
        finally:
            if serving is not None:
                serving.cancel()
                await asyncio.gather(serving, return_exceptions=True)

    async def _execute(self, op: str, args: dict[str, Any]) -> Envelope:
        """A platform call another process of the fleet forwarded: run on this connected adapter."""
        return await execute(self.adapter, op, args, self.log)

    def _fail(self, reason: str) -> None:
        self.log.error("channel %s failed: %s", self.name, reason)
        self._set("failed", reason)
        return None

    async def stop(self) -> None:
        """Stop taking input. Sending still works (close() releases the platform client); in a fleet the
        connection's lease is handed on here, and the last replies go out through the next holder."""
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe = []
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.kit.progress.close()
        await self.kit.prompts.close()
        if self.state != "failed":
            self._set("stopped")

    async def close(self) -> None:
        await self.stop()
        standby, self._standby_task = self._standby_task, None
        if standby is not None:
            standby.cancel()
            await asyncio.gather(standby, return_exceptions=True)
        await self.kit.close()
        try:
            await self.adapter.disconnect()
        except Exception as exc:  # the process is ending; a failing close must not hide why
            self.log.warning("closing channel %s failed: %s", self.name, exc)

    # outbound ----------------------------------------------------------------------------------------
    async def send(self, msg: OutboundMessage) -> None:
        """Deliver one reply (DeliveryError when it cannot be now; the dispatcher retries or reports it)."""
        if not self.kit.connected.is_set():  # e.g. replies replayed at start while the platform is unreachable
            if self.state == "failed":
                raise DeliveryError(f"the {self.name} channel failed: {self.reason}", retry_after=60.0)
            try:
                await asyncio.wait_for(self.kit.connected.wait(), timeout=self.connect_wait)
            except asyncio.TimeoutError:
                raise DeliveryError(f"the {self.name} channel cannot reach its platform yet", retry_after=30.0) from None
        await self.kit.delivery.send(msg, self.target(msg))

    def target(self, msg: OutboundMessage) -> Target:
        """Where a reply goes: its chat, the thread it was asked in, and the message it answers (a reply:
        the question; a "Stopped.": the /stop command, which on Discord is the interaction it answers)."""
        meta = msg.metadata
        where = self.kit.locate(msg.session_key or "")
        thread = meta.get("thread_id") or (where[1] if where and where[0] == msg.chat_id else None)
        reply_to = meta.get("command_message") or (meta.get("message_id") if msg.kind == "reply" else None)
        return Target(chat_id=str(msg.chat_id), thread_id=None if thread is None else str(thread),
                      reply_to=None if reply_to is None else str(reply_to))


__all__ = ["ChannelRunner"]
