"""`exec`: run a program without a shell, inside the workspace, with a timeout and an output cap.

Two layers keep a program inside the workspace:

1. The OS sandbox (sandbox.py): on Linux with Landlock each call starts through a launcher that
   confines itself (system folders read-only, the workspace writable, nothing else: no state,
   no config.toml, no /tmp, no $HOME) and then becomes the program. `tools.exec.sandbox` picks
   "auto" (sandbox when possible), "required" (refuse exec without it) or "off".
2. The argument checks (exec_checks.py), which decide what runs without asking. A call runs
   unasked only when all of these hold; otherwise the user must approve it, told exactly why:
   - argv[0] is a bare name on the allowlist (a path such as `./cat` may be a file the agent wrote);
   - that name, looked up on PATH, is not a file inside the workspace;
   - no argument refers to a path outside the workspace: absolute paths elsewhere, `..` or
     symlinks leading out (resolved from the call's cwd), `~…`, and the same inside options
     (`--file=/etc/x`, `-o/etc/x`);
   - no option reads file names from a file (`sort --files0-from`), follows symlinks while
     walking folders (`grep -R`, `ls -L`), runs another program (`sort --compress-program=sh`)
     or sets the clock (`date -s`).

Slow calls run in the background (agent/jobs/background.py, docs/background.md): `background: true`
returns a job id as soon as the program started, and a call still running after
`tools.exec.background_after_seconds` moves there by itself, so the session's lane is free for the
chat and the heartbeat. Approval, argument checks, sandbox and output cap are the same: the
registry asks before `run` starts anything, and a job is the very same call continuing.

3. The mount layer (mounts.py, bubblewrap): the agent's own files (protected.py: prompt files,
   skills/, exec's HOME) are read-only and the network is cut, unless the owner approved the call
   for it (`write_protected`, `network`); a guest's call never gets the files writable. Where
   bubblewrap cannot run, a guest's or a tainted run's exec calls need approval instead.

Relative PATH entries (`.`, empty) are dropped for the child: they would name the workspace.
The child's environment is built from an allowlist (ENV_ALLOWED, `tools.exec.env_allowlist`),
never by removing known secrets. The program runs in its own process group, which is killed
when the call ends, so nothing it started in the background outlives the call.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import shutil
import shlex
import signal
from pathlib import Path
from typing import Callable

from pydantic import Field

from clawgate.config.paths import Paths
from clawgate.config.schema import ExecSettings
from clawgate.workspace.guard import PathOutsideWorkspace

from ..trust.untrusted import wrap_untrusted
from .base import Args, Tool, ToolContext, ToolError
from .exec_checks import inside, operand_problem, option_problem, path_problem
from .files import _resolve
from .handoff import Background, JobLimit, ProcessInfo
from .mounts import MountStatus, Unprotectable, bwrap_argv, mount_status, prepare
from .sandbox import TMP_NAME, SandboxPolicy, SandboxStatus, argv_file, sandbox_status

log = logging.getLogger(__name__)

# What a program gets from the daemon's environment: locale, terminal and identity, nothing else
# (HOME, TMPDIR and PATH are set by exec itself). Credentials are never listed.
ENV_ALLOWED = frozenset({"LANG", "LANGUAGE", "TERM", "TZ", "USER", "LOGNAME", "SHELL", "COLORTERM", "NO_COLOR",
                         "HOME", "TMPDIR"})
_DRAIN_SECONDS = 0.5  # after the program ends or is killed: how long output already written may still arrive


class Exec(Tool):
    name = "exec"
    description = (
        "Run a program in the workspace; returns exit code and output. argv: program and arguments, no "
        "shell (no pipes, globs or ';'). Programs off the allowlist ask the user first. Slow ones (builds, "
        "tests): background=true returns a job id; the result joins the conversation when done (long "
        "calls move there by themselves)."
    )
    side_effects = True

    class Arguments(Args):
        argv: list[str] = Field(min_length=1, description="e.g. ['python3', 'script.py']")
        cwd: str = "."
        timeout: float | None = Field(None, gt=0, le=3600)
        background: bool = False
        write_protected: bool = Field(False, description="may write prompt files, skills/, HOME (asks)")
        network: bool = Field(False, description="asks")

    def __init__(self, settings: ExecSettings, *, sandbox: SandboxPolicy | None = None,
                 status: Callable[[], SandboxStatus] = sandbox_status,
                 background: "Background | None" = None,
                 mounts: Callable[[], MountStatus] = mount_status) -> None:
        """`sandbox` names what the sandbox protects (default: this CLAWGATE_HOME's state and
        config); `status` says whether the host can sandbox (injectable to simulate a host without),
        `mounts` whether it has the mount layer; `background` takes over slow calls (without it every
        call runs in the foreground)."""
        self.settings = settings
        # a session's own allowlist and the setting it comes from (its agent's exec_allowlist), or None: the
        # daemon's `tools.exec.allowlist` (gateway/agent_scope.py installs it with several agents)
        self.allowlist_of: Callable[[str], tuple[list[str], str] | None] | None = None
        self._mount_status = mounts
        self.background = background
        self.sandbox = sandbox or SandboxPolicy.for_paths(Paths.from_env(), settings.sandbox_read_paths)
        self._status = status
        self._warned: set[Path] = set()

    def needs_approval(self, args: Arguments, ctx: ToolContext) -> str | None:
        if self._refusal():
            return None  # run() refuses it before anything starts; asking first would be pointless
        reasons = [r for r in (self._effect_reason(args, ctx), self._argument_reason(args, ctx)) if r]
        return "; ".join(reasons) or None

    def _effect_reason(self, args: Arguments, ctx: ToolContext) -> str | None:
        """What the call may do beyond ordinary workspace files, decided on the sandbox, not the command."""
        wanted = []
        if args.write_protected and ctx.owner:  # a guest's call never gets them (run refuses)
            wanted.append("change the agent's own files (prompt files, skills/, HOME dotfiles)")
        if args.network:
            wanted.append("use the network")
        if wanted:
            return "the program may " + " and ".join(wanted)
        if (ctx.taint.tainted or not ctx.owner) and not (mounts := self._mounts()).available:
            whose = "tainted" if ctx.taint.tainted else "a guest's"
            return (f"this host cannot keep the agent's own files read-only for programs ({mounts.detail}), "
                    f"and this run is {whose}")
        return None

    def _mounts(self) -> MountStatus:
        if self.settings.sandbox == "off" or not self._status().available:
            return MountStatus(False, "exec's sandbox is off" if self.settings.sandbox == "off" else "no Landlock")
        return self._mount_status()

    def _argument_reason(self, args: Arguments, ctx: ToolContext) -> str | None:
        program = args.argv[0]
        if "/" in program or (os.altsep and os.altsep in program):
            return (f"argv[0] {program!r} is a path, not a program name: running a file by path "
                    "(possibly one written in the workspace) needs approval")
        own = self.allowlist_of(ctx.session_key) if self.allowlist_of is not None else None
        allowlist, setting = own if own is not None else (self.settings.allowlist, "tools.exec.allowlist")
        if program not in allowlist:
            return f"{program!r} is not on the exec allowlist ({setting})"
        try:
            cwd = ctx.workspace.resolve(args.cwd)
        except PathOutsideWorkspace:
            return None  # run() refuses it before anything starts
        found = shutil.which(program, path=_search_path())
        if found and inside(ctx.workspace, found):
            return f"{program!r} resolves to {os.path.realpath(found)}, a file inside the workspace, not a system program"
        if reason := option_problem(program, args.argv[1:]):
            return reason
        for arg in args.argv[1:]:
            if reason := path_problem(arg, cwd, ctx.workspace):
                return reason
        return operand_problem(program, args.argv[1:], cwd)

    def summarize(self, args: Arguments) -> str:
        """Quoted as a shell would need it, so `rm "a b"` and `rm a b` never look alike; never cut here
        (the approval prompt cuts, and says so)."""
        grants = [g for g, on in (("may change the agent's own files", args.write_protected),
                                  ("with network", args.network), ("in the background", args.background)) if on]
        return "exec " + self._command(args) + "".join(f"   ({g})" for g in grants)

    @staticmethod
    def _command(args: Arguments) -> str:
        return shlex.join(args.argv) + ("" if args.cwd in (".", "") else f"   (in {args.cwd})")

    def _refusal(self) -> str | None:
        """The one-line refusal when the sandbox is required but this host cannot provide it."""
        if self.settings.sandbox != "required":
            return None
        status = self._status()
        if status.available:
            return None
        return (f"exec refused: tools.exec.sandbox is \"required\" but there is no sandbox here ({status.detail}); "
                "run clawgate on Linux 5.13+ with Landlock enabled, or set tools.exec.sandbox = \"auto\"")

    async def _sandboxed(self) -> bool:
        if self.settings.sandbox == "off":
            return False
        status = await asyncio.to_thread(self._status)  # the first call probes with a child process
        if refusal := self._refusal():
            raise ToolError(refusal)
        return status.available

    async def run(self, args: Arguments, ctx: ToolContext) -> str:
        """Run in the foreground, or hand the running program to the background jobs: at once
        (`background`), or once it outlasts the foreground budget and there is room for a job."""
        jobs = self.background
        if args.background:
            if jobs is None:
                raise ToolError("background exec is not available here", "run the call without background")
            if (refusal := jobs.refusal(ctx.session_key)) is not None:
                raise ToolError(f"not started: {refusal}",
                                "wait for a job to end (/status lists them) or run this call in the foreground")
            timeout = args.timeout or self.settings.background_timeout_seconds
        else:
            timeout = args.timeout or self.settings.timeout_seconds
        budget = self.settings.background_after_seconds
        if jobs is None or (not args.background and not 0 < budget < timeout):
            return await self._execute(args, ctx, timeout, ProcessInfo())
        process = ProcessInfo()
        work = asyncio.ensure_future(self._execute(args, ctx, timeout, process))
        spawned = asyncio.ensure_future(process.spawned.wait())
        try:
            # background: until the program started (a name not found is still the call's own error);
            # otherwise: the foreground budget
            await asyncio.wait([work, spawned] if args.background else [work], timeout=None if args.background else budget,
                               return_when=asyncio.FIRST_COMPLETED)
            if work.done() or (not args.background and jobs.refusal(ctx.session_key) is not None):
                return await work  # finished, or no room for a job: the call simply goes on in the foreground
            entry = jobs.adopt(work, session_key=ctx.session_key, kind="exec", summary=self._command(args),
                               sender_id=ctx.sender_id, owner=ctx.owner,
                               deliver={"channel": ctx.channel, "chat_id": ctx.chat_id}, process=process,
                               user=ctx.user)
        except JobLimit as exc:
            work.cancel()
            raise ToolError(f"not started: {exc}", "wait for a job to end (/status lists them) or run this call in the "
                                                   "foreground") from None
        except BaseException:
            work.cancel()  # the run was stopped while waiting: the program dies with it, as in the foreground
            raise
        finally:
            spawned.cancel()
        how = "started in the background" if args.background else f"still running after {budget:g}s, so it moved to the background"
        return (f"{how} as job {entry.id} (limit {timeout:g}s). Its result will be added to this conversation when "
                "it ends. Do not run it again; go on with other work or tell the user it is running.")

    async def _execute(self, args: Arguments, ctx: ToolContext, timeout: float, process: ProcessInfo) -> str:
        cwd = _resolve(ctx, args.cwd)
        if not cwd.is_dir():
            raise ToolError(f"cwd {args.cwd} is not a directory", "pass an existing folder of the workspace")
        if args.write_protected and not ctx.owner:
            raise ToolError("a guest's programs never change the agent's own files",
                            "run the call without write_protected, or ask the owner to make the change")
        sandboxed = await self._sandboxed()
        env = child_env(self.settings.env_allowlist)
        command = args.argv
        status_r = status_w = argv_fd = None
        if sandboxed:
            self._warn_exposed(ctx.workspace.root)
            _scratch_env(env, ctx)
            prefix = await asyncio.to_thread(self._mount_prefix, args, ctx)
            status_r, status_w = os.pipe()
            if prefix:  # bubblewrap counts every argument; the program's own go in a file
                argv_fd = argv_file(args.argv)
            command = prefix + self.sandbox.launcher_argv(args.argv, ctx.workspace.root, env["PATH"], status_w,
                                                          ctx.scratch, argv_fd=argv_fd)
        # Our own pipe, not asyncio's: Process.wait() would also wait for asyncio's pipes to close,
        # which a killed program's background children (or a full pipe) could delay without end.
        out_r, out_w = os.pipe()
        try:
            proc = await asyncio.create_subprocess_exec(
                *command, cwd=str(cwd), env=env, stdin=asyncio.subprocess.DEVNULL, stdout=out_w,
                stderr=asyncio.subprocess.STDOUT, start_new_session=True,
                pass_fds=tuple(fd for fd in (status_w, argv_fd) if fd is not None),
            )
        except FileNotFoundError:
            _close(out_r, status_r)
            raise ToolError(f"program {args.argv[0]!r} not found", "check the name; there is no shell, so builtins like 'cd' do not exist") from None
        except PermissionError:
            _close(out_r, status_r)
            raise ToolError(f"program {args.argv[0]!r} is not executable", "run it through its interpreter, e.g. ['python3', file]") from None
        finally:
            _close(out_w, status_w, argv_fd)
        process.started(proc.pid)
        try:
            output, timed_out, code = await _supervise(proc, out_r, timeout, self.settings.output_cap_bytes)
        finally:
            report = None if status_r is None else _read_status(status_r)  # also closes it
        process.exit_code, process.timed_out = code, timed_out
        _raise_launch_failure(report, args.argv[0], self._outside(args.argv[0], ctx, env["PATH"]) if report else None)
        cap = self.settings.output_cap_bytes
        text = output[:cap].decode("utf-8", errors="replace")
        if len(output) > cap:
            text += f"\n[… output capped at {cap} bytes]"
        if sandboxed and code in (126, 127):  # a shim or script started, then was refused a file it runs
            text += self._refused_hint(text, ctx, env["PATH"])
        # The program's output is data from outside (a file it printed, a server it asked), never instructions.
        body = wrap_untrusted(("exec " + " ".join(args.argv))[:120], text) if text else ""
        if timed_out:
            return f"timed out after {timeout:g}s and was killed\n{body}"
        return f"exit code {code}\n{body}" if text else f"exit code {code} (no output)"

    def result_status(self, result: str) -> str:
        """A program that exited non-zero or was killed for its time ran, but failed."""
        ended = result.partition("\n")[0]
        if ended.startswith("timed out after") or (ended.startswith("exit code ") and not ended.startswith(
                ("exit code 0 ", "exit code 0\n")) and ended != "exit code 0"):
            return "failed"
        return "ok"

    def _mount_prefix(self, args: Arguments, ctx: ToolContext) -> list[str]:
        """bubblewrap's argv before the launcher, or [] where the host has no mount layer. What the
        approval covered is granted only to an approved call (`ctx.approved`, set by the registry)."""
        mounts = self._mounts()
        if not mounts.available:
            return []
        root = ctx.workspace.root
        writable = args.write_protected and ctx.approved and ctx.owner
        try:
            read_only = [] if writable else prepare(root, memory=ctx.taint.tainted)
            if ctx.scratch is not None and not writable:  # the person's HOME outside the workspace: dotfiles too
                read_only.append(ctx.scratch / "home")
        except Unprotectable as exc:
            raise ToolError(f"not run: {exc}", "replace it with a regular file (read_file, then write_file), "
                                               "or run the call with write_protected so the owner is asked") from None
        except OSError as exc:
            raise ToolError(f"not run: could not prepare exec's sandbox: {exc}", "check the workspace's permissions") from None
        return bwrap_argv(mounts, root, read_only, network=args.network and ctx.approved)

    def _outside(self, program: str, ctx: ToolContext, search_path: str) -> str | None:
        """The real path of `program` when the sandbox does not grant its folder (None: it does, or unknown)."""
        found = shutil.which(program, path=search_path)
        real = os.path.realpath(found) if found else None
        if real is None or self.sandbox.granted(real, ctx.workspace.root, search_path, ctx.scratch):
            return None
        return real

    def _refused_hint(self, output: str, ctx: ToolContext, search_path: str) -> str:
        """A note under the output when the program was refused a file outside the sandbox's folders (a
        version manager's shim whose interpreter lies elsewhere in the home folder): why, and how to allow it."""
        for path in dict.fromkeys(REFUSED.findall(output)):
            real = os.path.realpath(path)
            if not self.sandbox.granted(real, ctx.workspace.root, search_path, ctx.scratch):
                folder = os.path.dirname(real)
                return (f"\n[exec's sandbox does not grant {real}, so the program could not run it; the owner can "
                        f"allow it by adding {folder} (or the tool's root folder) to tools.exec.sandbox_read_paths "
                        "in config.toml]")
        return ""

    def _warn_exposed(self, root: Path) -> None:
        if root not in self._warned:
            self._warned.add(root)
            for path in self.sandbox.exposed(root):
                log.warning("the workspace %s contains %s, so exec's sandbox cannot hide it; "
                            "set agent.workspace to a folder outside it", root, path)


async def _supervise(proc: asyncio.subprocess.Process, out_r: int, timeout: float, cap: int) -> tuple[bytes, bool, int | None]:
    """Wait for the program (at most `timeout`), then kill its process group and collect output.

    The group is killed at the normal end too: background children (`sh -c "sleep 60 &"`)
    die with the call. Output is always drained, never left to fill the pipe, and the wait for
    it is bounded, so the call returns within about timeout + 2 * _DRAIN_SECONDS.
    """
    loop = asyncio.get_running_loop()
    capture = _Capture(cap, loop)
    transport, _ = await loop.connect_read_pipe(lambda: capture, os.fdopen(out_r, "rb", buffering=0))
    timed_out, code = False, None
    try:
        try:
            code = await asyncio.wait_for(proc.wait(), timeout)
        except asyncio.TimeoutError:
            timed_out = True
        _kill_group(proc.pid)
        if timed_out:
            try:
                code = await asyncio.wait_for(proc.wait(), _DRAIN_SECONDS)
            except asyncio.TimeoutError:
                pass  # unkillable for now (stuck in the kernel); the child watcher reaps it later
        await asyncio.wait([capture.closed], timeout=_DRAIN_SECONDS)
    except asyncio.CancelledError:
        _kill_group(proc.pid)
        raise
    finally:
        transport.close()
    return bytes(capture.data), timed_out, code


class _Capture(asyncio.Protocol):
    """Keeps the first cap + 1 bytes and discards the rest, so the writer never blocks."""

    def __init__(self, cap: int, loop: asyncio.AbstractEventLoop) -> None:
        self.cap = cap
        self.data = bytearray()
        self.closed: asyncio.Future[None] = loop.create_future()

    def data_received(self, data: bytes) -> None:
        room = self.cap + 1 - len(self.data)
        if room > 0:
            self.data += data[:room]

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)


# `bash: /home/me/.x/bin/tool: Permission denied`, `env: '/home/me/.x/bin/tool': Permission denied`
REFUSED = re.compile(r"['\"]?(/[^\s'\":]+)['\"]?: Permission denied")


def _read_status(fd: int) -> tuple[str, str] | None:
    """The launcher's failure report (kind, detail), if any; its write end is closed by now."""
    try:
        os.set_blocking(fd, False)
        raw = os.read(fd, 65536)
    except OSError:  # BlockingIOError: only if the launcher was still alive; nothing to report
        raw = b""
    finally:
        os.close(fd)
    if not raw:
        return None
    kind, _, detail = raw.decode("utf-8", errors="replace").strip().partition("\t")
    return kind, detail[:300]


def _raise_launch_failure(report: tuple[str, str] | None, program: str, outside: str | None = None) -> None:
    if report is None:
        return
    kind, detail = report
    if kind == "not_found":
        raise ToolError(f"program {program!r} not found", "check the name; there is no shell, so builtins like 'cd' do not exist")
    if kind == "not_executable" and outside is not None:
        raise ToolError(f"program {program!r} is {outside}, in a folder exec's sandbox does not grant",
                        f"the owner can allow it by adding {os.path.dirname(outside)} to tools.exec.sandbox_read_paths "
                        "in config.toml, or run it through an interpreter that is on PATH")
    if kind == "not_executable":
        raise ToolError(f"program {program!r} is not executable or lies outside the folders exec's sandbox may run",
                        "run it through its interpreter, e.g. ['python3', file], or add its folder to tools.exec.sandbox_read_paths")
    raise ToolError(f"exec's sandbox could not start the program: {detail}",
                    "set tools.exec.sandbox = \"off\" if this host cannot sandbox programs")


def _scratch_env(env: dict[str, str], ctx: ToolContext) -> None:
    """Point TMPDIR and HOME at the person's own folder outside every workspace (`ctx.scratch`): the
    sandbox hides /tmp and the real home, and programs that find them unreadable fail (git stops at an
    unreadable ~/.gitconfig). Outside the workspace, so no file tool — and no other person — can plant
    a `.gitconfig`, `.npmrc` or `.pth` there. Without one (tests), `<workspace>/.tmp`."""
    for key in ("TMPDIR", "HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME",
                "XDG_RUNTIME_DIR"):
        env.pop(key, None)  # the XDG folders then follow HOME
    if ctx.scratch is not None:  # HOME is read-only for programs (mounts.py): caches go to TMPDIR instead
        tmp = ctx.scratch / "tmp"
        env["TMPDIR"], env["HOME"], env["XDG_CACHE_HOME"] = str(tmp), str(ctx.scratch / "home"), str(tmp / ".cache")
        return
    try:
        tmp = ctx.workspace.resolve(TMP_NAME)
        (tmp / "home").mkdir(parents=True, exist_ok=True)
        home = ctx.workspace.resolve(f"{TMP_NAME}/home")  # checked again: either may be a symlink out
    except (ValueError, OSError):
        return
    # HOME is read-only for programs (mounts.py): caches go to TMPDIR instead.
    env["TMPDIR"], env["HOME"], env["XDG_CACHE_HOME"] = str(tmp), str(home), str(tmp / ".cache")


def child_env(extra: list[str] | tuple[str, ...] = ()) -> dict[str, str]:
    """The program's environment, from an allowlist: a credential the daemon holds in its
    environment (any name) never reaches a program unless the owner lists that name."""
    allowed = ENV_ALLOWED | set(extra)
    env = {k: v for k, v in os.environ.items() if k in allowed or k.startswith("LC_")}
    env["PATH"] = _search_path()  # the PATH needs_approval looked the program up on
    return env


def _search_path() -> str:
    """PATH without relative entries: for the child they would mean its cwd, the workspace."""
    entries = os.environ.get("PATH", os.defpath).split(os.pathsep)
    return os.pathsep.join(e for e in entries if os.path.isabs(e))


def _close(*fds: int | None) -> None:
    for fd in fds:
        if fd is not None:
            os.close(fd)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
