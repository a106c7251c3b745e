"""The OS sandbox around `exec`: what a program may touch, and whether this host can enforce it.

Argument checks cannot enumerate every way a program reads files (`sort --files0-from=LIST`
reads names from a file). So on Linux each exec call starts through `sandbox_launch.py`, which
confines itself with Landlock before it becomes the program. The policy:

- read + execute: /usr /bin /sbin /lib /lib32 /lib64 /etc /opt, the absolute PATH directories,
  the root of a version manager whose shims or bin folder is on PATH (~/.pyenv, ~/.asdf, ~/.nvm, ...),
  Python's prefixes and `tools.exec.sandbox_read_paths`;
- read + write: a few device files (/dev/null, /dev/zero, /dev/full, /dev/random, /dev/urandom,
  /dev/tty); never all of /dev, whose disks a daemon run as root could read raw;
- read: /proc (Landlock's ptrace scoping still denies /proc/<pid>/environ of the daemon);
- everything: the workspace;
- read + write: the person's own HOME/TMPDIR folder, `state/exec/<person>/` (workspace/users.py),
  outside every workspace, so nothing a file tool or another person writes is read there;
- nothing else: no /tmp, no $HOME. (Without a per-person folder, tests: TMPDIR `<workspace>/.tmp`,
  HOME `<workspace>/.tmp/home`.)

A candidate that is, contains or lies inside the state folder or config.toml, or is or contains
$HOME, is skipped: Landlock grants whole hierarchies, so granting `/home/me` would grant
`~/.clawgate/state`. The workspace is always granted (exec is useless without it); a workspace
that contains the state folder or config.toml exposes them, and `exposed()` says so.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from clawgate.config.paths import Paths

LAUNCHER = Path(__file__).with_name("sandbox_launch.py")
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc", "/opt")
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty")
TMP_NAME = ".tmp"  # the child's TMPDIR (and HOME below it), inside the workspace
# Version managers put shims (pyenv, asdf, rbenv, nodenv, mise) or a version's bin folder (nvm) on PATH; the
# program there runs an interpreter, libraries or scripts kept elsewhere under the manager's own root in the
# home folder (~/.pyenv/shims/python -> ~/.pyenv/libexec/pyenv -> ~/.pyenv/versions/3.11.7/bin/python).
# Granting only the PATH folder lets the shim start and then fail on its root, so a PATH folder inside one of
# these roots grants the whole root, read + execute: interpreters and their packages, nothing of the person's.
VERSION_MANAGERS = {".pyenv": "pyenv", ".asdf": "asdf", ".nvm": "nvm", ".rbenv": "rbenv", ".nodenv": "nodenv",
                    ".goenv": "goenv", ".jenv": "jenv", ".volta": "volta", ".local/share/mise": "mise"}


def version_manager_roots(search_path: str) -> dict[str, str]:
    """root (real path) -> manager name, for every PATH folder that lies inside a version manager's root."""
    found: dict[str, str] = {}
    for entry in search_path.split(os.pathsep):
        if not os.path.isabs(entry):
            continue
        real = os.path.realpath(entry) + "/"
        for marker, name in VERSION_MANAGERS.items():
            at = real.find(f"/{marker}/")
            if at >= 0:
                found.setdefault(real[:at + len(marker) + 1], name)
    return found


@dataclass(frozen=True)
class SandboxStatus:
    available: bool
    kind: Literal["landlock", "none"]
    detail: str

    def line(self) -> str:
        """One line for the start-up log and `status`."""
        return f"exec sandbox: {self.kind} ({self.detail})"


@functools.lru_cache(maxsize=1)
def sandbox_status() -> SandboxStatus:
    """Whether exec calls can be sandboxed here; probed once (a real restricted child) and cached."""
    if not sys.platform.startswith("linux"):
        return SandboxStatus(False, "none", f"Landlock needs Linux, this is {sys.platform}")
    try:
        probe = subprocess.run([sys.executable, "-I", "-S", str(LAUNCHER), "--probe"], capture_output=True,
                               text=True, timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError) as exc:
        return SandboxStatus(False, "none", f"the sandbox launcher could not run: {exc}")
    answer = (probe.stdout.strip() or probe.stderr.strip()).splitlines()[-1:] or ["no answer"]
    if probe.returncode == 0 and answer[0].startswith("ok "):
        abi = answer[0].split()[1]
        return SandboxStatus(True, "landlock", f"Landlock ABI {abi}: system folders read-only, the workspace "
                                               "writable, nothing else (no state, no config, no /tmp, no $HOME)")
    return SandboxStatus(False, "none", f"Landlock unavailable: {answer[0]} (needs Linux 5.13+ with Landlock enabled)")


@dataclass(frozen=True)
class SandboxPolicy:
    """What exec's sandbox protects; built from Paths in the daemon, from tmp dirs in tests."""

    secrets: tuple[Path, ...]  # never granted, nor anything containing or inside them (state/, config.toml)
    home: Path | None = None  # never granted, nor anything containing it; folders inside it may be ($HOME)
    extra_read: tuple[Path, ...] = field(default_factory=tuple)  # more read + execute folders (config)

    @classmethod
    def for_paths(cls, paths: Paths, extra_read: list[str] | tuple[str, ...] = ()) -> "SandboxPolicy":
        home = Path(os.path.expanduser("~"))
        return cls((paths.state, paths.config_file), home if home.is_absolute() else None,
                   tuple(Path(os.path.expanduser(p)) for p in extra_read))

    def rules(self, workspace: Path, search_path: str, scratch: Path | None = None) -> list[tuple[str, str]]:
        """[path, kind] pairs for the launcher; the workspace last, always present, after the person's
        HOME/TMPDIR folder `scratch` (granted alone, though it lies inside the state folder)."""
        candidates = [(p, "rx") for p in SYSTEM_DIRS]
        candidates += [(p, "rx") for p in search_path.split(os.pathsep) if os.path.isabs(p)]
        candidates += [(p, "rx") for p in version_manager_roots(search_path)]
        candidates += [(p, "rx") for p in (sys.base_prefix, sys.prefix, *map(str, self.extra_read))]
        candidates += [(p, "dev") for p in DEVICES] + [("/proc", "ro")]
        rules: list[tuple[str, str]] = []
        seen: set[str] = set()
        for path, kind in candidates:
            real = os.path.realpath(path)
            if real in seen or not os.path.exists(real) or self.forbids(real):
                continue
            seen.add(real)
            rules.append((real, kind))
        if scratch is not None:
            rules.append((os.path.realpath(scratch), "rw"))
        rules.append((os.path.realpath(workspace), "rw"))
        return rules

    def granted(self, real: str, workspace: Path, search_path: str, scratch: Path | None = None) -> bool:
        """Whether a program at `real` (a real path) lies in a folder the sandbox grants."""
        return any(_within(real, path) for path, _ in self.rules(workspace, search_path, scratch))

    def forbids(self, real: str) -> bool:
        """True when granting `real` (a hierarchy) would grant a protected path."""
        for secret in self._real(self.secrets):
            if _within(secret, real) or _within(real, secret):
                return True
        return self.home is not None and any(_within(home, real) for home in self._real((self.home,)))

    def exposed(self, workspace: Path) -> list[Path]:
        """Protected paths the workspace contains (so the sandbox cannot hide them)."""
        root = os.path.realpath(workspace)
        return [Path(s) for s in self._real(self.secrets) if _within(s, root)]

    @staticmethod
    def _real(paths: tuple[Path, ...]) -> list[str]:
        return [os.path.realpath(p) for p in paths]

    def launcher_argv(self, argv: list[str], workspace: Path, search_path: str, status_fd: int,
                      scratch: Path | None = None, argv_fd: int | None = None) -> list[str]:
        """The launcher's command line; with `argv_fd` the program's own argv is read from that
        descriptor (NUL-separated) instead: bubblewrap refuses more than 9,000 arguments in all."""
        rules = [f"{kind}={path}" for path, kind in self.rules(workspace, search_path, scratch)]
        head = [sys.executable, "-I", "-S", str(LAUNCHER), str(status_fd)]
        if argv_fd is not None:
            return [*head, f"{ARGV_FD}{argv_fd}", *rules, "--"]
        return [*head, *rules, "--", *argv]


ARGV_FD = "@argv-fd="  # launcher option: the program's argv comes from this descriptor


def argv_file(argv: list[str]) -> int:
    """An anonymous file holding `argv` NUL-separated, for the launcher to read (memfd: no path)."""
    fd = os.memfd_create("clawgate-argv", os.MFD_CLOEXEC)
    data = b"\0".join(os.fsencode(arg) for arg in argv)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    return fd


def _within(path: str, ancestor: str) -> bool:
    """`path` is `ancestor` or lies below it (both real, absolute)."""
    return path == ancestor or path.startswith(ancestor.rstrip("/") + "/")
