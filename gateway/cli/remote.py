"""Reach the running gateway, or, when none runs, do the same thing on the files.

One decision for every command that can work either way (tasks, cron, pairing), so none of
them edits state behind a daemon that would later overwrite it or never see it:
- a gateway answers            -> through its method; the daemon applies the change itself;
- nothing listens and no daemon holds the instance lock
                               -> offline, *holding* the lock, so no daemon starts mid-edit;
- a daemon holds the lock but does not answer (starting, or another port)
                               -> wait briefly for it, then one line naming its pid (exit 4);
- wrong token, a foreign server on the port, a dropped connection -> one line (exit 4).
Commands that need the daemon (status, chat) use the same path without the offline branch.
"""

from __future__ import annotations

import asyncio
import errno
import json
import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Awaitable, Callable, NamedTuple, TypeVar

from clawgate.config.loader import load
from clawgate.config.paths import Paths
from clawgate.config.schema import Settings
from clawgate.config.token import gateway_token

from ..client import GatewayClient, GatewayError, gateway_url
from ..instance import CLI, AlreadyRunning, InstanceLock
from .errors import EXIT_FAILED, EXIT_NO_DAEMON, EXIT_UNREACHABLE, EXIT_USAGE, CliError

if TYPE_CHECKING:
    from ..offline import Offline

T = TypeVar("T")
HELLO_SECONDS = 10.0      # connect + the gateway's hello; a foreign server that never answers ends here
STARTING_SECONDS = 3.0    # how long a daemon that holds the lock may take to start listening
LOCK_WAIT_SECONDS = 10.0  # how long an offline edit waits for another offline edit to finish
RETRY_SECONDS = 0.2


@dataclass(frozen=True)
class Target:
    """The configured home and gateway, loaded once per command."""

    paths: Paths
    settings: Settings
    url: str
    token: str | None

    @property
    def port(self) -> int:
        return self.settings.gateway.port


class Reply(NamedTuple):
    payload: dict[str, Any]
    live: bool  # True: a running daemon did it (or, for shared stores, one is running)


class _NothingListening(Exception):
    """Connection refused: no process listens on the gateway's port."""


def target() -> Target:
    paths, settings = load()  # ConfigError: printed by main as one line, exit 2
    return Target(paths, settings, gateway_url(settings), gateway_token(paths, settings))


def with_gateway(work: Callable[[GatewayClient], Awaitable[T]], *, subscribe: list[str] | str | None = None) -> T:
    """Run `work` on a connected client; no daemon is exit 3, one that cannot be talked to exit 4."""
    result, _ = _reach(target(), work, subscribe=subscribe, offline=None)
    return result


def gateway_or_offline(method: str | None, params: dict[str, Any],
                       offline: Callable[["Offline"], dict[str, Any]]) -> Reply:
    """`method` through the running gateway, else `offline(parts)` under the instance lock, on the
    daemon's stores as gateway/offline.py opens them.

    method=None: there is no gateway method, because the store is shared with a running daemon
    by design (SQLite in WAL mode, which the daemon re-reads); `offline` then runs either way,
    under the lock when no daemon holds it.
    """
    t = target()
    if method is None:
        lock = InstanceLock(t.paths)
        try:
            lock.acquire(CLI, wait=LOCK_WAIT_SECONDS)
        except AlreadyRunning as exc:
            if not exc.holder.is_gateway:
                raise _busy(exc) from None
            return Reply(_offline(offline, t), True)
        with lock:
            return Reply(_offline(offline, t), False)

    async def call(client: GatewayClient) -> dict[str, Any]:
        return await client.request(method, params)

    payload, live = _reach(t, call, subscribe=None, offline=offline)
    return Reply(payload, live)


def _offline(offline: Callable[["Offline"], T], t: Target) -> T:
    """A state database that is corrupt, locked or unreadable is one line here, as in the daemon;
    whatever the command opened is closed when it is done."""
    from clawgate.agent.core.statedb import StateUnavailable

    from ..offline import Offline

    try:
        with Offline(t.paths, t.settings) as parts:
            return offline(parts)
    except StateUnavailable as exc:
        raise CliError(str(exc), EXIT_FAILED) from None


def _reach(t: Target, work: Callable[[GatewayClient], Awaitable[Any]], *, subscribe: list[str] | str | None,
           offline: Callable[["Offline"], Any] | None) -> tuple[Any, bool]:
    deadline: float | None = None
    while True:
        try:
            return _talk(t, work, subscribe), True
        except _NothingListening:
            pass
        lock = InstanceLock(t.paths)
        if offline is not None:
            try:
                lock.acquire(CLI, wait=LOCK_WAIT_SECONDS)
            except AlreadyRunning as exc:
                if not exc.holder.is_gateway:
                    raise _busy(exc) from None
                holder = exc.holder
            else:
                with lock:
                    return _offline(offline, t), False
        else:
            found = lock.holder()
            if found is None or not found.is_gateway:
                raise CliError(f"no gateway is running at {t.url}; start it with `clawgate gateway` (or `make run`)",
                               EXIT_NO_DAEMON)
            holder = found
        # A daemon holds the lock but does not listen: starting up, or on another port.
        deadline = deadline if deadline is not None else time.monotonic() + STARTING_SECONDS
        if time.monotonic() >= deadline:
            raise CliError(f"the gateway (pid {holder.pid}) is running but not answering at {t.url}; if it is just "
                           f"starting, try again; otherwise make gateway.port (CLAWGATE_GATEWAY__PORT) match the "
                           f"port it serves on, so it sees the change", EXIT_UNREACHABLE)
        time.sleep(RETRY_SECONDS)


def _busy(exc: AlreadyRunning) -> CliError:
    return CliError(f"{exc.holder.describe()} has held {exc.lock_file} for {LOCK_WAIT_SECONDS:g} s; "
                    "try again when it has finished", EXIT_FAILED)


def _talk(t: Target, work: Callable[[GatewayClient], Awaitable[T]], subscribe: list[str] | str | None) -> T:
    async def session() -> T:
        client = GatewayClient(t.url, t.token, subscribe=subscribe)
        try:
            await asyncio.wait_for(client.__aenter__(), HELLO_SECONDS)
            server = client.hello.get("server")
            if not isinstance(server, dict) or server.get("name") != "clawgate":
                raise CliError(_foreign(t, "its hello is not a clawgate gateway's"), EXIT_UNREACHABLE)
            return await work(client)
        finally:
            await client.__aexit__(None, None, None)

    try:
        return asyncio.run(session())
    except (CliError, BrokenPipeError):  # BrokenPipeError: our stdout, handled by main
        raise
    except Exception as exc:
        translated = _translate(t, exc)
        if translated is None:
            raise
        raise translated from None


def _translate(t: Target, exc: Exception) -> Exception | None:
    """Every way talking to the gateway fails, as one line; None for our own bugs (a traceback)."""
    from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus, WebSocketException

    if _refused(exc):
        return _NothingListening()
    if isinstance(exc, GatewayError):
        if exc.code == "closed":
            return CliError(f"the gateway at {t.url} closed the connection before answering; try again", EXIT_UNREACHABLE)
        if exc.code == "invalid_params":
            return CliError(exc.message, EXIT_USAGE)
        return CliError(exc.message or exc.code, EXIT_FAILED)
    if isinstance(exc, ConnectionClosed):
        reason = exc.rcvd.reason if exc.rcvd is not None else ""
        if reason.startswith("unauthorized"):
            return CliError(f"the gateway at {t.url} refused the token: use gateway.token from {t.paths.config_file} "
                            f"(or CLAWGATE_GATEWAY__TOKEN), the one the daemon runs with", EXIT_UNREACHABLE)
        return CliError(f"the gateway at {t.url} closed the connection ({reason or 'no reason given'}); try again, "
                        "and see the gateway's log if it keeps happening", EXIT_UNREACHABLE)
    if isinstance(exc, InvalidStatus) and exc.response.status_code == 503:
        # our own gateway at its cap of connections that have not authenticated yet
        reason = exc.response.body.decode("utf-8", "replace") if exc.response.body else "busy"
        return CliError(f"the gateway at {t.url} refused the connection: {' '.join(reason.split())[:200]}",
                        EXIT_UNREACHABLE)
    if isinstance(exc, InvalidHandshake):
        return CliError(_foreign(t, _first_line(exc)), EXIT_UNREACHABLE)
    if isinstance(exc, WebSocketException):
        return CliError(f"talking to the gateway at {t.url} failed: {_first_line(exc)}", EXIT_UNREACHABLE)
    if isinstance(exc, TimeoutError):
        return CliError(_foreign(t, "it did not answer the WebSocket handshake in time"), EXIT_UNREACHABLE)
    if isinstance(exc, json.JSONDecodeError):
        return CliError(_foreign(t, "it does not speak the clawgate protocol"), EXIT_UNREACHABLE)
    if isinstance(exc, OSError):
        return CliError(f"cannot reach the gateway at {t.url}: {exc.strerror or _first_line(exc)}", EXIT_UNREACHABLE)
    return None


def _foreign(t: Target, why: str) -> str:
    return (f"{t.url} is not a clawgate gateway ({why}); another program uses port {t.port}: "
            "stop it, or set gateway.port (CLAWGATE_GATEWAY__PORT) to the gateway's port")


def _refused(exc: BaseException) -> bool:
    if isinstance(exc, ConnectionRefusedError) or getattr(exc, "errno", None) == errno.ECONNREFUSED:
        return True
    # several addresses (127.0.0.1 and ::1 for "localhost") all refused: one OSError listing them all
    codes = re.findall(r"\[Errno (\d+)\]", str(exc)) if isinstance(exc, OSError) else []
    return bool(codes) and all(int(c) == errno.ECONNREFUSED for c in codes)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]
