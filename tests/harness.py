"""Run the real `clawgate gateway` process for end-to-end tests, and kill or restart it."""

from __future__ import annotations

import atexit
import os
import random
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from contextlib import asynccontextmanager
from pathlib import Path
from typing import AsyncIterator

from clawgate.gateway.client import GatewayClient
from tests import lifeline
from tests.zygote import ForkedDaemon, outside_environment, run_cli, start_daemon

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "test-gateway-token-0123456789"
# exec allowlists only read-only tools by default; tests whose scripted jobs run `python3 -c …`
# opt in to it explicitly, as a user would in config.
ALLOW_PYTHON = {"CLAWGATE_TOOLS__EXEC__ALLOWLIST": '["python3", "ls", "cat", "echo", "true"]'}
# `python3` for exec is this interpreter's folder (a venv's bin), not a version manager's shim
# (~/.pyenv/shims), which runs code from a folder exec's sandbox does not grant.
REAL_PYTHON_PATH = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', os.defpath)}"


# Ports handed to servers the tests start later (a daemon, a fake platform). Not from the kernel's ephemeral
# range (net.ipv4.ip_local_port_range, 32768-60999 by default): a port found free there can be taken as the
# source port of some outgoing connection before its server binds it ("port is in use by another program").
# Picked at random below it, never one this process handed out lately: several processes pick at once (xdist
# workers, fleets, helper scripts), and random picks from 22,000 ports rarely meet where cursors walking a
# range in step would meet again and again.
_PORTS = range(10_000, 32_768)
_handed: deque[int] = deque(maxlen=512)


def free_port() -> int:
    for _ in range(1000):
        port = random.choice(_PORTS)
        if port in _handed:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed.append(port)
        return port
    raise RuntimeError(f"no free loopback port in {_PORTS.start}-{_PORTS.stop - 1}")


_initialised: list[Path] = []  # the home `clawgate init --yes` wrote for this session, once made


def _copy_initialised_home(home: Path) -> None:
    """Copy the session's initialised home to `home` (modes kept), with a token of its own."""
    if not _initialised:
        root = Path(tempfile.mkdtemp(prefix="clawgate-init-"))
        atexit.register(shutil.rmtree, root, True)
        env = {**outside_environment(),
               "CLAWGATE_HOME": str(root / "home")}
        subprocess.run([sys.executable, "-m", "clawgate.gateway.cli", "init", "--yes"], env=env, cwd=ROOT,
                       check=True, capture_output=True, text=True)
        _initialised.append(root / "home")
    source = _initialised[0]
    shutil.copytree(source, home, symlinks=True)
    config = home / "config.toml"
    written = re.search(r'^token = "([^"]+)"', config.read_text(), re.MULTILINE)
    assert written is not None, "`clawgate init` wrote no gateway token line"
    config.write_text(config.read_text().replace(written.group(1), secrets.token_urlsafe(24)))


class DaemonProcess:
    """One daemon under test: a temp CLAWGATE_HOME, a fixed port kept across restarts."""

    def __init__(self, home: Path, *, anthropic_url: str | None, env: dict[str, str] | None = None,
                 token: str | None = TOKEN) -> None:
        """token=None: no gateway.token in the environment or config.toml (the daemon generates one)."""
        self.home = home
        self.token = token
        self.port = free_port()
        self.env = {
            **outside_environment(),
            "CLAWGATE_HOME": str(home),
            "CLAWGATE_GATEWAY__PORT": str(self.port),
            **({"CLAWGATE_GATEWAY__TOKEN": token} if token is not None else {}),
            "CLAWGATE_PROVIDERS__ANTHROPIC__RETRY_BASE_SECONDS": "0.01",
            "CLAWGATE_LOG__LEVEL": "info",
            # Tests script every model call in order; drift control and the completeness check add
            # calls of their own, so they are off unless a test turns them on (tests/e2e/test_drift_e2e.py).
            "CLAWGATE_DRIFT__ENABLED": "false",
            "CLAWGATE_REFLECTION__ENABLED": "false",
            "PYTHONUNBUFFERED": "1",
            "PATH": REAL_PYTHON_PATH,
        }
        if anthropic_url:
            self.env.update(ANTHROPIC_API_KEY="test-key", ANTHROPIC_BASE_URL=anthropic_url)
        self.env.update(env or {})
        self.proc: subprocess.Popen[str] | ForkedDaemon | None = None
        self.output: list[str] = []
        self._reader: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    @property
    def workspace(self) -> Path:
        return self.home / "workspace"

    def guest_workspace(self, user: str) -> Path:
        """The own workspace of the guest `user` ("telegram:555"): what that guest's runs see."""
        from clawgate.workspace.users import folder_name

        return self.home / "workspaces" / folder_name(user)

    def init(self) -> None:
        """What `clawgate init --yes` writes. A fresh home gets a copy of the one home the real command
        wrote this session (a new token written in): the same files and modes, without a Python start per
        daemon. A home that exists, or a workspace set elsewhere, runs the command itself."""
        if not self.home.exists() and "CLAWGATE_AGENT__WORKSPACE" not in self.env:
            _copy_initialised_home(self.home)
        else:
            subprocess.run([sys.executable, "-m", "clawgate.gateway.cli", "init", "--yes"], env=self.env, cwd=ROOT,
                           check=True, capture_output=True, text=True)
        if self.token is None:  # drop the token `init` wrote
            config = self.home / "config.toml"
            lines = config.read_text().splitlines(keepends=True)
            config.write_text("".join(line for line in lines if not line.startswith("token = ")))

    @property
    def client_token(self) -> str:
        """The token clients must send: the configured one, or the one the daemon generated."""
        return self.token if self.token is not None else (self.home / "state/gateway.token").read_text().strip()

    def start(self, timeout: float = 60.0, *, args: tuple[str, ...] = ()) -> "DaemonProcess":
        # forked from this worker's zygote where that is the same (tests/zygote.py), else exec'd
        self.proc = start_daemon(["gateway", *args], self.env, ROOT)
        lifeline.hold(self.proc)  # dies with pytest, even a SIGKILLed one
        ready = threading.Event()
        proc = self.proc

        def read() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                self.output.append(line.rstrip("\n"))
                if "gateway ready" in line:
                    ready.set()

        self._reader = threading.Thread(target=read, daemon=True)
        self._reader.start()
        deadline = time.monotonic() + timeout
        while not ready.wait(0.05):
            if proc.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise AssertionError("daemon did not become ready:\n" + "\n".join(self.output[-40:]))
        return self

    def kill(self) -> None:
        """SIGKILL: no cleanup runs, exactly like a crash."""
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        if self._reader:
            self._reader.join(2)

    def terminate(self, timeout: float = 15.0) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout)
        if self._reader:
            self._reader.join(2)
        return code

    def restart(self) -> "DaemonProcess":
        self.kill()
        return self.start()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_text(self) -> str:
        return "\n".join(self.output)

    def cli(self, *args: str, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
        return run_cli(list(args), self.env, ROOT, timeout)  # forked from a zygote where that is the same

    @asynccontextmanager
    async def client(self, subscribe: list[str] | str | None = None,
                     events: list[str] | None = None) -> AsyncIterator[GatewayClient]:
        # a generous handshake deadline: the suite must hold on a loaded 2-core machine
        async with GatewayClient(self.url, self.client_token, subscribe=subscribe, events=events,
                                 open_timeout=60) as client:
            yield client
