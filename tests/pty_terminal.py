"""A CLI command on a pseudo-terminal, as a person at a terminal runs it: what it shows, keys typed.

The terminal answers a cursor-position request (the escape sequence ESC [ 6 n that prompt_toolkit
sends, as every terminal emulator does), so a full-screen-aware prompt behaves as it would for a
person instead of waiting for an answer that never comes.
"""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys

from tests.harness import ROOT, DaemonProcess
from tests.waiting import DEFAULT_TIMEOUT, wait_until

CURSOR_REQUEST = b"\x1b[6n"
ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[=>]|\r|.\x08")  # .\b: a character written, then backspaced


class Terminal:
    """The CLI as a child on a pty: everything it prints, and keys typed into it."""

    def __init__(self, daemon: DaemonProcess, *args: str) -> None:
        self.master, slave = os.openpty()
        env = {**daemon.env, "TERM": "xterm", "COLUMNS": "200", "LINES": "50"}
        self.proc = subprocess.Popen([sys.executable, "-m", "clawgate.gateway.cli", *args], env=env, cwd=ROOT,
                                     stdin=slave, stdout=slave, stderr=slave, start_new_session=True)
        os.close(slave)
        self.seen = ""
        self._read = b""

    @property
    def text(self) -> str:
        """What was shown, without the terminal's control sequences."""
        return ESCAPES.sub("", self.seen)

    def _pump(self, wait: float) -> bool:
        """Read what is there (up to `wait` seconds for it); False once the child closed the pty."""
        ready, _, _ = select.select([self.master], [], [], wait)
        if not ready:
            return True
        try:
            chunk = os.read(self.master, 65536)
        except OSError:  # the child closed the pty
            return False
        if not chunk:
            return False
        if CURSOR_REQUEST in chunk:
            os.write(self.master, b"\x1b[1;1R" * chunk.count(CURSOR_REQUEST))
        self._read += chunk
        self.seen = self._read.decode(errors="replace")
        return True

    def read_until(self, pattern: str, timeout: float = DEFAULT_TIMEOUT, *, count: int = 1) -> str:
        """Wait until `pattern` was shown (`count` times), escapes left out; returns all that was shown."""
        def shown() -> bool:
            self._pump(0.2)
            return len(re.findall(pattern, self.text)) >= count
        try:
            wait_until(shown, f"{pattern!r} on the terminal", timeout=timeout, interval=0.01,
                       describe=lambda: f"it shows:\n{self.text}")
        except AssertionError:
            self.close()
            raise
        return self.text

    def type(self, line: str) -> None:
        os.write(self.master, line.encode() + b"\r")

    def press(self, keys: bytes) -> None:
        os.write(self.master, keys)

    def signal(self, sig: signal.Signals) -> None:
        os.kill(self.proc.pid, sig)

    def wait(self, timeout: float = 30.0) -> int:
        try:
            code = self.proc.wait(timeout)
        finally:
            self.drain()
        return code

    def drain(self) -> None:
        while self.master >= 0 and self._pump(0.2):
            ready, _, _ = select.select([self.master], [], [], 0)
            if not ready:
                return

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        if self.master >= 0:
            os.close(self.master)
            self.master = -1
