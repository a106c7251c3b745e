"""Test daemons and command lines forked from one process that has already imported the daemon,
instead of a fresh interpreter each.

A daemon's start spends most of its CPU importing: ~0.35 s to its ready line and ~0.5 s more for the
model SDK's import after it; a command line ~0.3 s. The suite starts about a thousand daemons and
several hundred command lines on two cores, so those imports were most of its time. Each pytest
worker starts a zygote (`python -m tests.zygote`) that imports what a daemon's start and its warm-up
import, then forks a child per daemon (`DaemonProcess.start`) or command (`DaemonProcess.cli`). The
child becomes the process `python -m clawgate.gateway.cli …` would make: the test's environment,
working folder, argument list, stdin and output pipes (a daemon in a session of its own, as the
harness starts it), then the same `__main__` of `clawgate.gateway.cli`, so its start, its shutdown,
its output, its exit code and a SIGKILL are the real ones. What differs is only that the modules were
imported before the fork.

Where that would differ from a fresh interpreter, the child execs `python -m clawgate.gateway.cli …`
in place (same pid, session and descriptors) instead of running it from what the zygote imported
(`_extra_path`): another PYTHON* variable than the zygote's (PYTHONPROFILEIMPORTTIME), another working
folder, or PYTHONPATH folders that a fresh start would read differently (a sitecustomize, a module
the zygote imported from elsewhere). Other PYTHONPATH folders (a test's plugin or fake library) are
put where a fresh start puts them. CLAWGATE_TEST_EXEC_DAEMONS=1 in the suite's environment execs
every daemon and command from the worker, as before the zygote; outside the suite (bench/ uses the
harness to measure real starts) every one is exec'd. A daemon configured for Feishu comes
from a second zygote that has imported `lark_oapi` too (3 s of CPU), which that daemon's start
imports anyway.

Protocol, on a Unix socket: the harness sends one JSON request (argv, env, cwd, new session or not)
with its stdin, stdout and stderr descriptors (SCM_RIGHTS); the zygote answers the child's pid, then,
when the child has ended, its exit code as `Popen.returncode` gives it (-N for a signal), and closes
the connection.
"""

from __future__ import annotations

import array
import contextlib
import gc
import json
import locale
import os
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
_EXEC_EVERY_DAEMON = "CLAWGATE_TEST_EXEC_DAEMONS"


# --- the zygote -----------------------------------------------------------------------------------

# flavour -> what its zygote imports besides the daemon: what a daemon so configured imports at its start
FLAVOURS: dict[str, tuple[str, ...]] = {"plain": (), "feishu": ("lark_oapi",)}


def _preload(flavour: str) -> None:
    """What a daemon imports to its ready line and in its warm-up thread, and the flavour's libraries (a
    test checks that a default start imports no channel library: it runs with PYTHONPROFILEIMPORTTIME, so
    it is exec'd)."""
    import importlib

    from clawgate.config.entry_point_scan import one_entry_point_scan

    gc.disable()  # as the daemon's own start (gateway/cli): no collections while ~50,000 objects load
    with one_entry_point_scan():
        for module in ("clawgate.gateway.cli", "clawgate.gateway.app", "clawgate.gateway.runtime",
                       "clawgate.gateway.warm_up"):
            importlib.import_module(module)
        from clawgate.agent.providers import anthropic_light

        anthropic_light.load()  # the warm-up's import (agent/providers/anthropic.py)
        # and what every daemon imports after its ready line (its import log, PYTHONPROFILEIMPORTTIME):
        # the SDK's client and what building one imports, the scheduler with the triggers it starts with
        for module in ("anthropic._base_client", "anthropic._client", "anthropic.lib.credentials", "anthropic._qs",
                       "httpx2", "httpcore2", "apscheduler.schedulers.asyncio", "apscheduler.executors.asyncio",
                       "apscheduler.triggers.interval"):
            importlib.import_module(module)
        for module in FLAVOURS[flavour]:
            importlib.import_module(module)
    gc.enable()
    gc.freeze()  # what the children share stays shared: no collection writes into those pages


def _serve(path: str) -> dict[str, Any]:
    """Fork a child per request; in the parent, never returns. In the child, returns the request."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    selector.register(sys.stdin, selectors.EVENT_READ)  # the harness's pipe: closed when the worker ends
    waiting: dict[int, socket.socket] = {}  # child pid -> the connection told of its end
    print("READY", flush=True)
    while True:
        for key, _ in selector.select(0.05):
            if key.fileobj is sys.stdin:
                if not sys.stdin.readline():
                    os._exit(0)
                continue
            conn, _ = listener.accept()
            request, fds = _receive(conn)
            pid = os.fork()
            if pid == 0:
                selector.close()
                listener.close()
                for other in waiting.values():
                    other.close()
                conn.close()
                request["fds"] = fds
                return request
            for fd in fds:
                os.close(fd)
            with contextlib.suppress(OSError):  # the harness gave up on it: the child runs and is reaped all the same
                conn.sendall(f"{pid}\n".encode())
            waiting[pid] = conn
        while waiting:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            conn = waiting.pop(pid, None)
            if conn is not None:
                with contextlib.suppress(OSError):  # nobody waits for this exit code any more
                    conn.sendall(f"{os.waitstatus_to_exitcode(status)}\n".encode())
                conn.close()


def _receive(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    fds = array.array("i")
    data = b""
    while not data.endswith(b"\n"):
        chunk, ancdata, _, _ = conn.recvmsg(1 << 20, socket.CMSG_SPACE(3 * fds.itemsize))
        if not chunk:
            raise ConnectionError("the harness closed the request")
        data += chunk
        for level, kind, payload in ancdata:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
    return json.loads(data), list(fds)


def _become_daemon(request: dict[str, Any]) -> None:
    """In the forked child: the process `python -m clawgate.gateway.cli <args>` would be, then its `__main__`;
    or, where what is imported here could differ from what that process would import, that process itself
    (exec'd in place: the same pid, session and descriptors)."""
    if request["new_session"]:
        os.setsid()
    for target, fd in enumerate(request["fds"]):
        os.dup2(fd, target)
    os.closerange(3, 1 << 16)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    extra = _extra_path(request)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    if extra is None:
        os.execv(sys.executable, [sys.executable, "-m", "clawgate.gateway.cli", *request["args"]])
    import importlib
    import runpy

    from clawgate.config import entry_point_scan

    sys.path[1:1] = extra  # where a fresh interpreter puts PYTHONPATH: after the script's folder
    entry_point_scan._every_entry_point.cache_clear()  # the start scans the installed distributions itself
    importlib.invalidate_caches()
    gc.unfreeze()  # as a fresh interpreter's: the daemon freezes what it built at its own ready line
    sys.argv = [str(ROOT / "gateway" / "cli" / "__main__.py"), *request["args"]]
    runpy.run_module("clawgate.gateway.cli", run_name="__main__", alter_sys=True)


def _extra_path(request: dict[str, Any]) -> list[str] | None:
    """The PYTHONPATH folders this request adds to the zygote's own, if a fork can stand for a fresh start
    with them; None if not: another PYTHON* variable (PYTHONPROFILEIMPORTTIME), another folder, a folder
    with a sitecustomize (run at a fresh start only), or a module of such a folder that this process has
    imported from elsewhere (the fresh start would import the folder's)."""
    ours = {k: v for k, v in os.environ.items() if k.startswith("PYTHON")}
    theirs = {k: v for k, v in request["env"].items() if k.startswith("PYTHON")}
    if {k: v for k, v in ours.items() if k != "PYTHONPATH"} != {k: v for k, v in theirs.items() if k != "PYTHONPATH"}:
        return None
    if os.path.realpath(request["cwd"]) != os.path.realpath(os.getcwd()):
        return None
    own = [p for p in ours.get("PYTHONPATH", "").split(os.pathsep) if p]
    asked = [p for p in theirs.get("PYTHONPATH", "").split(os.pathsep) if p]
    if asked[:len(own)] != own:
        return None
    extra = [os.path.abspath(p) for p in asked[len(own):]]
    for folder in extra:
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        if {"sitecustomize.py", "usercustomize.py"} & set(names):
            return None
        for name in names:
            module = sys.modules.get(name.removesuffix(".py"))
            where = getattr(module, "__file__", None) if module is not None else None
            if module is not None and not (where and os.path.realpath(where).startswith(os.path.realpath(folder) + os.sep)):
                return None
    return extra


def main() -> None:
    path, flavour = sys.argv[1], sys.argv[2]
    _preload(flavour)
    if threading.active_count() != 1:  # a fork would copy a thread's locks but not the thread
        print(f"NOT READY: {threading.active_count()} threads after the imports", flush=True)
        raise SystemExit(1)
    request = _serve(path)
    _become_daemon(request)


# --- the harness's side ---------------------------------------------------------------------------

# On in the suite (tests/conftest.py). Off for the scripts that use the harness outside it: bench/ measures
# real starts, each daemon exec'd.
enabled = False


def _zygote_for(env: dict[str, str]) -> str | None:
    """The socket of the zygote to fork a process with this environment from; None: exec it. (Where a fork
    would differ from a fresh start, the child itself execs: `_extra_path`.)"""
    if not enabled or os.environ.get(_EXEC_EVERY_DAEMON) == "1":
        return None
    return Zygote.socket_path("feishu" if any(k.startswith("CLAWGATE_CHANNELS__FEISHU") for k in env) else "plain")


def outside_environment() -> dict[str, str]:
    """This process's environment without what would configure a daemon under test (CLAWGATE_*, and the
    ANTHROPIC_* and TELEGRAM_* variables the SDKs read): a developer's own settings never leak in."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("CLAWGATE_", "ANTHROPIC_", "TELEGRAM_"))}


def _zygote_env() -> dict[str, str]:
    return {**outside_environment(), "PYTHONUNBUFFERED": "1"}


class Zygote:
    """One zygote of a flavour in this pytest process, started at its first use."""

    _lock = threading.Lock()
    _running: dict[str, "Zygote"] = {}

    def __init__(self, flavour: str) -> None:
        from tests import lifeline

        self.path = os.path.join(tempfile.mkdtemp(prefix="clawgate-zygote-"), "socket")
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.zygote", self.path, flavour], cwd=ROOT,
                                     env=_zygote_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     start_new_session=True)
        lifeline.hold(self.proc)  # and the command lines it forks, which stay in its process group
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        self.broken = None if line == "READY" else (line or f"exit {self.proc.wait()}")

    @classmethod
    def socket_path(cls, flavour: str) -> str | None:
        """The socket of the flavour's zygote; None if it could not start (then processes are exec'd)."""
        with cls._lock:
            zygote = cls._running.get(flavour)
            if zygote is None or (zygote.broken is None and zygote.proc.poll() is not None):
                zygote = cls._running[flavour] = Zygote(flavour)
            return zygote.path if zygote.broken is None else None


class ForkedProcess:
    """A process forked by a zygote, with the part of `subprocess.Popen` the tests use."""

    def __init__(self, args: list[str], env: dict[str, str], cwd: Path, path: str, *, fds: tuple[int, int, int],
                 new_session: bool) -> None:
        self.args = args
        self.returncode: int | None = None
        self._lock = threading.Lock()
        self._buffer = b""
        self._control = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._control.connect(path)
        request = json.dumps({"args": args, "env": env, "cwd": str(cwd), "new_session": new_session}).encode()
        self._control.sendmsg([request + b"\n"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
        self.pid = int(self._line(None))

    def _line(self, timeout: float | None) -> str:
        """The zygote's next line; TimeoutError if none came within `timeout`."""
        self._control.settimeout(timeout)
        while b"\n" not in self._buffer:
            try:
                chunk = self._control.recv(64)
            except (socket.timeout, BlockingIOError):  # timeout 0: a non-blocking read
                raise TimeoutError from None
            if not chunk:
                raise ConnectionError("the zygote closed the connection before the process's exit code")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode()

    def poll(self) -> int | None:
        return self._wait(0)

    def wait(self, timeout: float | None = None) -> int:
        code = self._wait(timeout)
        if code is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return code

    def _wait(self, timeout: float | None) -> int | None:
        with self._lock:
            if self.returncode is None:
                try:
                    self.returncode = int(self._line(timeout))
                except TimeoutError:
                    return None
                self._control.close()
            return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class ForkedDaemon(ForkedProcess):
    """A daemon from a zygote: its output (stdout and stderr) on one pipe, read as text like Popen's."""

    def __init__(self, args: list[str], env: dict[str, str], cwd: Path, path: str) -> None:
        read, write = os.pipe()
        try:
            super().__init__(args, env, cwd, path, fds=(0, write, write), new_session=True)
        except BaseException:
            os.close(read)
            raise
        finally:
            os.close(write)
        self.stdout = open(read, encoding=None, errors="strict")  # text, as Popen(text=True) gives it


def start_daemon(args: list[str], env: dict[str, str], cwd: Path) -> "subprocess.Popen[str] | ForkedDaemon":
    """The daemon `python -m clawgate.gateway.cli <args>`, in a session of its own, its output on one pipe:
    forked from a zygote where that is the same, else exec'd."""
    path = _zygote_for(env)
    if path is not None:
        return ForkedDaemon(args, env, cwd, path)
    return subprocess.Popen([sys.executable, "-m", "clawgate.gateway.cli", *args], env=env, cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)


def run_cli(args: list[str], env: dict[str, str], cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    """`subprocess.run([python, -m, clawgate.gateway.cli, *args], capture_output=True, text=True, timeout=…)`,
    forked from a zygote where that is the same."""
    path = _zygote_for(env)
    if path is None:
        return subprocess.run([sys.executable, "-m", "clawgate.gateway.cli", *args], env=env, cwd=cwd,
                              capture_output=True, text=True, timeout=timeout)
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    try:
        proc = ForkedProcess(args, env, cwd, path, fds=(0, out_write, err_write), new_session=False)
    except BaseException:
        os.close(out_read)
        os.close(err_read)
        raise
    finally:
        os.close(out_write)
        os.close(err_write)
    deadline = time.monotonic() + timeout
    captured = {out_read: bytearray(), err_read: bytearray()}
    with selectors.DefaultSelector() as selector:
        for fd in captured:
            selector.register(fd, selectors.EVENT_READ)
        try:
            while selector.get_map():
                left = deadline - time.monotonic()
                if left <= 0:
                    proc.kill()
                    proc.wait()
                    raise subprocess.TimeoutExpired(args, timeout)
                for key, _ in selector.select(left):
                    chunk = os.read(key.fd, 65536)
                    if chunk:
                        captured[key.fd] += chunk
                    else:
                        selector.unregister(key.fd)
        finally:
            os.close(out_read)
            os.close(err_read)
    code = proc.wait(max(0.0, deadline - time.monotonic()) + 5)
    encoding = locale.getpreferredencoding(False)
    return subprocess.CompletedProcess(args, code, _text(captured[out_read], encoding),
                                       _text(captured[err_read], encoding))


def _text(data: bytes, encoding: str) -> str:
    """As Popen(text=True) decodes: the locale's encoding, universal newlines."""
    return data.decode(encoding).replace("\r\n", "\n").replace("\r", "\n")


if __name__ == "__main__":
    main()
