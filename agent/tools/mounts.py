"""exec's mount layer (bubblewrap): the agent's own files read-only and no network, unless approved.

Landlock (sandbox.py) grants whole trees, and the workspace has to be writable, so by itself it
cannot keep SOUL.md read-only while `sort -o`, `cp`, `tee`, `sed -i` or an approved interpreter
write beside it. Deciding by recognising commands cannot be complete; deciding on the effect can:
each exec call starts under `bwrap` in its own mount namespace, where

- the protected paths (agent/tools/protected.py) are read-only bind mounts of themselves: writing,
  truncating, replacing by rename, deleting or hard-linking them fails (EROFS, EBUSY, EXDEV);
- the folders between the workspace and a protected path are bind mounts of themselves, so they
  cannot be renamed away and replaced (`mv .tmp x; mkdir -p .tmp/home`) either;
- the network is a new, empty namespace (`--unshare-net`): no route anywhere, not even to the
  host's loopback services.

A call approved for it (`write_protected`, `network`) gets the paths writable, or the network.
A protected name that does not exist yet is created empty first (an empty prompt file is
ignored), because a mount needs something to sit on; one that is a symlink or has other hard
links cannot be protected by a mount and makes the call refuse to run.

Only the view of the files changes: the program still runs as the daemon's user, under Landlock.
"""

from __future__ import annotations

import functools
import os
import shutil
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .protected import protected_entries


class Unprotectable(Exception):
    """A protected path that a mount cannot keep read-only (a symlink, a file with other hard links)."""


@dataclass(frozen=True)
class MountStatus:
    available: bool
    detail: str
    bwrap: str = ""

    def line(self) -> str:
        return f"exec mounts: {'bubblewrap' if self.available else 'none'} ({self.detail})"


@functools.lru_cache(maxsize=1)
def mount_status() -> MountStatus:
    """Whether bubblewrap can give exec calls their own mounts and network here; probed once."""
    found = shutil.which("bwrap")
    if not found:
        return MountStatus(False, "bubblewrap is not installed; install it (apt-get install bubblewrap) to keep "
                                  "the agent's own files read-only for programs and to cut their network")
    true = shutil.which("true") or "/bin/true"
    try:
        probe = subprocess.run([found, "--dev-bind", "/", "/", "--unshare-net", "--die-with-parent", "--", true],
                               capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError) as exc:
        return MountStatus(False, f"bubblewrap could not run: {exc}")
    if probe.returncode != 0:
        why = (probe.stderr.strip().splitlines() or ["no message"])[-1]
        return MountStatus(False, f"bubblewrap cannot create namespaces here ({why}); allow unprivileged user "
                                  "namespaces or run without it")
    return MountStatus(True, "the agent's own files read-only, no network, unless a call is approved for them",
                       found)


def prepare(root: Path, *, memory: bool) -> list[Path]:
    """The protected paths under `root` to mount read-only, each created empty when missing."""
    chosen: list[Path] = []
    for path, folder in protected_entries(root, memory=memory):
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            _create(path, folder)
            info = os.lstat(path)
        if stat.S_ISLNK(info.st_mode):
            raise Unprotectable(f"{path.relative_to(root)} is a symbolic link, so exec's sandbox cannot keep it read-only")
        if not stat.S_ISDIR(info.st_mode) and info.st_nlink > 1:
            raise Unprotectable(f"{path.relative_to(root)} has {info.st_nlink - 1} other hard link(s) in the workspace, "
                                "so exec's sandbox cannot keep it read-only")
        chosen.append(path)
    return chosen


def _create(path: Path, folder: bool) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        if folder:
            path.mkdir(mode=0o700)
        else:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))
    except FileExistsError:
        pass  # created meanwhile (another call); lstat looks at what is there now


def bwrap_argv(status: MountStatus, root: Path, read_only: list[Path], *, network: bool) -> list[str]:
    """The bubblewrap prefix: the host's tree as it is, `read_only` pinned read-only, maybe no network."""
    argv = [status.bwrap, "--dev-bind", "/", "/"]
    if not network:
        argv.append("--unshare-net")
    pins: set[Path] = set()
    for path in read_only:
        pins.update(p for p in path.parents if root in p.parents)  # strictly between root and path
    for pin in sorted(pins, key=lambda p: len(p.parts)):
        argv += ["--bind", str(pin), str(pin)]
    for path in read_only:
        argv += ["--ro-bind", str(path), str(path)]
    return argv + ["--"]
