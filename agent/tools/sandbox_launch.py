"""Launcher that locks itself into a Landlock sandbox, then becomes the requested program.

Run as `python -I -S sandbox_launch.py STATUS_FD KIND=PATH... -- ARGV...` (never imported by a
forked child: a preexec_fn is unsafe in a threaded daemon, a fresh interpreter is not). It

1. sets PR_SET_NO_NEW_PRIVS (needed for Landlock, and setuid programs gain nothing);
2. creates a ruleset that handles every filesystem right the kernel's Landlock ABI knows, plus
   signal and abstract-socket scoping (ABI 6+), so whatever no rule grants is denied;
3. adds one rule per KIND=PATH (kinds: see KINDS) and restricts itself;
4. drops all capabilities (a daemon run as root would otherwise keep e.g. CAP_SYS_RAWIO);
5. os.execvpe's ARGV with the environment it was given.

Any failure before the exec is written as one line `KIND<TAB>DETAIL` to STATUS_FD (close-on-exec,
so the parent reads EOF when the program started) and the launcher exits 127 without running
ARGV: the sandbox fails closed. Standard library only, and nothing from this project: `-I` keeps
the project off sys.path. Few imports (no json, no re): they are most of the launcher's start-up
time. `--probe` checks that restriction works and is enforced here.
"""

from __future__ import annotations

import ctypes
import os
import stat
import sys
import warnings  # noqa: F401  os.execvpe imports it lazily, and after restrict() it may be unreadable

SYS_LANDLOCK_CREATE_RULESET = 444  # the same number on every architecture (syscalls >= 424 are shared)
SYS_LANDLOCK_ADD_RULE = 445
SYS_LANDLOCK_RESTRICT_SELF = 446
LANDLOCK_CREATE_RULESET_VERSION = 1
LANDLOCK_RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS = 38

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV  # the only rights a rule on a non-directory may hold
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1


def fs_rights(abi: int) -> int:
    """Every filesystem right this ABI can restrict: handling them all makes the default 'deny'."""
    rights = (1 << 13) - 1  # ABI 1: execute … make_sym
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    if abi >= 5:
        rights |= IOCTL_DEV
    return rights


KINDS = {  # what each kind of rule grants, before masking with what the ABI handles
    "rx": EXECUTE | READ_FILE | READ_DIR,  # system directories
    "ro": READ_FILE | READ_DIR,  # /proc
    "dev": READ_FILE | WRITE_FILE | TRUNCATE | IOCTL_DEV,  # single device files (/dev/null …)
    "rw": -1,  # the workspace: everything
}


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _syscall(*args: object) -> int:
    result = _libc.syscall(*args)
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return result


def landlock_abi() -> int:
    """The kernel's Landlock ABI version; raises OSError (ENOSYS, EOPNOTSUPP) when there is none."""
    return _syscall(ctypes.c_long(SYS_LANDLOCK_CREATE_RULESET), None, ctypes.c_size_t(0),
                    ctypes.c_uint32(LANDLOCK_CREATE_RULESET_VERSION))


def restrict(rules: list[tuple[str, str]]) -> int:
    """Confine this process (and every later child) to `rules`; returns the ABI used."""
    abi = landlock_abi()
    handled = fs_rights(abi)
    if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    attr = _RulesetAttr(handled, 0, SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0)
    size = ctypes.sizeof(attr) if abi >= 6 else 8  # older kernels know only the first field
    ruleset = _syscall(ctypes.c_long(SYS_LANDLOCK_CREATE_RULESET), ctypes.byref(attr), ctypes.c_size_t(size),
                       ctypes.c_uint32(0))
    try:
        for path, kind in rules:
            _add_rule(ruleset, path, KINDS[kind] & handled)
        _syscall(ctypes.c_long(SYS_LANDLOCK_RESTRICT_SELF), ctypes.c_int(ruleset), ctypes.c_uint32(0))
    finally:
        os.close(ruleset)
    return abi


def _add_rule(ruleset: int, path: str, access: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except FileNotFoundError:
        return  # a system folder this host lacks (/lib32, /opt): nothing to grant
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            access &= FILE_RIGHTS
        rule = _PathBeneathAttr(access, fd)
        _syscall(ctypes.c_long(SYS_LANDLOCK_ADD_RULE), ctypes.c_int(ruleset), ctypes.c_int(LANDLOCK_RULE_PATH_BENEATH),
                 ctypes.byref(rule), ctypes.c_uint32(0))
    except OSError as exc:
        raise OSError(exc.errno, f"cannot add a sandbox rule for {path}: {exc.strerror}") from None
    finally:
        os.close(fd)


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def drop_capabilities() -> None:
    """Empty effective/permitted/inheritable sets; with no_new_privs an exec cannot regain them."""
    header = _CapHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
    data = (_CapData * 2)()
    if _libc.capset(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capset failed")


def _fail(status_fd: int, kind: str, detail: str) -> None:
    try:
        os.write(status_fd, f"{kind}\t{detail}".replace("\n", " ").encode("utf-8", "replace") + b"\n")
    finally:
        os._exit(127)


def probe() -> int:
    """Restrict with no rules and check that the root folder became unreadable."""
    try:
        abi = restrict([])
        drop_capabilities()
    except OSError as exc:
        print(f"cannot restrict: {exc}")
        return 1
    try:
        os.listdir("/")
    except PermissionError:
        print(f"ok {abi}")
        return 0
    print("restriction is not enforced (the root folder is still readable)")
    return 1


ARGV_FD = "@argv-fd="  # as agent/tools/sandbox.py writes it (this file runs alone, importing nothing of ours)


def _read_argv(source: int) -> list[str]:
    os.lseek(source, 0, os.SEEK_SET)
    chunks = []
    while chunk := os.read(source, 1 << 20):
        chunks.append(chunk)
    os.close(source)
    return [os.fsdecode(arg) for arg in b"".join(chunks).split(b"\0")]


def main(argv: list[str]) -> None:
    if argv[1:2] == ["--probe"]:
        sys.exit(probe())
    fd = int(argv[1])
    if argv[2:3] and argv[2].startswith(ARGV_FD):  # a long argv comes in a file (bubblewrap's 9,000 limit)
        argv = [*argv[:2], *argv[3:], *_read_argv(int(argv[2][len(ARGV_FD):]))]
    if "--" not in argv or argv[-1] == "--":
        _fail(fd, "sandbox", "launcher called without '--' and a command")
    end = argv.index("--")
    command = argv[end + 1 :]
    try:
        rules = [tuple(rule.split("=", 1)[::-1]) for rule in argv[2:end]]
        restrict(rules)  # type: ignore[arg-type]
        drop_capabilities()
    except (OSError, ValueError, KeyError) as exc:
        _fail(fd, "sandbox", str(exc))
    os.set_inheritable(fd, False)
    try:
        os.execvpe(command[0], command, os.environ)
    except FileNotFoundError:
        _fail(fd, "not_found", command[0])
    except PermissionError:
        _fail(fd, "not_executable", command[0])
    except OSError as exc:
        _fail(fd, "exec", f"{command[0]}: {exc.strerror}")


if __name__ == "__main__":
    main(sys.argv)
