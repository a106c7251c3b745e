"""A real redis-server for the fleet tests, and a fleet of real daemons sharing one home.

redis-server is the Debian package (`make test` installs it, like chromium and bubblewrap); when
it is missing the fleet tests fail with one line naming the package. It runs on a free loopback
port in a temp folder with its append-only file on (`appendfsync everysec`: what docs/fleet.md
asks of a deployment that accepts losing the last second on a power cut of the Redis host).
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import redis

from tests import lifeline
from tests.harness import DaemonProcess, free_port
from tests.waiting import wait_until

LEASE_SECONDS = 5.0  # short, so failover in the tests takes seconds (docs/fleet.md: the default is 15)
PARTITIONS = 16


class RedisServer:
    def __init__(self, folder: Path, *, appendonly: bool = True) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.fail("redis-server is not installed: apt-get install redis-server (make test installs it as root)",
                        pytrace=False)
        self.binary, self.folder, self.appendonly = binary, folder, appendonly
        folder.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> "RedisServer":
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.folder),
             "--appendonly", "yes" if self.appendonly else "no", "--appendfsync", "everysec", "--save", "",
             "--protected-mode", "yes", "--logfile", str(self.folder / "redis.log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        lifeline.hold(self.proc)  # dies with pytest, even a SIGKILLed one
        wait_until(self._ready, f"redis-server on port {self.port} answering PING", timeout=30)
        return self

    def _ready(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError("redis-server exited: " + (self.folder / "redis.log").read_text()[-2000:])
        try:
            return bool(self.client().ping())
        except redis.ConnectionError:
            return False

    def client(self) -> "redis.Redis":
        return redis.Redis.from_url(self.url, decode_responses=True, socket_timeout=10)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def restart(self) -> None:
        self.kill()
        self.start()


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory):
    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    yield server
    server.kill()


class Fleet:
    """N daemons on one home (the shared volume) and one Redis, each with its own port and name."""

    def __init__(self, home: Path, redis_url: str, anthropic_url: str, env: dict[str, str]) -> None:
        self.home, self.redis_url, self.anthropic_url = home, redis_url, anthropic_url
        self.prefix = "t" + uuid.uuid4().hex[:8]  # one fleet per test on the shared server
        self.env = {"CLAWGATE_FLEET__REDIS_URL": redis_url, "CLAWGATE_FLEET__PREFIX": self.prefix,
                    "CLAWGATE_FLEET__LEASE_SECONDS": str(LEASE_SECONDS),
                    "CLAWGATE_FLEET__PARTITIONS": str(PARTITIONS), **env}
        self.procs: list[DaemonProcess] = []

    def add(self, *, start: bool = True, env: dict[str, str] | None = None) -> DaemonProcess:
        name = f"w{len(self.procs)}"
        proc = DaemonProcess(self.home, anthropic_url=self.anthropic_url,
                             env={**self.env, "CLAWGATE_FLEET__NODE": name, **(env or {})})
        proc.node = name  # type: ignore[attr-defined]
        if not self.procs:
            proc.init()
        self.procs.append(proc)
        return proc.start() if start else proc

    def by_node(self, node: str) -> DaemonProcess:
        return next(p for p in self.procs if p.node == node)  # type: ignore[attr-defined]

    def holder(self, r: "redis.Redis", partition: int) -> str | None:
        value = r.get(f"{self.prefix}:lease:p{partition}")
        return value.split("|")[0] if value else None

    def holders(self, r: "redis.Redis") -> dict[int, str]:
        return {n: h for n in range(PARTITIONS) if (h := self.holder(r, n))}

    def spread(self, nodes: int) -> "redis.Redis":
        """Wait until every partition is held, by `nodes` workers each holding its share (each takes up to
        ceil(PARTITIONS / nodes), the last one what the others leave); a client of the fleet's Redis. A worker
        that started first holds nearly all partitions until the others have taken theirs, and a test that
        looks for a chat on a given worker must not meet that moment."""
        r = redis.Redis.from_url(self.redis_url, decode_responses=True)

        def balanced() -> bool:
            counts = Counter(self.holders(r).values())
            least = PARTITIONS - math.ceil(PARTITIONS / nodes) * (nodes - 1)
            return counts.total() == PARTITIONS and len(counts) == nodes and min(counts.values()) >= least

        wait_until(balanced, f"all partitions held by {nodes} workers, each its share", describe=self.logs)
        return r

    def state(self) -> str:
        """The fleet's queues as Redis has them: per partition its holder, backlog and pending entries."""
        r = redis.Redis.from_url(self.redis_url, decode_responses=True)
        lines = []
        for n in range(PARTITIONS):
            pending_in = r.xpending(f"{self.prefix}:in:{n}", "workers")
            pending_out = r.xpending(f"{self.prefix}:out:{n}", "delivery")
            lines.append(f"p{n} lease={r.get(f'{self.prefix}:lease:p{n}')} in={r.xlen(f'{self.prefix}:in:{n}')} "
                         f"pending_in={pending_in['pending']} {pending_in.get('consumers')} "
                         f"out={r.xlen(f'{self.prefix}:out:{n}')} pending_out={pending_out['pending']}")
        return "\n".join(lines)

    def logs(self) -> str:
        return "\n\n".join(f"--- {p.node} ---\n" + "\n".join(p.output[-60:]) for p in self.procs)  # type: ignore[attr-defined]

    def kill_all(self) -> None:
        for proc in self.procs:
            proc.kill()


@pytest.fixture
def fleet_factory(tmp_path: Path, redis_server: RedisServer, fake_model):
    made: list[Fleet] = []

    def make(env: dict[str, str] | None = None, *, redis_url: str | None = None) -> Fleet:
        fleet = Fleet(tmp_path / "home", redis_url or redis_server.url, fake_model.base_url, env or {})
        made.append(fleet)
        return fleet

    yield make
    for fleet in made:
        fleet.kill_all()


def telegram_env(fake: Any, **settings: Any) -> dict[str, str]:
    values: dict[str, Any] = {"base_url": fake.base_url, "poll_timeout_seconds": 1, "dm_policy": "open",
                              "retry_base_seconds": 0.05, **settings}
    env = {"TELEGRAM_BOT_TOKEN": fake.token}
    for key, value in values.items():
        env[f"CLAWGATE_CHANNELS__TELEGRAM__{key.upper()}"] = value if isinstance(value, str) else json.dumps(value)
    return env
