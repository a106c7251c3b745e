"""One daemon per CLAWGATE_HOME: an flock on state/daemon.lock, held for the daemon's whole life.

Two daemons on one home would replay the same inbox twice and overwrite each other's task
files, so the second one must stop before it binds a port. The kernel drops an flock when its
holder dies (even on SIGKILL), so a crashed daemon never leaves a lock that needs cleaning up,
unlike a pid file. Offline CLI edits (cron, tasks, pairing without a daemon) take the same
lock for their few milliseconds, so a daemon cannot start in the middle of one; a daemon that
finds the lock held by such an edit waits for it instead of failing.

The lock file holds "<pid> <role>" of the holder (role "gateway" or "cli"), for messages and
for the CLI's "is a daemon running?" check. Its content is trusted only while the lock is held.
"""

from __future__ import annotations

import fcntl
import os
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from clawgate.config.paths import Paths

GATEWAY = "gateway"
CLI = "cli"
DAEMON_WAIT_SECONDS = 3.0  # a daemon waits this long for an offline CLI edit to finish
POLL_SECONDS = 0.05


@dataclass(frozen=True)
class Holder:
    """Who holds the lock: pid None when it could not be read (the holder is just writing it)."""

    pid: int | None
    role: str

    @property
    def is_gateway(self) -> bool:
        return self.role == GATEWAY

    def describe(self) -> str:
        pid = f"pid {self.pid}" if self.pid is not None else "pid unknown"
        if self.role == GATEWAY:
            return f"a gateway ({pid})"
        if self.role == CLI:
            return f"a clawgate command ({pid})"
        return f"another process ({pid})"


class AlreadyRunning(Exception):
    """The lock is held by someone else (after any waiting the caller asked for)."""

    def __init__(self, holder: Holder, lock_file: Path) -> None:
        super().__init__(f"{holder.describe()} holds {lock_file}")
        self.holder = holder
        self.lock_file = lock_file

    @property
    def pid(self) -> int | None:
        return self.holder.pid


def lock_file(paths: Paths) -> Path:
    return paths.state / "daemon.lock"


class InstanceLock:
    """The single-instance lock of one home. acquire() once, release() (or exit the `with`) once."""

    def __init__(self, paths: Paths) -> None:
        self.paths = paths
        self.path = lock_file(paths)
        self._fd: int | None = None
        self._shared = False

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self, role: str = GATEWAY, *, wait: float = DAEMON_WAIT_SECONDS, shared: bool = False) -> "InstanceLock":
        """Take the lock or raise AlreadyRunning. Waits up to `wait` seconds while the holder is not
        a live gateway (an offline CLI edit ends in milliseconds); a live gateway fails at once.
        `shared`: the processes of one fleet on one home hold it together (a lone daemon or an
        offline edit, which take it alone, still cannot start beside them)."""
        if self._fd is not None:
            raise RuntimeError("instance lock already acquired")
        self.paths.ensure()
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)  # O_CLOEXEC by default: children never hold it
        deadline = time.monotonic() + wait
        try:
            while True:
                try:
                    fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    holder = _read_holder(fd)
                    if holder.is_gateway or time.monotonic() >= deadline:
                        raise AlreadyRunning(holder, self.path) from None
                    time.sleep(POLL_SECONDS)
            if not shared:
                os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()} {role}\n".encode().ljust(32), 0)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        self._shared = shared
        return self

    def release(self) -> None:
        """Empty the file first, so a reader never takes our pid for a live holder."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            if not self._shared:  # fleet processes sharing the lock leave the file to the others
                os.ftruncate(fd, 0)
        finally:
            os.close(fd)  # closing drops the flock

    def holder(self) -> Holder | None:
        """Who holds the lock now, or None when nobody does (a stale file from a crash counts as nobody)."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # exclusive: a fleet's shared holders count too
            except BlockingIOError:
                return _read_holder(fd)
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None
        finally:
            os.close(fd)

    def __enter__(self) -> "InstanceLock":
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.release()


def holder_pid(paths: Paths) -> int | None:
    """The pid of the live daemon holding this home's lock, or None when no daemon runs."""
    holder = InstanceLock(paths).holder()
    return holder.pid if holder is not None and holder.is_gateway else None


def _read_holder(fd: int) -> Holder:
    """The holder written in the file; a gateway whose pid is dead is stale text, not a gateway."""
    try:
        pid_text, _, role = os.pread(fd, 128, 0).decode("ascii", "replace").strip().partition(" ")
        pid = int(pid_text)
    except (OSError, ValueError):
        return Holder(None, "")
    if not _alive(pid):
        return Holder(None, "")  # content left behind by a killed holder; the new one has not written yet
    return Holder(pid, role.strip())


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# the pid file (state/gateway.pid): informational, for people and scripts -----------------
def remove_pid_file(pid_file: Path, pid: int | None = None) -> bool:
    """Delete the pid file only if it names us (or `pid`): never another daemon's file."""
    pid = os.getpid() if pid is None else pid
    try:
        if int(pid_file.read_text().strip()) != pid:
            return False
    except (OSError, ValueError):
        return False
    pid_file.unlink(missing_ok=True)
    return True
