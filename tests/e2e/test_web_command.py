"""`clawgate web`: the web page's address and the token to log in with, printed to the terminal that
asked (a real pty) and not into a pipe unless asked; the address serves the page, the token is the
one the gateway accepts, and it never reaches the daemon's log."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path

import httpx

from clawgate.gateway.client import GatewayClient
from tests.fakes.anthropic_api import FakeAnthropic
from tests.harness import ROOT, DaemonProcess


def on_a_terminal(daemon: DaemonProcess, *args: str) -> tuple[int, str]:
    """`clawgate web` with its stdout on a pty, as a person runs it."""
    master, slave = os.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "clawgate.gateway.cli", "web", *args], env=daemon.env, cwd=ROOT,
                            stdin=subprocess.DEVNULL, stdout=slave, stderr=slave)
    os.close(slave)
    out = b""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 1.0)
        if ready:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # the child closed the pty
                break
            if not chunk:
                break
            out += chunk
        elif proc.poll() is not None:
            break
    os.close(master)
    return proc.wait(30), out.decode().replace("\r\n", "\n")


def field(text: str, name: str) -> str:
    return next(line.removeprefix(f"{name}:").split()[0] for line in text.splitlines() if line.startswith(f"{name}:"))


async def test_the_terminal_gets_the_address_and_the_token_a_pipe_only_the_address(tmp_path: Path,
                                                                                  fake_model: FakeAnthropic) -> None:
    daemon = DaemonProcess(tmp_path / "home", anthropic_url=fake_model.base_url, token=None)  # a generated token
    daemon.init()
    daemon.start()
    try:
        code, shown = on_a_terminal(daemon)
        assert code == 0, shown
        url, token = field(shown, "web page"), field(shown, "token")
        assert url == f"http://127.0.0.1:{daemon.port}/" and token == daemon.client_token, shown
        page = httpx.get(url, timeout=30)
        assert page.status_code == 200 and 'id="token"' in page.text  # the page's login field takes it
        async with GatewayClient(daemon.url, token, open_timeout=60) as client:  # and the gateway accepts it
            assert (await client.request("status"))["version"]

        piped = daemon.cli("web")
        assert piped.returncode == 0 and url in piped.stdout and token not in piped.stdout, piped.stdout
        assert "--show-token" in piped.stdout
        assert token in daemon.cli("web", "--show-token").stdout
        as_json = json.loads(daemon.cli("web", "--json").stdout)
        assert as_json == {"url": url, "running": True}
        assert json.loads(daemon.cli("web", "--json", "--show-token").stdout)["token"] == token
        assert token not in daemon.log_text()
    finally:
        daemon.kill()
    stopped = daemon.cli("web")
    assert stopped.returncode == 0 and "no gateway runs on this home" in stopped.stdout


def test_before_the_first_start_there_is_no_token_to_print(tmp_path: Path) -> None:
    home = DaemonProcess(tmp_path / "home", anthropic_url=None, token=None)
    home.init()
    out = home.cli("web")
    assert out.returncode == 1 and out.stdout == "" and out.stderr.count("\n") == 1, out
    assert "start the gateway once" in out.stderr and "Traceback" not in out.stderr
