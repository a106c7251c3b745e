"""Reach the fleet's Redis at start, or say in one line why not; check that it keeps what it is told.

The URL is shown with its password masked. Persistence: the fleet's queues, leases and claims
live in Redis, so Redis must write them to its append-only file (`appendonly yes`); with it off
a Redis restart loses accepted messages, and the process refuses to start (docs/fleet.md).
"""

from __future__ import annotations

import logging
from urllib.parse import urlsplit, urlunsplit

import redis
import redis.asyncio as aioredis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

from .errors import FleetUnavailable

log = logging.getLogger("clawgate.fleet")
CONNECT_TIMEOUT = 5.0
# Commands retried across a Redis restart: 0.05 s doubling to 2 s, about 30 s in all.
RETRIES = 18


def mask_url(url: str) -> str:
    """redis://user:secret@host:6379/0 -> redis://user:***@host:6379/0 (never a password in a log line)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparsable URL>"
    if parts.password is None and "@" not in parts.netloc:
        return url
    user = parts.username or ""
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit((parts.scheme, f"{user}:***@{host}", parts.path, parts.query, parts.fragment))


def _retry() -> Retry:
    """OSError too: a refused connect (Redis restarting) is one, and is retried like a dropped one."""
    return Retry(ExponentialBackoff(cap=2.0, base=0.05), RETRIES,
                 supported_errors=(redis.ConnectionError, redis.TimeoutError, OSError))


def sync_client(url: str) -> "redis.Redis":
    """For the bus's synchronous writes (the MessageBus interface is synchronous, like SQLite's commit)."""
    return redis.Redis.from_url(url, socket_connect_timeout=CONNECT_TIMEOUT, retry=_retry(),
                                retry_on_error=[redis.ConnectionError, redis.TimeoutError], decode_responses=True)


def async_client(url: str) -> "aioredis.Redis":
    """For blocking reads, lease renewal and everything awaited."""
    return aioredis.Redis.from_url(url, socket_connect_timeout=CONNECT_TIMEOUT, retry=_retry(),
                                   retry_on_error=[redis.ConnectionError, redis.TimeoutError],
                                   decode_responses=True, health_check_interval=10)


def check(url: str) -> "redis.Redis":
    """Connect once (no retries: a wrong URL fails now, in one line) and check persistence."""
    masked = mask_url(url)
    try:
        probe = redis.Redis.from_url(url, socket_connect_timeout=CONNECT_TIMEOUT, socket_timeout=CONNECT_TIMEOUT,
                                     decode_responses=True)
    except ValueError as exc:
        raise FleetUnavailable(f"fleet.redis_url {masked} is not a Redis URL ({exc}); use redis://[:password@]host:port/db "
                               "(CLAWGATE_FLEET__REDIS_URL)") from None
    try:
        probe.ping()
    except redis.AuthenticationError as exc:
        raise FleetUnavailable(f"Redis at {masked} refused the password ({exc}); fix fleet.redis_url "
                               "(CLAWGATE_FLEET__REDIS_URL)") from None
    except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
        raise FleetUnavailable(f"cannot reach Redis at {masked} ({_reason(exc)}); start redis-server or fix "
                               "fleet.redis_url (CLAWGATE_FLEET__REDIS_URL)") from None
    try:
        aof = probe.config_get("appendonly").get("appendonly")
    except redis.ResponseError as exc:  # CONFIG renamed or disabled (managed Redis): say so, trust the operator
        log.warning("cannot read Redis's persistence setting at %s (%s); make sure it runs with appendonly yes", masked, exc)
        aof = "yes"
    if aof != "yes":
        raise FleetUnavailable(f"Redis at {masked} runs without its append-only file (appendonly {aof}): a Redis restart "
                               "would lose accepted messages; set `appendonly yes` in redis.conf (or CONFIG SET "
                               "appendonly yes) and start again")
    return probe


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:200]
